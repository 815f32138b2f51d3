"""ArgMax/ArgMin, TopK (k as an attribute before opset 10, an input after), CumSum, CumProd
(a log-depth scan of products) and Unique (``ops.unique``: its output size is decided by the
data; constant data folds at import)."""

from __future__ import annotations

from typing import Any

from opgraph import ops
from opgraph.core.dim import Dim
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import axis_of, full
from opgraph.frontends.onnx.registry import onnx_op


def _arg(builder: Any) -> Any:
    def convert(ctx: NodeContext) -> Output:
        x = ctx.input(0)
        axis = axis_of(int(ctx.attr("axis", 0)), x.rank)
        keep = bool(ctx.attr("keepdims", 1))
        last = bool(ctx.attr("select_last_index", 0))
        result: Output = builder(x, axis, keep_dims=keep, select_last_index=last)
        return result

    return convert


onnx_op("ArgMax", since=1)(_arg(ops.arg_max))
onnx_op("ArgMin", since=1)(_arg(ops.arg_min))


def _top_k(ctx: NodeContext, k: int) -> tuple[Output, Output]:
    x = ctx.input(0)
    axis = axis_of(int(ctx.attr("axis", -1)), x.rank)
    largest, ordered = bool(ctx.attr("largest", 1)), bool(ctx.attr("sorted", 1))
    values, indices = ops.top_k(x, k, axis=axis, largest=largest, sorted=ordered)
    return values, indices


@onnx_op("TopK", since=1)
def _top_k_v1(ctx: NodeContext) -> tuple[Output, Output]:
    return _top_k(ctx, int(ctx.attr("k")))


@onnx_op("TopK", since=10)
def _top_k_v10(ctx: NodeContext) -> tuple[Output, Output]:
    if not ctx.known(1):
        x = ctx.input(0)
        axis = axis_of(int(ctx.attr("axis", -1)), x.rank)
        largest, ordered = bool(ctx.attr("largest", 1)), bool(ctx.attr("sorted", 1))
        return ops.dynamic_top_k(x, ctx.input(1), axis, largest, ordered)
    return _top_k(ctx, int(ctx.const(1, "k").reshape(-1)[0]))


def _scan_axis(ctx: NodeContext) -> int:
    return axis_of(int(ctx.const(1, "axis").reshape(-1)[0]), ctx.input(0).rank)


@onnx_op("CumSum", since=11)
def _cumsum(ctx: NodeContext) -> Output:
    exclusive, reverse = bool(ctx.attr("exclusive", 0)), bool(ctx.attr("reverse", 0))
    return ops.cumsum(ctx.input(0), _scan_axis(ctx), exclusive=exclusive, reverse=reverse)


@onnx_op("CumProd", since=26)
def _cumprod(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    axis = _scan_axis(ctx)
    exclusive, reverse = bool(ctx.attr("exclusive", 0)), bool(ctx.attr("reverse", 0))
    if reverse:
        x = ops.reverse(x, [axis])
    if exclusive:
        x = _shifted(x, axis, 1)
    shift = 1
    while shift < x.shape[axis]:  # Hillis-Steele scan: log2(n) products
        x = ops.multiply(x, _shifted(x, axis, shift))
        shift *= 2
    return ops.reverse(x, [axis]) if reverse else x


def _shifted(x: Output, axis: int, shift: int) -> Output:
    """``x`` moved ``shift`` places up ``axis``, ones filling the start."""
    dim = x.shape[axis]
    below: list[Dim] = [0] * x.rank
    above: list[Dim] = [0] * x.rank
    below[axis] = min(shift, dim)
    above[axis] = -min(shift, dim)
    return ops.pad(x, below, above, value=full(1, x, ()))


@onnx_op("Unique", since=11)
def _unique(ctx: NodeContext) -> list[Output]:
    axis = ctx.attr("axis")
    values = ops.unique(
        ctx.input(0), None if axis is None else int(axis), bool(ctx.attr("sorted", 1))
    )
    return list(values)
