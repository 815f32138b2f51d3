"""ONNX reductions (axes as an attribute, or as an input from opset 13 for ReduceSum and 18 for
the others); ReduceMax/ReduceMin of booleans are any/all."""

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
    return sorted(set(axes_list(raw, x.rank)))


def _reduction(reducer: Reducer, from_input: bool) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        x = ctx.input(0)
        axes = _axes(ctx, from_input)
        if axes is None:
            axes = list(range(x.rank))
        return reducer(x, axes, bool(ctx.attr("keepdims", 1)))

    return convert


def _boolean_aware(numeric: Reducer, boolean: Reducer) -> Reducer:
    def reduce(x: Output, axes: Any, keep_dims: bool) -> Output:
        return (boolean if x.element_type.is_boolean else numeric)(x, axes, keep_dims)

    return reduce


_REDUCTIONS: dict[str, tuple[Reducer, int]] = {
    "ReduceSum": (ops.reduce_sum, 13),
    "ReduceMean": (ops.reduce_mean, 18),
    "ReduceMax": (_boolean_aware(ops.reduce_max, ops.reduce_any), 18),
    "ReduceMin": (_boolean_aware(ops.reduce_min, ops.reduce_all), 18),
    "ReduceProd": (ops.reduce_prod, 18),
    "ReduceL1": (ops.reduce_l1, 18),
    "ReduceL2": (ops.reduce_l2, 18),
    "ReduceLogSum": (ops.reduce_log_sum, 18),
    "ReduceLogSumExp": (ops.reduce_log_sum_exp, 18),
    "ReduceSumSquare": (ops.reduce_sum_square, 18),
}

for _name, (_reducer, _input_since) in _REDUCTIONS.items():
    onnx_op(_name, since=1)(_reduction(_reducer, from_input=False))
    onnx_op(_name, since=_input_since)(_reduction(_reducer, from_input=True))
