"""Softmax family (2-D coercion at ``axis`` before opset 13, one axis after), Hardmax,
normalizations (BatchNormalization in both modes, LRN, LayerNormalization, GroupNormalization,
InstanceNormalization, RMSNormalization, LpNormalization)."""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core.dim import Dim
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import (
    axis_of,
    expand_to,
    full,
    outputs_wanted,
    softmax_2d,
    unidirectional,
)
from opgraph.frontends.onnx.registry import onnx_op

Body = Callable[[Output, int], Output]


def _hardmax(x: Output, axis: int) -> Output:
    """One at the first maximum along ``axis``, zeros elsewhere."""
    index = ops.arg_max(x, axis)
    depth = static_dim(x.shape[axis], "Hardmax's one-hot depth")
    return ops.one_hot(index, depth, axis, 1, 0, x.element_type)


_SOFTMAXES: dict[str, Body] = {
    "Softmax": ops.softmax,
    "LogSoftmax": ops.log_softmax,
    "Hardmax": _hardmax,
}


def _coerced(body: Body) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        return softmax_2d(ctx.input(0), int(ctx.attr("axis", 1)), body)

    return convert


def _single_axis(body: Body) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        x = ctx.input(0)
        return body(x, axis_of(int(ctx.attr("axis", -1)), x.rank))

    return convert


for _name, _body in _SOFTMAXES.items():
    onnx_op(_name, since=1)(_coerced(_body))
    onnx_op(_name, since=13)(_single_axis(_body))


# ----------------------------------------------------------------------- batch normalization


@onnx_op("BatchNormalization", since=1)
def _batch_norm(ctx: NodeContext) -> list[Output]:
    x, scale, bias, mean, var = (ctx.input(i) for i in range(5))
    epsilon = float(ctx.attr("epsilon", 1e-5))
    training = ctx.attr("training_mode", 0) if ctx.opset >= 14 else outputs_wanted(ctx) > 1
    if not training:
        return [ops.batch_norm_inference(x, scale, bias, mean, var, epsilon=epsilon)]
    y, batch_mean, batch_var = ops.batch_norm_training(x, scale, bias, epsilon=epsilon)
    momentum = float(ctx.attr("momentum", 0.9))
    running_mean = _blend(mean, batch_mean, momentum)
    running_var = _blend(var, batch_var, momentum)
    if ctx.opset >= 14:
        return [y, running_mean, running_var]
    return [y, running_mean, running_var, batch_mean, batch_var]


def _blend(running: Output, batch: Output, momentum: float) -> Output:
    batch = (
        batch
        if batch.element_type is running.element_type
        else ops.convert(batch, running.element_type)
    )
    return ops.add(running * momentum, batch * (1.0 - momentum))


# --------------------------------------------------------------------- other normalizations


@onnx_op("LRN", since=1)
def _lrn(ctx: NodeContext) -> Output:
    return ops.lrn(
        ctx.input(0),
        alpha=float(ctx.attr("alpha", 1e-4)),
        beta=float(ctx.attr("beta", 0.75)),
        bias=float(ctx.attr("bias", 1.0)),
        size=int(ctx.attr("size")),
    )


@onnx_op("InstanceNormalization", since=1)
def _instance_norm(ctx: NodeContext) -> Output:
    epsilon = float(ctx.attr("epsilon", 1e-5))
    return ops.instance_norm(ctx.input(0), ctx.input(1), ctx.input(2), epsilon=epsilon)


@onnx_op("LayerNormalization", since=17)
def _layer_norm(ctx: NodeContext) -> list[Output]:
    x = ctx.input(0)
    axis = axis_of(int(ctx.attr("axis", -1)), x.rank)
    epsilon = float(ctx.attr("epsilon", 1e-5))
    normalized = x.shape[axis:]
    scale = unidirectional(ctx.input(1), normalized)
    bias = ctx.optional(2)
    bias = None if bias is None else unidirectional(bias, normalized)
    y = ops.layer_norm(x, scale, bias, axis=axis, epsilon=epsilon)
    if outputs_wanted(ctx) == 1:
        return [y]
    axes = list(range(axis, x.rank))
    mean = ops.reduce_mean(x, axes, keep_dims=True)
    flat_mean = ops.reshape(mean, list(x.shape[:axis]))
    centered = ops.subtract(x, expand_to(flat_mean, x.rank, list(range(axis)), x.shape))
    variance = ops.reduce_mean(ops.multiply(centered, centered), axes, keep_dims=True)
    inv_std = ops.reciprocal(ops.sqrt(ops.add(variance, full(epsilon, variance))))
    return [y, mean, inv_std]


@onnx_op("GroupNormalization", since=18)
def _group_norm(ctx: NodeContext) -> Output:
    x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
    groups = int(ctx.attr("num_groups"))
    channels = x.shape[1]
    if scale.shape == (groups,) and groups != channels:  # opset 18: one scale per group
        scale, bias = (_per_channel(v, groups, channels) for v in (scale, bias))
    return ops.group_norm(x, scale, bias, groups, epsilon=float(ctx.attr("epsilon", 1e-5)))


def _per_channel(value: Output, groups: int, channels: Dim) -> Output:
    repeated = ops.broadcast(value, (groups, channels // groups), (1,))
    return ops.reshape(repeated, [channels])


@onnx_op("RMSNormalization", since=23)
def _rms_norm(ctx: NodeContext) -> Output:
    """``x / sqrt(mean(x², axes from axis) + epsilon) · scale``."""
    x = ctx.input(0)
    axis = axis_of(int(ctx.attr("axis", -1)), x.rank)
    epsilon = float(ctx.attr("epsilon", 1e-5))
    axes = list(range(axis, x.rank))
    mean_square = ops.reduce_mean(ops.multiply(x, x), axes)
    rms = ops.sqrt(ops.add(mean_square, full(epsilon, mean_square)))
    normalized = ops.divide(x, expand_to(rms, x.rank, list(range(axis)), x.shape))
    return ops.multiply(normalized, unidirectional(ctx.input(1), x.shape))


@onnx_op("LpNormalization", since=1)
def _lp_norm(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    axis = axis_of(int(ctx.attr("axis", -1)), x.rank)
    p = int(ctx.attr("p", 2))
    norms = {1: ops.reduce_l1, 2: ops.reduce_l2}
    if p not in norms:
        raise ctx.fail(f"p must be 1 or 2, got {p}")
    norm = norms[p](x, [axis])
    safe = ops.select(ops.equal(norm, full(0, norm)), full(1, norm), norm)  # 0 / 1 for 0 / 0
    return ops.divide(x, expand_to(safe, x.rank, [a for a in range(x.rank) if a != axis], x.shape))
