"""Helpers that emit subgraphs of core ops without being ops themselves.

They live in :mod:`opgraph.ops.broadcasting` (and ``zeros_like`` in
:mod:`opgraph.ops.movement`), next to the ops they build on; this package keeps the names
``og.builders.*`` working.
"""

from opgraph.ops.broadcasting import (
    broadcast_to,
    numpy_broadcast,
    numpy_broadcast_shape,
    scalar_like,
)

__all__ = ["broadcast_to", "numpy_broadcast", "numpy_broadcast_shape", "scalar_like"]
