"""Oracle entries for the recurrent cells: the ONNX equations in f64 numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops import rnn
from opgraph.testing.oracle.registry import ORACLE, narrow, wide

A = rnn.RnnActivation
_FUNCTIONS: dict[rnn.RnnActivation, Callable[[np.ndarray, float, float], np.ndarray]] = {
    A.SIGMOID: lambda x, a, b: 1 / (1 + np.exp(-x)),
    A.TANH: lambda x, a, b: np.tanh(x),
    A.RELU: lambda x, a, b: np.maximum(x, 0),
    A.HARD_SIGMOID: lambda x, a, b: np.clip(a * x + b, 0, 1),
    A.LEAKY_RELU: lambda x, a, b: np.where(x >= 0, x, a * x),
    A.THRESHOLDED_RELU: lambda x, a, b: np.where(x > a, x, 0),
    A.SCALED_TANH: lambda x, a, b: a * np.tanh(b * x),
    A.AFFINE: lambda x, a, b: a * x + b,
    A.ELU: lambda x, a, b: np.where(x > 0, x, a * np.expm1(np.minimum(x, 0))),
    A.SOFTSIGN: lambda x, a, b: x / (1 + np.abs(x)),
    A.SOFTPLUS: lambda x, a, b: np.logaddexp(0, x),
}


def _activation(op: rnn.RecurrentCell, index: int) -> Callable[[np.ndarray], np.ndarray]:
    assert op.activations and op.activation_alpha and op.activation_beta
    function = _FUNCTIONS[op.activations[index]]
    alpha, beta = op.activation_alpha[index], op.activation_beta[index]
    clip = op.clip

    def apply(x: np.ndarray) -> np.ndarray:
        return function(x if clip is None else np.clip(x, -clip, clip), alpha, beta)

    return apply


def _split(values: np.ndarray, parts: int) -> list[np.ndarray]:
    return np.split(values, parts, axis=-1)


@ORACLE.register(rnn.LSTMCell)
def _lstm(op: rnn.LSTMCell, *inputs: np.ndarray, out: Any) -> tuple[np.ndarray, np.ndarray]:
    x, h, c, w, r = (wide(v) for v in inputs[:5])
    hidden = h.shape[1]
    b = wide(inputs[5]) if len(inputs) > 5 else np.zeros(8 * hidden)
    p = wide(inputs[6]) if len(inputs) > 6 else np.zeros(3 * hidden)
    f, g, h_fn = (_activation(op, k) for k in range(3))
    wb, rb = _split(b, 2)
    zi, zo, zf, zc = _split(x @ w.T + h @ r.T + wb + rb, 4)
    pi, po, pf = _split(p, 3)
    i = f(zi + pi * c)
    forget = f(zf + pf * c)
    c_next = forget * c + i * g(zc)
    o = f(zo + po * c_next)
    return narrow(o * h_fn(c_next), out, 0), narrow(c_next, out, 1)


@ORACLE.register(rnn.GRUCell)
def _gru(op: rnn.GRUCell, *inputs: np.ndarray, out: Any) -> np.ndarray:
    x, h, w, r = (wide(v) for v in inputs[:4])
    hidden = h.shape[1]
    b = wide(inputs[4]) if len(inputs) > 4 else np.zeros(6 * hidden)
    f, g = _activation(op, 0), _activation(op, 1)
    wz, wr, wh = np.split(w, 3)
    rz, rr, rh = np.split(r, 3)
    wbz, wbr, wbh, rbz, rbr, rbh = _split(b, 6)
    z = f(x @ wz.T + h @ rz.T + wbz + rbz)
    reset = f(x @ wr.T + h @ rr.T + wbr + rbr)
    if op.linear_before_reset:
        candidate = g(x @ wh.T + reset * (h @ rh.T + rbh) + wbh)
    else:
        candidate = g(x @ wh.T + (reset * h) @ rh.T + rbh + wbh)
    return narrow((1 - z) * candidate + z * h, out)


@ORACLE.register(rnn.RNNCell)
def _rnn(op: rnn.RNNCell, *inputs: np.ndarray, out: Any) -> np.ndarray:
    x, h, w, r = (wide(v) for v in inputs[:4])
    b = wide(inputs[4]) if len(inputs) > 4 else np.zeros(2 * h.shape[1])
    wb, rb = _split(b, 2)
    return narrow(_activation(op, 0)(x @ w.T + h @ r.T + wb + rb), out)
