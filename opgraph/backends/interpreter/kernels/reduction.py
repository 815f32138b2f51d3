"""Reference kernels for reductions. Empty reductions give the identity without reading."""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS, accumulator, highest, lowest
from opgraph.core.element_type import from_dtype
from opgraph.ops import reduction as rd


@KERNELS.register(rd.ReduceSum)
def _sum(op: rd.ReduceSum, x: np.ndarray) -> np.ndarray:
    wide = accumulator(x.dtype)
    return np.sum(x, axis=op.axes, dtype=wide, keepdims=op.keep_dims).astype(x.dtype)


@KERNELS.register(rd.ReduceProd)
def _prod(op: rd.ReduceProd, x: np.ndarray) -> np.ndarray:
    wide = accumulator(x.dtype)
    return np.prod(x, axis=op.axes, dtype=wide, keepdims=op.keep_dims).astype(x.dtype)


@KERNELS.register(rd.ReduceMax)
def _max(op: rd.ReduceMax, x: np.ndarray) -> np.ndarray:
    initial = lowest(from_dtype(x.dtype))
    return np.max(x, axis=op.axes, initial=initial, keepdims=op.keep_dims).astype(x.dtype)


@KERNELS.register(rd.ReduceMin)
def _min(op: rd.ReduceMin, x: np.ndarray) -> np.ndarray:
    initial = highest(from_dtype(x.dtype))
    return np.min(x, axis=op.axes, initial=initial, keepdims=op.keep_dims).astype(x.dtype)


@KERNELS.register(rd.ReduceAll)
def _all(op: rd.ReduceAll, x: np.ndarray) -> np.ndarray:
    return np.asarray(np.all(x, axis=op.axes, keepdims=op.keep_dims))


@KERNELS.register(rd.ReduceAny)
def _any(op: rd.ReduceAny, x: np.ndarray) -> np.ndarray:
    return np.asarray(np.any(x, axis=op.axes, keepdims=op.keep_dims))
