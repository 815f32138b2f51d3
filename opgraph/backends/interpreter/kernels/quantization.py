"""Reference kernels for linear quantization."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.convolution import _convolution
from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.core import element_type as et
from opgraph.core.tensor_type import TensorType
from opgraph.ops.quantization import ConvInteger, DequantizeLinear, MatMulInteger, QuantizeLinear

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


def _centered(x: Array, zero_point: Array, axis: int | None) -> Array:
    """``x - zero_point`` in int64 (exact), the zero point scalar or along ``axis``."""
    return x.astype(np.int64) - _along(zero_point, axis, x.ndim).astype(np.int64)


def _wrapped(total: Array) -> Array:
    """An exact integer sum as i32, wrapped (two's complement)."""
    return total.astype(np.int64).astype(np.int32)


@KERNELS.register(MatMulInteger)
def _matmul_integer(op: MatMulInteger, a: Array, b: Array, az: Array, bz: Array) -> Array:
    axis = None if bz.ndim == 0 else 1
    return _wrapped(np.matmul(_centered(a, az, None), _centered(b, bz, axis)))


@KERNELS.register(ConvInteger)
def _conv_integer(op: ConvInteger, x: Array, w: Array, xz: Array, wz: Array) -> Array:
    # Sums of products of 9-bit integers: exact in f64 below 2**53 (K < 2**36 terms).
    data = _centered(x, xz, None).astype(np.float64)
    filters = _centered(w, wz, None if wz.ndim == 0 else 0).astype(np.float64)
    conv = op.float_convolution().canonicalize(*(_float(v) for v in (x, w)))
    return _wrapped(np.rint(_convolution(conv, data, filters)))


def _float(value: Array) -> TensorType:
    return TensorType(et.f32, value.shape)
