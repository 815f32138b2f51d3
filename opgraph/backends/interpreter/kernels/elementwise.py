"""Reference kernels for elementwise ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.core.errors import ExecutionError
from opgraph.ops import elementwise as ew

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
}


def _ufunc_kernel(ufunc: Any) -> Any:
    def kernel(op: Any, *args: np.ndarray) -> np.ndarray:
        return np.asarray(ufunc(*args))

    return kernel


for _cls, _ufunc in _UFUNCS.items():
    KERNELS.add(_cls, _ufunc_kernel(_ufunc))


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
    if np.any(b == 0):
        raise ExecutionError("integer division by zero")
    quotient = np.floor_divide(a, b)
    if op.floor_division or a.dtype.kind == "u":
        return quotient
    # C semantics: round toward zero, i.e. one more than floor when signs differ inexactly.
    inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return quotient + inexact.astype(a.dtype)


@KERNELS.register(ew.Pow)
def _pow(op: ew.Pow, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "i" and np.any(b < 0):
        raise ExecutionError("integer power with a negative exponent")
    return np.asarray(np.power(a, b))


@KERNELS.register(ew.Select)
def _select(op: ew.Select, condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(condition, x, y)
