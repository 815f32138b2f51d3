"""Oracle entries for reductions (identities for empty reductions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops import reduction as rd
from opgraph.testing.oracle.registry import ORACLE, narrow, wide


def _identity_max(x: np.ndarray) -> Any:
    return -np.inf if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else np.iinfo(x.dtype).min


def _identity_min(x: np.ndarray) -> Any:
    return np.inf if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else np.iinfo(x.dtype).max


# ``reducer(wide_x, axes, keep_dims, original_x)``; identities come from the original type.
_REDUCERS: dict[type, Callable[..., Any]] = {
    rd.ReduceSum: lambda x, axes, keep, orig: np.add.reduce(x, axis=axes, keepdims=keep),
    rd.ReduceProd: lambda x, axes, keep, orig: np.multiply.reduce(x, axis=axes, keepdims=keep),
    rd.ReduceMax: lambda x, axes, keep, orig: np.maximum.reduce(
        x, axis=axes, keepdims=keep, initial=_identity_max(orig)
    ),
    rd.ReduceMin: lambda x, axes, keep, orig: np.minimum.reduce(
        x, axis=axes, keepdims=keep, initial=_identity_min(orig)
    ),
}


def _entry(reducer: Callable[..., Any]) -> Callable[..., Any]:
    def oracle(op: Any, x: np.ndarray, out: Any) -> np.ndarray:
        source = wide(x)
        if op.axes == ():
            return narrow(source, out)
        return narrow(reducer(source, op.axes, op.keep_dims, x), out)

    return oracle


for _cls, _reducer in _REDUCERS.items():
    ORACLE.add(_cls, _entry(_reducer))
