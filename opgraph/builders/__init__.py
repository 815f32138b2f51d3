"""Helpers that emit subgraphs of core ops without being ops themselves."""

from opgraph.builders.broadcasting import numpy_broadcast, numpy_broadcast_shape
from opgraph.builders.scalars import scalar_like

__all__ = ["numpy_broadcast", "numpy_broadcast_shape", "scalar_like"]
