"""RNN, GRU and LSTM, unrolled over the (static) sequence into the catalogue's cells.

Each direction steps through time; with ``sequence_lens`` a step past an entry's length keeps
its state and writes zeros to ``Y`` (so the reverse direction starts at each entry's last valid
step). ``layout=1`` (batch-major) is transposed at the boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import expand_to, full
from opgraph.frontends.onnx.registry import onnx_op

_ACTIVATIONS = {
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "relu": "relu",
    "hardsigmoid": "hard_sigmoid",
    "leakyrelu": "leaky_relu",
    "thresholdedrelu": "thresholded_relu",
    "scaledtanh": "scaled_tanh",
    "affine": "affine",
    "elu": "elu",
    "softsign": "softsign",
    "softplus": "softplus",
}


@dataclass(frozen=True)
class _Kind:
    gates: int
    functions: int  # activations per direction
    states: int  # 1 (h) or 2 (h, c)
    step: Callable[..., tuple[Output, ...]]


def _rnn_step(ctx: NodeContext, d: int, x: Output, states: list[Output], **kw: Any) -> tuple:
    return (ops.rnn_cell(x, states[0], kw["w"], kw["r"], kw["b"], **kw["options"]),)


def _gru_step(ctx: NodeContext, d: int, x: Output, states: list[Output], **kw: Any) -> tuple:
    linear = bool(ctx.attr("linear_before_reset", 0))
    h = ops.gru_cell(
        x, states[0], kw["w"], kw["r"], kw["b"], linear_before_reset=linear, **kw["options"]
    )
    return (h,)


def _lstm_step(ctx: NodeContext, d: int, x: Output, states: list[Output], **kw: Any) -> tuple:
    if ctx.attr("input_forget", 0):
        raise ctx.fail("input_forget=1 (coupled input and forget gates) is not supported")
    peepholes = ctx.optional(7)
    p = None if peepholes is None else _direction(peepholes, d)
    h, c = ops.lstm_cell(x, states[0], states[1], kw["w"], kw["r"], kw["b"], p, **kw["options"])
    return h, c


_KINDS = {
    "RNN": _Kind(1, 1, 1, _rnn_step),
    "GRU": _Kind(3, 2, 1, _gru_step),
    "LSTM": _Kind(4, 3, 2, _lstm_step),
}


def _direction(value: Output, d: int) -> Output:
    return ops.gather(value, constant(np.array(d, dtype=np.int64)), axis=0)


def _options(ctx: NodeContext, kind: _Kind, d: int) -> dict[str, Any]:
    """Cell keyword arguments for direction ``d``: its activations, their parameters, clip."""
    names = ctx.attr("activations")
    options: dict[str, Any] = {
        "clip": None if ctx.attr("clip") is None else float(ctx.attr("clip"))
    }
    if names is not None:
        mine = names[d * kind.functions : (d + 1) * kind.functions]
        options["activations"] = [_ACTIVATIONS[str(n).lower()] for n in mine]
        for key in ("activation_alpha", "activation_beta"):
            values = ctx.attr(key)
            if values is not None:
                options[key] = [float(v) for v in values][
                    d * kind.functions : (d + 1) * kind.functions
                ] or None
    return options


def _recurrent(kind: _Kind) -> Callable[[NodeContext], list[Output]]:
    def convert(ctx: NodeContext) -> list[Output]:
        x = ctx.input(0)
        batch_major = bool(ctx.attr("layout", 0))
        if batch_major:
            x = ops.transpose(x, (1, 0, 2))
        direction = str(ctx.attr("direction", "forward"))
        directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        outputs = [_run_direction(ctx, kind, x, d, name) for d, name in enumerate(directions)]
        y = ops.stack([o[0] for o in outputs], 1)  # [seq, dirs, batch, hidden]
        finals = [ops.stack([o[1][i] for o in outputs], 0) for i in range(kind.states)]
        if batch_major:
            y = ops.transpose(y, (2, 0, 1, 3))
            finals = [ops.transpose(f, (1, 0, 2)) for f in finals]
        return [y, *finals]

    return convert


def _run_direction(
    ctx: NodeContext, kind: _Kind, x: Output, d: int, direction: str
) -> tuple[Output, list[Output]]:
    seq, batch = static_dim(x.shape[0], "the unrolled steps of an ONNX RNN"), x.shape[1]
    ctx.importer.unroll(ctx.where, seq)
    w, r = _direction(ctx.input(1), d), _direction(ctx.input(2), d)
    hidden = int(ctx.attr("hidden_size", w.shape[0] // kind.gates))
    bias = ctx.optional(3)
    params: dict[str, Any] = {"w": w, "r": r, "b": None if bias is None else _direction(bias, d)}
    params["options"] = _options(ctx, kind, d)
    states = [_initial(ctx, 5 + i, d, x, batch, hidden) for i in range(kind.states)]
    lengths = ctx.optional(4)
    zeros = full(0, x, (batch, hidden))
    steps = range(seq - 1, -1, -1) if direction == "reverse" else range(seq)
    ys: dict[int, Output] = {}
    for t in steps:
        x_t = ops.gather(x, constant(np.array(t, dtype=np.int64)), axis=0)
        new = list(kind.step(ctx, d, x_t, states, **params))
        if lengths is None:
            states, ys[t] = new, new[0]
            continue
        valid = _valid(lengths, t, (batch, hidden))
        states = [ops.select(valid, n, s) for n, s in zip(new, states, strict=True)]
        ys[t] = ops.select(valid, new[0], zeros)
    return ops.stack([ys[t] for t in range(seq)], 0), states


def _initial(ctx: NodeContext, index: int, d: int, x: Output, batch: Dim, hidden: int) -> Output:
    value = ctx.optional(index)
    if value is None:
        return full(0, x, (batch, hidden))
    if ctx.attr("layout", 0):
        value = ops.transpose(value, (1, 0, 2))
    return _direction(value, d)


def _valid(lengths: Output, t: int, shape: tuple[Dim, int]) -> Output:
    """``t < sequence_lens[b]`` broadcast over the hidden axis."""
    lengths = lengths if lengths.element_type is et.i64 else ops.convert(lengths, et.i64)
    step = full(t, lengths)
    return expand_to(ops.less(step, lengths), 2, [0], shape)


for _name, _kind in _KINDS.items():
    onnx_op(_name, since=7)(_recurrent(_kind))
