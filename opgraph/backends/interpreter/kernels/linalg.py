"""Reference kernel for Dot."""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS, accumulator
from opgraph.ops.linalg import Dot


@KERNELS.register(Dot)
def _dot(op: Dot, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    assert op.reduction_axes_count is not None
    wide = accumulator(a.dtype)
    result = np.tensordot(a.astype(wide), b.astype(wide), op.reduction_axes_count)
    return np.asarray(result).astype(a.dtype)
