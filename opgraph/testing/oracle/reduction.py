"""Oracle entries for reductions (identities for empty reductions), including direct formulas
for the reductions the ops define by decomposition."""

from __future__ import annotations

import math
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

# Formulas that reduce over no axes correctly by themselves (``()`` is elementwise).
_DIRECT: dict[type, Callable[..., Any]] = {
    rd.ReduceAll: lambda x, axes, keep, orig: np.add.reduce(~x, axes, np.int64, keepdims=keep) == 0,
    rd.ReduceAny: lambda x, axes, keep, orig: np.add.reduce(x, axes, np.int64, keepdims=keep) > 0,
    rd.ReduceMean: lambda x, axes, keep, orig: (
        np.add.reduce(x, axis=axes, keepdims=keep) / math.prod(x.shape[a] for a in axes)
    ),
    rd.ReduceL1: lambda x, axes, keep, orig: np.add.reduce(np.abs(x), axis=axes, keepdims=keep),
    rd.ReduceL2: lambda x, axes, keep, orig: np.sqrt(np.add.reduce(x**2, axis=axes, keepdims=keep)),
    rd.ReduceLogSum: lambda x, axes, keep, orig: np.log(np.add.reduce(x, axis=axes, keepdims=keep)),
    rd.ReduceLogSumExp: lambda x, axes, keep, orig: _log_add_exp(x, axes, keep),
    rd.ReduceSumSquare: lambda x, axes, keep, orig: np.add.reduce(x**2, axis=axes, keepdims=keep),
}


def _log_add_exp(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    """``log(Σ exp(x))`` by pairwise ``logaddexp`` over the reduced axes moved last."""
    kept = [a for a in range(x.ndim) if a not in axes]
    count = math.prod(x.shape[a] for a in axes)
    grouped = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [count])
    result = np.logaddexp.reduce(grouped, axis=-1, initial=-np.inf)
    if keep:
        result = result.reshape([1 if a in axes else d for a, d in enumerate(x.shape)])
    return np.asarray(result)


def _entry(reducer: Callable[..., Any]) -> Callable[..., Any]:
    def oracle(op: Any, x: np.ndarray, out: Any) -> np.ndarray:
        source = wide(x)
        if op.axes == ():
            return narrow(source, out)
        return narrow(reducer(source, op.axes, op.keep_dims, x), out)

    return oracle


def _direct_entry(reducer: Callable[..., Any]) -> Callable[..., Any]:
    def oracle(op: Any, x: np.ndarray, out: Any) -> np.ndarray:
        return narrow(reducer(wide(x), op.axes, op.keep_dims, x), out)

    return oracle


for _cls, _reducer in _REDUCERS.items():
    ORACLE.add(_cls, _entry(_reducer))
for _cls, _reducer in _DIRECT.items():
    ORACLE.add(_cls, _direct_entry(_reducer))
