"""NumPy-style broadcasting helpers; defined in :mod:`opgraph.ops.broadcasting`."""

from opgraph.ops.broadcasting import broadcast_to, numpy_broadcast, numpy_broadcast_shape

__all__ = ["broadcast_to", "numpy_broadcast", "numpy_broadcast_shape"]
