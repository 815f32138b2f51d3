"""ONNX reductions (axes as an attribute, or as an input from opset 13/18)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import axes_list
from opgraph.frontends.onnx.registry import onnx_op

Reducer = Callable[[Output, Any, bool], Output]


def _axes(ctx: NodeContext, from_input: bool) -> list[int] | None:
    """The reduction axes; None means all axes (or none, with noop_with_empty_axes)."""
    x = ctx.input(0)
    raw = ctx.const_or_none(1, "axes") if from_input else ctx.attr("axes")
    if raw is None or len(raw) == 0:
        return [] if ctx.attr("noop_with_empty_axes", 0) else None
    return axes_list(raw, x.rank)


def _reduction(reducer: Reducer, from_input: bool) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        x = ctx.input(0)
        axes = _axes(ctx, from_input)
        if axes is None:
            axes = list(range(x.rank))
        return reducer(x, axes, bool(ctx.attr("keepdims", 1)))

    return convert


def _register(name: str, reducer: Reducer, input_since: int) -> None:
    onnx_op(name, since=1)(_reduction(reducer, from_input=False))
    onnx_op(name, since=input_since)(_reduction(reducer, from_input=True))


_register("ReduceSum", ops.reduce_sum, 13)
_register("ReduceMax", ops.reduce_max, 18)
_register("ReduceMin", ops.reduce_min, 18)
_register("ReduceProd", ops.reduce_prod, 18)
