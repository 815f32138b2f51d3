"""Oracle entry for Convert: element by element in Python."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops.conversion import Bitcast, Convert
from opgraph.testing.oracle.registry import ORACLE


def _to_int(value: float, low: int, high: int) -> int:
    if math.isnan(value):
        return 0
    if math.isinf(value):
        return high if value > 0 else low
    return max(low, min(high, int(value)))  # int() truncates toward zero


@ORACLE.register(Convert)
def _convert(op: Convert, x: np.ndarray, out: Any) -> np.ndarray:
    target = op.element_type
    if target.is_boolean:
        return np.array([v != 0 for v in x.ravel().tolist()], dtype=bool).reshape(x.shape)
    if target.is_integral:
        info = np.iinfo(target.dtype)
        source = x.astype(np.float64) if x.dtype.kind in "fV" or x.dtype.name == "bfloat16" else x
        items = [
            _to_int(float(v), int(info.min), int(info.max))
            if isinstance(v, float)
            else max(int(info.min), min(int(info.max), int(v)))
            for v in source.ravel().tolist()
        ]
        return np.array(items, dtype=target.dtype).reshape(x.shape)
    return (
        x.astype(np.float64).astype(target.dtype) if x.dtype.kind != "b" else x.astype(target.dtype)
    )


@ORACLE.register(Bitcast)
def _bitcast(op: Bitcast, x: np.ndarray, out: Any) -> np.ndarray:
    """Through the raw little-endian bytes, element by element."""
    size = op.element_type.itemsize
    raw = b"".join(v.tobytes() for v in x.reshape(-1))
    items = [
        np.frombuffer(raw[i : i + size], op.element_type.dtype)[0] for i in range(0, len(raw), size)
    ]
    return np.array(items, dtype=op.element_type.dtype).reshape(x.shape)
