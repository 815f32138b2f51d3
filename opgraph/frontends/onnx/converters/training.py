"""The ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum), composed from core ops.

Inputs are the learning rate R (a float scalar), the step T (an i64 scalar), then the tensors
of every optimized value grouped by role (all X, then all G, then the states); outputs follow
the same grouping. The step's effects (``t > 0``, ``beta ** t``) are computed in the graph.
"""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import expand_to, full
from opgraph.frontends.onnx.registry import onnx_op

DOMAIN = "ai.onnx.preview.training"


def _scalar(value: Output, like: Output) -> Output:
    """A scalar input converted to ``like``'s type and broadcast to its shape."""
    scalar = ops.reshape(value, [])
    if scalar.element_type is not like.element_type:
        scalar = ops.convert(scalar, like.element_type)
    return expand_to(scalar, like.rank, [], like.shape) if like.rank else scalar


def _grouped(ctx: NodeContext, roles: int) -> list[list[Output]]:
    tensors = [ctx.input(i) for i in range(2, len(ctx.inputs))]
    count = len(tensors) // roles
    return [tensors[i::count] for i in range(count)]


def _started(ctx: NodeContext, like: Output) -> Output:
    """``t > 0`` broadcast like ``like``."""
    t = ctx.input(1)
    positive = ops.reshape(ops.greater(t, full(0, t)), [])
    return expand_to(positive, like.rank, [], like.shape) if like.rank else positive


def _regularized(ctx: NodeContext, x: Output, g: Output) -> Output:
    norm = float(ctx.attr("norm_coefficient", 0.0))
    return ops.add(ops.multiply(full(norm, x), x), g)


@onnx_op("Adagrad", since=1, domain=DOMAIN)
def _adagrad(ctx: NodeContext) -> list[Output]:
    decay, epsilon = float(ctx.attr("decay_factor", 0.0)), float(ctx.attr("epsilon", 0.0))
    xs, hs = [], []
    for x, g, h in _grouped(ctx, 3):
        r, t = _scalar(ctx.input(0), x), _scalar(ctx.input(1), x)
        rate = ops.divide(r, ops.add(full(1, x), ops.multiply(t, full(decay, x))))
        g = _regularized(ctx, x, g)
        h_new = ops.add(h, ops.multiply(g, g))
        root = ops.add(ops.sqrt(h_new), full(epsilon, x))
        xs.append(ops.subtract(x, ops.divide(ops.multiply(rate, g), root)))
        hs.append(h_new)
    return xs + hs


@onnx_op("Adam", since=1, domain=DOMAIN)
def _adam(ctx: NodeContext) -> list[Output]:
    alpha, beta = float(ctx.attr("alpha", 0.9)), float(ctx.attr("beta", 0.999))
    epsilon = float(ctx.attr("epsilon", 0.0))
    post = float(ctx.attr("norm_coefficient_post", 0.0))
    xs, vs, hs = [], [], []
    for x, g, v, h in _grouped(ctx, 4):
        r, t = _scalar(ctx.input(0), x), _scalar(ctx.input(1), x)
        g = _regularized(ctx, x, g)
        v_new = ops.add(ops.multiply(full(alpha, x), v), ops.multiply(full(1 - alpha, x), g))
        h_new = ops.add(
            ops.multiply(full(beta, x), h), ops.multiply(full(1 - beta, x), ops.multiply(g, g))
        )
        root = ops.add(ops.sqrt(h_new), full(epsilon, x))
        correction = ops.divide(
            ops.sqrt(ops.subtract(full(1, x), ops.power(full(beta, x), t))),
            ops.subtract(full(1, x), ops.power(full(alpha, x), t)),
        )
        rate = ops.select(_started(ctx, x), ops.multiply(r, correction), r)
        x_new = ops.subtract(x, ops.multiply(rate, ops.divide(v_new, root)))
        xs.append(ops.multiply(full(1 - post, x), x_new))
        vs.append(v_new)
        hs.append(h_new)
    return xs + vs + hs


def _momentum_update(nesterov: bool) -> Callable[..., Output]:
    def update(x: Output, g: Output, v_new: Output, r: Output, alpha: float) -> Output:
        step = ops.add(g, ops.multiply(full(alpha, x), v_new)) if nesterov else v_new
        return ops.subtract(x, ops.multiply(r, step))

    return update


@onnx_op("Momentum", since=1, domain=DOMAIN)
def _momentum(ctx: NodeContext) -> list[Output]:
    alpha, beta = float(ctx.attr("alpha")), float(ctx.attr("beta"))
    update = _momentum_update(str(ctx.attr("mode", "standard")) == "nesterov")
    xs, vs = [], []
    for x, g, v in _grouped(ctx, 3):
        r = _scalar(ctx.input(0), x)
        g = _regularized(ctx, x, g)
        scale = ops.select(_started(ctx, x), full(beta, x), full(1, x))
        v_new = ops.add(ops.multiply(full(alpha, x), v), ops.multiply(scale, g))
        xs.append(update(x, g, v_new, r, alpha))
        vs.append(v_new)
    return xs + vs
