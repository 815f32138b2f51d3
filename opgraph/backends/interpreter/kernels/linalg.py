"""Reference kernels for Dot, and a native one for MatMul (its decomposition stays its
specification; the numeric tests compare this kernel with the oracle)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS, accumulator, is_float
from opgraph.ops.linalg import Dot, MatMul


@KERNELS.register(Dot)
def _dot(op: Dot, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    assert op.reduction_axes_count is not None
    wide = accumulator(a.dtype)
    result = np.tensordot(a.astype(wide), b.astype(wide), op.reduction_axes_count)
    return np.asarray(result).astype(a.dtype)


def _wide(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """f16 and bf16 accumulate in f32 (bf16's numpy kind is not "f", so test by name too)."""
    return np.dtype(np.float32) if is_float(dtype) and dtype.itemsize < 4 else dtype


@KERNELS.register(MatMul)
def _matmul(op: MatMul, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    wide = _wide(a.dtype)
    return np.asarray(np.matmul(a.astype(wide), b.astype(wide))).astype(a.dtype)
