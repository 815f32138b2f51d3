"""Activation ATen overloads (those that survive or bypass core-ATen decomposition)."""

from __future__ import annotations

from opgraph import ops
from opgraph.builders.broadcasting import numpy_broadcast
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.frontends.torch.context import NodeContext, fill
from opgraph.frontends.torch.converters.common import overloads, scale
from opgraph.frontends.torch.converters.elementwise import clamp, expm1, log1p
from opgraph.frontends.torch.registry import aten_op


def _positive(x: Output) -> Output:
    return ops.greater(x, fill(0, x.element_type, x.shape))


@aten_op(*overloads("gelu.default"))
def _gelu(ctx: NodeContext) -> Output:
    return ops.gelu(ctx.tensor("self"), approximate=ctx["approximate"])


@aten_op(*overloads("silu.default"))
def _silu(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    return ops.multiply(x, ops.sigmoid(x))


@aten_op(*overloads("leaky_relu.default"))
def _leaky_relu(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    return ops.select(_positive(x), x, scale(x, ctx["negative_slope"]))


@aten_op(*overloads("elu.default"))
def _elu(ctx: NodeContext) -> Output:
    """``scale · x`` for x > 0, else ``scale · alpha · (exp(x · input_scale) - 1)``."""
    x = ctx.tensor("self")
    negative = scale(expm1(scale(x, ctx["input_scale"])), ctx["alpha"])
    return scale(ops.select(_positive(x), x, negative), ctx["scale"])


def softplus(x: Output, beta: float = 1.0, threshold: float = 20.0) -> Output:
    """ATen ``softplus``: ``log1p(exp(beta · x)) / beta``, linear above ``threshold``."""
    bx = scale(x, beta)
    smooth = scale(log1p(ops.exp(bx)), 1 / beta)
    return ops.select(ops.greater(bx, fill(threshold, x.element_type, x.shape)), x, smooth)


@aten_op(*overloads("softplus.default"))
def _softplus(ctx: NodeContext) -> Output:
    return softplus(ctx.tensor("self"), float(ctx["beta"]), float(ctx["threshold"]))


@aten_op(*overloads("mish.default"))
def _mish(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    return ops.multiply(x, ops.tanh(softplus(x)))


def _relu6_over_6(x: Output) -> Output:
    shifted = ops.add(x, fill(3, x.element_type, x.shape))
    return ops.divide(clamp(shifted, 0, 6), fill(6, x.element_type, x.shape))


@aten_op(*overloads("hardsigmoid.default"))
def _hardsigmoid(ctx: NodeContext) -> Output:
    return _relu6_over_6(ctx.tensor("self"))


@aten_op(*overloads("hardswish.default"))
def _hardswish(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    return ops.multiply(x, _relu6_over_6(x))


@aten_op(*overloads("relu6.default"))
def _relu6(ctx: NodeContext) -> Output:
    return clamp(ctx.tensor("self"), 0, 6)


@aten_op(*overloads("_prelu_kernel.default"))
def _prelu(ctx: NodeContext) -> Output:
    """``x`` where positive, else ``weight · x`` (``weight`` broadcasts NumPy-style; the
    ``prelu`` decomposition has already shaped it per channel)."""
    x, weight = numpy_broadcast(ctx.tensor("self"), ctx.tensor("weight"))
    return ops.select(_positive(x), x, ops.multiply(weight, x))


@aten_op(*overloads("native_dropout.default"))
def _dropout(ctx: NodeContext) -> tuple[Output, Output]:
    """Dropout in evaluation (``train`` false): the identity and an all-kept mask."""
    x = ctx.tensor("input")
    if ctx["train"]:
        raise ctx.fail("training-mode dropout is random; only evaluation is supported")
    return x, fill(True, et.boolean, x.shape)
