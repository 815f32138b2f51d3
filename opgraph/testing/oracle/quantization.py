"""Oracle entries for linear quantization: element by element with Python numbers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops.quantization import DequantizeLinear, QuantizeLinear
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
