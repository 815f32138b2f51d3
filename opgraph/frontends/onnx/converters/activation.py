"""Activations: the catalogue's (Elu, Selu, LeakyRelu, PRelu, HardSigmoid, HardSwish, Softplus,
Softsign, Mish, Gelu), ones composed from core ops (Celu, Swish, ThresholdedRelu, Shrink) and
Clip (bounds as attributes before opset 11, as optional inputs after)."""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext, constant_value
from opgraph.frontends.onnx.converters.common import (
    full,
    register_all,
    typed_constant,
    unidirectional,
)
from opgraph.frontends.onnx.registry import onnx_op

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875

_SIMPLE: dict[str, tuple[Callable[[Output], Output], int]] = {
    "HardSwish": (ops.hard_swish, 14),
    "Softplus": (ops.softplus, 1),
    "Softsign": (ops.softsign, 1),
    "Mish": (ops.mish, 18),
}


def _simple(builder: Callable[[Output], Output]) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        return builder(ctx.input(0))

    return convert


register_all(_SIMPLE, _simple)


@onnx_op("Elu", since=1)
def _elu(ctx: NodeContext) -> Output:
    return ops.elu(ctx.input(0), alpha=float(ctx.attr("alpha", 1.0)))


@onnx_op("Selu", since=1)
def _selu(ctx: NodeContext) -> Output:
    alpha = float(ctx.attr("alpha", _SELU_ALPHA))
    gamma = float(ctx.attr("gamma", _SELU_GAMMA))
    return ops.selu(ctx.input(0), alpha=alpha, gamma=gamma)


@onnx_op("LeakyRelu", since=1)
def _leaky_relu(ctx: NodeContext) -> Output:
    return ops.leaky_relu(ctx.input(0), alpha=float(ctx.attr("alpha", 0.01)))


@onnx_op("HardSigmoid", since=1)
def _hard_sigmoid(ctx: NodeContext) -> Output:
    alpha, beta = float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5))
    return ops.hard_sigmoid(ctx.input(0), alpha=alpha, beta=beta)


@onnx_op("PRelu", since=1)
def _prelu(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    return ops.prelu(x, unidirectional(ctx.input(1), x.shape))


@onnx_op("Gelu", since=20)
def _gelu(ctx: NodeContext) -> Output:
    return ops.gelu(ctx.input(0), approximate=str(ctx.attr("approximate", "none")))


@onnx_op("Celu", since=12)
def _celu(ctx: NodeContext) -> Output:
    """``max(0, x) + min(0, alpha · (exp(x / alpha) - 1))``."""
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    negative = ops.multiply(full(alpha, x), ops.subtract(ops.exp(x / alpha), full(1, x)))
    return ops.add(ops.relu(x), ops.minimum(full(0, x), negative))


@onnx_op("Swish", since=24)
def _swish(ctx: NodeContext) -> Output:
    """``x · sigmoid(alpha · x)``."""
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    return ops.multiply(x, ops.sigmoid(x * alpha if alpha != 1.0 else x))


@onnx_op("ThresholdedRelu", since=10)
def _thresholded_relu(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    return ops.select(ops.greater(x, full(alpha, x)), x, full(0, x))


@onnx_op("Shrink", since=9)
def _shrink(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    bias, lambd = float(ctx.attr("bias", 0.0)), float(ctx.attr("lambd", 0.5))
    zero = full(0, x)
    above = ops.select(ops.greater(x, full(lambd, x)), ops.subtract(x, full(bias, x)), zero)
    below = ops.select(ops.less(x, full(-lambd, x)), ops.add(x, full(bias, x)), zero)
    return ops.add(above, below)


@onnx_op("Clip", since=1)
def _clip_v1(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    low, high = ctx.attr("min"), ctx.attr("max")
    return _clip(
        x, *(None if b is None else typed_constant(b, x.element_type) for b in (low, high))
    )


@onnx_op("Clip", since=11)
def _clip_v11(ctx: NodeContext) -> Output:
    return _clip(ctx.input(0), ctx.optional(1), ctx.optional(2))


def _clip(x: Output, low: Output | None, high: Output | None) -> Output:
    """``min(max(x, low), high)``: with low > high every value becomes ``high``, as ONNX."""
    low_value = None if low is None else constant_value(low)
    high_value = None if high is None else constant_value(high)
    known = (low is None or low_value is not None) and (high is None or high_value is not None)
    if x.element_type.is_real and known:
        lo = None if low_value is None else float(low_value.reshape(-1)[0])
        hi = None if high_value is None else float(high_value.reshape(-1)[0])
        if lo is None or hi is None or lo <= hi:
            return ops.clamp(x, lo, hi) if (lo, hi) != (None, None) else x
    if low is not None:
        x = ops.maximum(x, unidirectional(low, x.shape))
    if high is not None:
        x = ops.minimum(x, unidirectional(high, x.shape))
    return x
