"""Reference kernels for elementwise ops (also the trigonometric and bitwise families)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.core.errors import ExecutionError
from opgraph.ops import bitwise as bw
from opgraph.ops import elementwise as ew
from opgraph.ops import trigonometric as tg

_UFUNCS: dict[type, Any] = {
    ew.Abs: np.abs,
    ew.Neg: np.negative,
    ew.Exp: np.exp,
    ew.Log: np.log,
    ew.Sqrt: np.sqrt,
    ew.Tanh: np.tanh,
    ew.Add: np.add,
    ew.Sub: np.subtract,
    ew.Mul: np.multiply,
    ew.Max: np.maximum,
    ew.Min: np.minimum,
    ew.Equal: np.equal,
    ew.NotEqual: np.not_equal,
    ew.Less: np.less,
    ew.LessOrEqual: np.less_equal,
    ew.Greater: np.greater,
    ew.GreaterOrEqual: np.greater_equal,
    ew.And: np.logical_and,
    ew.Or: np.logical_or,
    ew.Not: np.logical_not,
    ew.Xor: np.logical_xor,
    ew.IsNaN: np.isnan,
    ew.IsInf: np.isinf,
    ew.IsFinite: np.isfinite,
    ew.Sign: np.sign,
    bw.BitwiseNot: np.invert,
    bw.BitwiseAnd: np.bitwise_and,
    bw.BitwiseOr: np.bitwise_or,
    bw.BitwiseXor: np.bitwise_xor,
}

# Floating-point functions: f16 and bf16 are computed in f32 and rounded once.
_FLOAT_UFUNCS: dict[type, Any] = {
    ew.Reciprocal: np.reciprocal,
    tg.Sin: np.sin,
    tg.Cos: np.cos,
    tg.Tan: np.tan,
    tg.Asin: np.arcsin,
    tg.Acos: np.arccos,
    tg.Atan: np.arctan,
    tg.Sinh: np.sinh,
    tg.Cosh: np.cosh,
    tg.Asinh: np.arcsinh,
    tg.Acosh: np.arccosh,
    tg.Atanh: np.arctanh,
    tg.Atan2: np.arctan2,
}

# Rounding: integers are already integral (numpy's versions would return floats).
_ROUNDING_UFUNCS: dict[type, Any] = {
    ew.Ceil: np.ceil,
    ew.Floor: np.floor,
}


def _ufunc_kernel(ufunc: Any) -> Any:
    def kernel(op: Any, *args: np.ndarray) -> np.ndarray:
        return np.asarray(ufunc(*args))

    return kernel


def _float_kernel(ufunc: Any) -> Any:
    def kernel(op: Any, *args: np.ndarray) -> np.ndarray:
        dtype = args[0].dtype
        wide = [a.astype(np.float32) if a.itemsize < 4 else a for a in args]
        return np.asarray(ufunc(*wide)).astype(dtype)

    return kernel


def _rounding_kernel(ufunc: Any) -> Any:
    def kernel(op: Any, x: np.ndarray) -> np.ndarray:
        if x.dtype.kind in "iu":
            return x.copy()
        return np.asarray(ufunc(x))

    return kernel


for _cls, _ufunc in _UFUNCS.items():
    KERNELS.add(_cls, _ufunc_kernel(_ufunc))
for _cls, _ufunc in _FLOAT_UFUNCS.items():
    KERNELS.add(_cls, _float_kernel(_ufunc))
for _cls, _ufunc in _ROUNDING_UFUNCS.items():
    KERNELS.add(_cls, _rounding_kernel(_ufunc))


@KERNELS.register(ew.Sigmoid)
def _sigmoid(op: ew.Sigmoid, x: np.ndarray) -> np.ndarray:
    # 1/(1+e^-x) overflows harmlessly to 0 for very negative x; computed in f32+ for accuracy.
    wide = x.astype(np.promote_types(x.dtype, np.float32))
    return (1.0 / (1.0 + np.exp(-wide))).astype(x.dtype)


@KERNELS.register(ew.Relu)
def _relu(op: ew.Relu, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.zeros((), x.dtype))


@KERNELS.register(ew.Div)
def _div(op: ew.Div, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind not in "iu":
        return np.divide(a, b)
    _require_nonzero_divisor(b)
    quotient = np.floor_divide(a, b)
    if op.floor_division or a.dtype.kind == "u":
        return quotient
    # C semantics: round toward zero, i.e. one more than floor when signs differ inexactly.
    inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return quotient + inexact.astype(a.dtype)


def _require_nonzero_divisor(b: np.ndarray) -> None:
    if b.dtype.kind in "iu" and np.any(b == 0):
        raise ExecutionError("integer division by zero")


@KERNELS.register(ew.Mod)
def _mod(op: ew.Mod, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    _require_nonzero_divisor(b)
    return np.asarray(np.fmod(a, b) if op.fmod else np.remainder(a, b))


@KERNELS.register(ew.Round)
def _round(op: ew.Round, x: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        return x.copy()
    if op.mode is ew.RoundMode.HALF_TO_EVEN:
        return np.rint(x)
    whole = np.trunc(x)  # x - trunc(x) is exact, so the tie test is too
    away = np.abs(x - whole) >= 0.5
    return np.asarray(whole + np.where(away, np.sign(x), 0).astype(x.dtype))


@KERNELS.register(bw.BitShift)
def _bit_shift(op: bw.BitShift, x: np.ndarray, shift: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    amount = shift.astype(np.dtype(f"u{x.dtype.itemsize}"))  # negative amounts read as huge
    in_range = amount < bits
    safe = np.where(in_range, amount, 0).astype(x.dtype)
    if op.direction is bw.ShiftDirection.LEFT:
        return np.where(in_range, np.left_shift(x, safe), np.zeros((), x.dtype))
    beyond = np.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else 0
    return np.where(in_range, np.right_shift(x, safe), beyond).astype(x.dtype)


@KERNELS.register(ew.Pow)
def _pow(op: ew.Pow, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "i" and np.any(b < 0):
        raise ExecutionError("integer power with a negative exponent")
    return np.asarray(np.power(a, b))


@KERNELS.register(ew.Select)
def _select(op: ew.Select, condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(condition, x, y)


# ------------------------------------------------------------------------------------ erf
# numpy has no erf: a series on [0, 3] and a continued fraction for erfc beyond (both accurate
# to a few ulp in f64, checked against math.erf), evaluated in f64 and rounded once.
_ERF_SERIES_LIMIT = 3.0
_ERFC_FRACTION_DEPTH = 60


def _erf_series(x: np.ndarray) -> np.ndarray:
    """erf(x) = 2/sqrt(pi) e**-x² Σ 2**n x**(2n+1) / (2n+1)!! for 0 <= x <= 3 (positive terms,
    so no cancellation); stops when the last term no longer changes the sum."""
    x2 = x * x
    term = x.copy()
    total = x.copy()
    for n in range(200):
        term = term * (2.0 * x2 / (2 * n + 3))
        total = total + term
        if not np.any(term > total * 1e-17):
            break
    return 2.0 / math.sqrt(math.pi) * np.exp(-x2) * total


def _erfc_fraction(x: np.ndarray) -> np.ndarray:
    """erfc(x) = e**-x² / sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + …)))) for x >= 3."""
    fraction = x.copy()
    for n in range(_ERFC_FRACTION_DEPTH, 0, -1):
        fraction = x + (0.5 * n) / fraction
    return np.exp(-x * x) / (math.sqrt(math.pi) * fraction)


@KERNELS.register(ew.Erf)
def _erf(op: ew.Erf, x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    magnitude = np.abs(wide)
    small = magnitude <= _ERF_SERIES_LIMIT
    near = _erf_series(np.where(small, magnitude, 0.0))
    far = 1.0 - _erfc_fraction(np.where(small, 2 * _ERF_SERIES_LIMIT, magnitude))
    return np.copysign(np.where(small, near, far), wide).astype(x.dtype)
