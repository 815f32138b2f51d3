"""Oracle entries for linear quantization: element by element with Python numbers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops.quantization import ConvInteger, DequantizeLinear, MatMulInteger, QuantizeLinear
from opgraph.testing.oracle.registry import ORACLE


def _parameter(value: np.ndarray, index: tuple[int, ...], axis: int | None) -> Any:
    return value[()] if axis is None else value[index[axis]]


def _round_half_even(value: float) -> float:
    if math.isnan(value):
        return 0.0
    if math.isinf(value):
        return value
    return float(round(value))  # Python's round() on floats rounds half to even


@ORACLE.register(QuantizeLinear)
def _quantize(
    op: QuantizeLinear, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, out: Any
) -> np.ndarray:
    info = np.iinfo(zero_point.dtype)
    result = np.empty(x.shape, zero_point.dtype)
    for index in np.ndindex(*x.shape):
        ratio = float(x[index]) / float(_parameter(scale, index, op.axis))
        value = _round_half_even(ratio) + int(_parameter(zero_point, index, op.axis))
        result[index] = int(min(max(value, int(info.min)), int(info.max)))
    return result


@ORACLE.register(DequantizeLinear)
def _dequantize(
    op: DequantizeLinear, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, out: Any
) -> np.ndarray:
    result = np.empty(x.shape, np.float64)
    for index in np.ndindex(*x.shape):
        shifted = int(x[index]) - int(_parameter(zero_point, index, op.axis))
        result[index] = shifted * float(_parameter(scale, index, op.axis))
    return result.astype(out[0].element_type.dtype)


def _wrap32(total: int) -> int:
    return (total + (1 << 31)) % (1 << 32) - (1 << 31)


def _point(value: np.ndarray, index: int) -> int:
    return int(value[()]) if value.ndim == 0 else int(value[index])


@ORACLE.register(MatMulInteger)
def _matmul_integer(
    op: MatMulInteger, a: np.ndarray, b: np.ndarray, az: np.ndarray, bz: np.ndarray, out: Any
) -> np.ndarray:
    result = np.empty((*a.shape[:-1], b.shape[1]), np.int32)
    for index in np.ndindex(*result.shape):
        row, n = index[:-1], index[-1]
        total = sum(
            (int(a[(*row, k)]) - int(az[()])) * (int(b[k, n]) - _point(bz, n))
            for k in range(b.shape[0])
        )
        result[index] = _wrap32(total)
    return result


@ORACLE.register(ConvInteger)
def _conv_integer(
    op: ConvInteger, x: np.ndarray, w: np.ndarray, xz: np.ndarray, wz: np.ndarray, out: Any
) -> np.ndarray:
    assert op.strides is not None and op.dilations is not None and op.padding_below is not None
    shape = out[0].shape
    per_group = w.shape[0] // op.groups
    result = np.empty(shape, np.int32)
    for index in np.ndindex(*shape):
        image, channel, position = index[0], index[1], index[2:]
        first = channel // per_group * w.shape[1]
        total = 0
        for c in range(w.shape[1]):
            for tap in np.ndindex(*w.shape[2:]):
                at = tuple(
                    p * s + t * d - pb
                    for p, s, t, d, pb in zip(
                        position, op.strides, tap, op.dilations, op.padding_below, strict=True
                    )
                )
                if all(0 <= i < n for i, n in zip(at, x.shape[2:], strict=True)):
                    data = int(x[(image, first + c, *at)]) - int(xz[()])
                    total += data * (int(w[(channel, c, *tap)]) - _point(wz, channel))
        result[index] = _wrap32(total)
    return result
