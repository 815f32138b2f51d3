"""Oracle entries for elementwise ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops import elementwise as ew
from opgraph.testing.oracle.registry import ORACLE, narrow, wide

_FORMULAS: dict[type, Callable[..., Any]] = {
    ew.Abs: lambda x: np.where(x < 0, -x, x),
    ew.Neg: lambda x: 0 - x,
    ew.Exp: np.exp,
    ew.Log: np.log,
    ew.Sqrt: np.sqrt,
    ew.Tanh: lambda x: np.sinh(x) / np.cosh(x) if np.all(np.abs(x) < 300) else np.tanh(x),
    ew.Sigmoid: lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),
    ew.Relu: lambda x: np.where(x > 0, x, 0),
    ew.Add: lambda a, b: a + b,
    ew.Sub: lambda a, b: a - b,
    ew.Mul: lambda a, b: a * b,
    ew.Max: lambda a, b: (
        np.where(np.isnan(a) | (a >= b), a, b) if a.dtype.kind == "f" else np.maximum(a, b)
    ),
    ew.Min: lambda a, b: (
        np.where(np.isnan(a) | (a <= b), a, b) if a.dtype.kind == "f" else np.minimum(a, b)
    ),
    ew.Pow: lambda a, b: a**b,
    ew.Equal: lambda a, b: a == b,
    ew.NotEqual: lambda a, b: a != b,
    ew.Less: lambda a, b: a < b,
    ew.LessOrEqual: lambda a, b: a <= b,
    ew.Greater: lambda a, b: a > b,
    ew.GreaterOrEqual: lambda a, b: a >= b,
    ew.And: lambda a, b: a & b,
    ew.Or: lambda a, b: a | b,
    ew.Not: lambda x: ~x,
}


def _entry(formula: Callable[..., Any]) -> Callable[..., Any]:
    def oracle(op: Any, *args: np.ndarray, out: Any) -> np.ndarray:
        return narrow(formula(*(wide(a) for a in args)), out)

    return oracle


for _cls, _formula in _FORMULAS.items():
    ORACLE.add(_cls, _entry(_formula))


@ORACLE.register(ew.Div)
def _div(op: ew.Div, a: np.ndarray, b: np.ndarray, out: Any) -> np.ndarray:
    if a.dtype.kind not in "iu":
        return narrow(wide(a) / wide(b), out)
    pairs = zip(a.ravel().tolist(), b.ravel().tolist(), strict=True)
    if op.floor_division:
        values = [x // y for x, y in pairs]
    else:
        values = [abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1) for x, y in pairs]
    return narrow(
        np.array(values, dtype=object)
        .reshape(a.shape)
        .astype(np.int64 if a.dtype.kind == "i" else np.uint64),
        out,
    )


@ORACLE.register(ew.Select)
def _select(op: ew.Select, c: np.ndarray, x: np.ndarray, y: np.ndarray, out: Any) -> np.ndarray:
    result = y.copy()
    result[c] = x[c]
    return result
