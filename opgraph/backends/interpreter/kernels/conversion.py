"""Reference kernel for Convert."""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS, is_float
from opgraph.ops.conversion import Bitcast, Convert


@KERNELS.register(Convert)
def _convert(op: Convert, x: np.ndarray) -> np.ndarray:
    target = op.element_type
    if target.is_boolean:
        return x != 0
    if target.is_integral and is_float(x.dtype):
        return _float_to_int(x.astype(np.float64), target.dtype)
    if target.is_integral and x.dtype.kind in "iu":
        info = np.iinfo(target.dtype)
        return np.clip(
            x, max(info.min, np.iinfo(x.dtype).min), min(info.max, np.iinfo(x.dtype).max)
        ).astype(target.dtype)
    return x.astype(target.dtype)


def _float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:  # type: ignore[type-arg]
    """Truncate toward zero, saturate at the type's range, NaN -> 0."""
    info = np.iinfo(dtype)
    truncated = np.trunc(np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf))
    high = truncated >= float(info.max)
    low = truncated <= float(info.min)
    result = np.where(high | low, 0.0, truncated).astype(dtype)
    result[high] = info.max
    result[low] = info.min
    return result


@KERNELS.register(Bitcast)
def _bitcast(op: Bitcast, x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(op.element_type.dtype).reshape(x.shape)
