"""Reference kernels for linear quantization."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.ops.quantization import DequantizeLinear, QuantizeLinear

Array = np.ndarray[Any, Any]


def _along(value: Array, axis: int | None, rank: int) -> Array:
    """A scalar, or a 1-D array reshaped to broadcast along ``axis`` of rank-``rank`` data."""
    if axis is None:
        return value
    shape = [1] * rank
    shape[axis] = -1
    return value.reshape(shape)


@KERNELS.register(QuantizeLinear)
def _quantize(op: QuantizeLinear, x: Array, scale: Array, zero_point: Array) -> Array:
    # x / scale in f32 (f64 for f64 input), as ONNX runtimes do; NaN quantizes to zero_point.
    wide = np.float64 if x.dtype == np.float64 else np.float32
    ratio = x.astype(wide) / _along(scale, op.axis, x.ndim).astype(wide)
    rounded = np.rint(np.nan_to_num(ratio, nan=0.0, posinf=np.inf, neginf=-np.inf))
    shifted = rounded.astype(np.float64) + _along(zero_point, op.axis, x.ndim).astype(np.float64)
    info = np.iinfo(zero_point.dtype)
    return np.clip(shifted, info.min, info.max).astype(zero_point.dtype)


@KERNELS.register(DequantizeLinear)
def _dequantize(op: DequantizeLinear, x: Array, scale: Array, zero_point: Array) -> Array:
    shifted = x.astype(np.int64) - _along(zero_point, op.axis, x.ndim).astype(np.int64)
    product = shifted.astype(np.float64) * _along(scale, op.axis, x.ndim).astype(np.float64)
    return product.astype(scale.dtype)
