"""Oracle entries for the activation ops: textbook formulas in f64 (64-bit integers)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops import activation as act
from opgraph.testing.oracle.registry import ORACLE, narrow, wide

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(op: act.Gelu, x: np.ndarray) -> np.ndarray:
    if op.approximate is act.GeluApproximation.TANH:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _elu(alpha: float, x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


_FORMULAS: dict[type, Callable[[Any, np.ndarray], np.ndarray]] = {
    act.Gelu: _gelu,
    act.Elu: lambda op, x: _elu(op.alpha, x),
    act.Selu: lambda op, x: op.gamma * _elu(op.alpha, x),
    act.LeakyRelu: lambda op, x: np.where(x >= 0, x, op.alpha * x),
    act.HardSigmoid: lambda op, x: np.clip(op.alpha * x + op.beta, 0, 1),
    act.HardSwish: lambda op, x: x * np.clip(x / 6 + 0.5, 0, 1),
    act.Softplus: lambda op, x: np.logaddexp(0, x),
    act.Softsign: lambda op, x: x / (1 + np.abs(x)),
    act.Mish: lambda op, x: x * np.tanh(np.logaddexp(0, x)),
}


def _entry(formula: Callable[[Any, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def oracle(op: Any, x: np.ndarray, out: Any) -> np.ndarray:
        return narrow(formula(op, wide(x)), out)

    return oracle


for _cls, _formula in _FORMULAS.items():
    ORACLE.add(_cls, _entry(_formula))


@ORACLE.register(act.PRelu)
def _prelu(op: act.PRelu, x: np.ndarray, slope: np.ndarray, out: Any) -> np.ndarray:
    s = wide(slope)
    if op.axis is not None:
        s = s.reshape([-1 if a == op.axis else 1 for a in range(x.ndim)])
    xs = wide(x)
    return narrow(np.where(xs >= 0, xs, xs * np.broadcast_to(s, x.shape)), out)


@ORACLE.register(act.Clamp)
def _clamp(op: act.Clamp, x: np.ndarray, out: Any) -> np.ndarray:
    low = _clamp_bound(op.min_value, x.dtype, math.ceil)
    high = _clamp_bound(op.max_value, x.dtype, math.floor)
    result = wide(x)
    if low is not None:
        result = np.where(result < low, np.asarray(low).astype(result.dtype), result)
    if high is not None:
        result = np.where(result > high, np.asarray(high).astype(result.dtype), result)
    return narrow(result, out)


def _clamp_bound(value: float | None, dtype: np.dtype, rounding: Any) -> float | int | None:
    """A bound as a Python number the widened input compares with: for integers rounded
    inward, then limited to the type's range (an infinite bound is the type's end)."""
    if value is None:
        return None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if isinstance(value, float) and math.isinf(value):
            return int(info.max) if value > 0 else int(info.min)
        return min(max(rounding(value), int(info.min)), int(info.max))
    if abs(value) > float(np.finfo(np.float64).max):  # an int beyond every float: an infinity
        return math.inf if value > 0 else -math.inf
    return float(value)


@ORACLE.register(act.SquaredDifference)
def _squared_difference(
    op: act.SquaredDifference, a: np.ndarray, b: np.ndarray, out: Any
) -> np.ndarray:
    difference = wide(a) - wide(b)
    return narrow(difference * difference, out)
