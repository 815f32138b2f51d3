"""Oracle entries for elementwise ops (also the trigonometric and bitwise families).

Where cheap, the formulas differ from the kernels' numpy calls: trigonometric inverses from
logarithms and atan2, rounding, remainders and bit operations element by element in Python.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops import bitwise as bw
from opgraph.ops import elementwise as ew
from opgraph.ops import trigonometric as tg
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
    ew.Xor: lambda a, b: a != b,
    ew.Ceil: lambda x: x if x.dtype.kind in "iu" else -np.floor(-x),
    ew.Floor: lambda x: x if x.dtype.kind in "iu" else -np.ceil(-x),
    ew.Sign: lambda x: (
        np.where(x > 0, 1, 0)
        if x.dtype.kind == "u"
        else np.where(x > 0, 1, np.where(x < 0, -1, x - x))  # x - x keeps NaN and 0
    ),
    ew.Reciprocal: lambda x: 1.0 / x,
    ew.IsNaN: lambda x: x != x,
    ew.IsInf: lambda x: (x == np.inf) | (x == -np.inf),
    ew.IsFinite: lambda x: np.abs(x) < np.inf,
    tg.Sin: np.sin,
    tg.Cos: lambda x: np.sin(np.pi / 2 - x),
    tg.Tan: lambda x: np.sin(x) / np.cos(x),
    tg.Asin: lambda x: _outside(np.abs(x) > 1, np.arctan2(x, np.sqrt(1 - x * x))),
    tg.Acos: lambda x: _outside(np.abs(x) > 1, np.arctan2(np.sqrt(1 - x * x), x)),
    tg.Atan: lambda x: np.arctan2(x, np.ones_like(x)),
    tg.Sinh: lambda x: (np.expm1(x) - np.expm1(-x)) / 2,
    tg.Cosh: lambda x: (np.exp(x) + np.exp(-x)) / 2,
    tg.Asinh: lambda x: np.sign(x) * np.log1p(np.abs(x) + x * x / (1 + np.sqrt(1 + x * x))),
    tg.Acosh: lambda x: _outside(x < 1, np.log(x + np.sqrt((x - 1) * (x + 1)))),
    tg.Atanh: lambda x: _outside(np.abs(x) > 1, 0.5 * (np.log1p(x) - np.log1p(-x))),
}


def _outside(domain_error: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.where(domain_error, np.nan, values)


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


_MATH_ERF = np.frompyfunc(math.erf, 1, 1)


@ORACLE.register(ew.Erf)
def _erf(op: ew.Erf, x: np.ndarray, out: Any) -> np.ndarray:
    return narrow(_MATH_ERF(wide(x)).astype(np.float64), out)


def _elementwise(fn: Callable[..., Any], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` applied to Python scalars element by element (object array of the results)."""
    items = [fn(*values) for values in zip(*(a.ravel().tolist() for a in arrays), strict=True)]
    return np.array(items, dtype=object).reshape(arrays[0].shape)


def _round_half_to_even(v: float) -> float:
    return float(round(v)) if math.isfinite(v) else v  # Python's round ties to even


def _round_half_away(v: float) -> float:
    if not math.isfinite(v):
        return v
    exact = decimal.Decimal(v).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP)
    return math.copysign(float(exact), v)


@ORACLE.register(ew.Round)
def _round(op: ew.Round, x: np.ndarray, out: Any) -> np.ndarray:
    if x.dtype.kind in "iu":
        return x.copy()
    half_even = op.mode is ew.RoundMode.HALF_TO_EVEN
    rounded = _elementwise(_round_half_to_even if half_even else _round_half_away, wide(x))
    return narrow(rounded.astype(np.float64), out)


def _float_mod(a: float, b: float, fmod: bool) -> float:
    if b == 0 or math.isnan(a) or math.isnan(b) or math.isinf(a):
        return math.nan
    return math.fmod(a, b) if fmod else a % b


def _int_mod(a: int, b: int, fmod: bool) -> int:
    if not fmod:
        return a % b  # Python: the sign of the divisor
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncated
    return a - quotient * b


@ORACLE.register(ew.Mod)
def _mod(op: ew.Mod, a: np.ndarray, b: np.ndarray, out: Any) -> np.ndarray:
    if a.dtype.kind in "iu":
        values = _elementwise(lambda x, y: _int_mod(x, y, op.fmod), a, b)
        return narrow(values.astype(np.int64 if a.dtype.kind == "i" else np.uint64), out)
    values = _elementwise(lambda x, y: _float_mod(x, y, op.fmod), wide(a), wide(b))
    return narrow(values.astype(np.float64), out)


@ORACLE.register(tg.Atan2)
def _atan2(op: tg.Atan2, y: np.ndarray, x: np.ndarray, out: Any) -> np.ndarray:
    return narrow(_elementwise(math.atan2, wide(y), wide(x)).astype(np.float64), out)


def _to_type(value: int, dtype: np.dtype[Any]) -> int:
    """A Python int wrapped into ``dtype``'s range (two's complement)."""
    bits = dtype.itemsize * 8
    value &= (1 << bits) - 1
    return value - (1 << bits) if dtype.kind == "i" and value >> (bits - 1) else value


def _bitwise_entry(fn: Callable[..., Any]) -> Callable[..., Any]:
    def oracle(op: Any, *args: np.ndarray, out: Any) -> np.ndarray:
        dtype = args[0].dtype
        if dtype.kind == "b":
            return _elementwise(lambda *v: bool(fn(*v) & 1), *args).astype(bool)
        values = _elementwise(lambda *v: _to_type(fn(*v), dtype), *args)
        return values.astype(dtype)

    return oracle


_BITWISE: dict[type, Callable[..., Any]] = {
    bw.BitwiseNot: lambda x: ~int(x),
    bw.BitwiseAnd: lambda a, b: int(a) & int(b),
    bw.BitwiseOr: lambda a, b: int(a) | int(b),
    bw.BitwiseXor: lambda a, b: int(a) ^ int(b),
}
for _cls, _fn in _BITWISE.items():
    ORACLE.add(_cls, _bitwise_entry(_fn))


def _shift(x: int, amount: int, bits: int, left: bool) -> int:
    if not 0 <= amount < bits:
        return -1 if x < 0 and not left else 0
    return x << amount if left else x >> amount  # Python's >> is arithmetic (floor)


@ORACLE.register(bw.BitShift)
def _bit_shift(op: bw.BitShift, x: np.ndarray, shift: np.ndarray, out: Any) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    left = op.direction is bw.ShiftDirection.LEFT
    values = _elementwise(lambda v, s: _to_type(_shift(v, s, bits, left), x.dtype), x, shift)
    return values.astype(x.dtype)
