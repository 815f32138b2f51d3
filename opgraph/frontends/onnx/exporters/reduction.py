"""Reductions (axes as an input for ReduceSum from opset 13 and the others from 18), the
boolean ReduceAll/ReduceAny through integers, ArgMax/ArgMin, TopK and CumSum."""

from __future__ import annotations

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.function import Function
from opgraph.core.literals import parameter
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, Exporter, exports, unsupported

_REDUCTIONS = {
    ops.ReduceSum: ("ReduceSum", 13),
    ops.ReduceMean: ("ReduceMean", 18),
    ops.ReduceMax: ("ReduceMax", 18),
    ops.ReduceMin: ("ReduceMin", 18),
    ops.ReduceProd: ("ReduceProd", 18),
    ops.ReduceL1: ("ReduceL1", 18),
    ops.ReduceL2: ("ReduceL2", 18),
    ops.ReduceLogSum: ("ReduceLogSum", 18),
    ops.ReduceLogSumExp: ("ReduceLogSumExp", 18),
    ops.ReduceSumSquare: ("ReduceSumSquare", 18),
}


#: What a reduction over no axes is, elementwise (ONNX would reduce over every axis).
_OVER_NOTHING: dict[str, list[str]] = {
    "ReduceL1": ["Abs"],
    "ReduceL2": ["Abs"],
    "ReduceLogSum": ["Log"],
    "ReduceLogSumExp": ["Exp", "Log"],
    "ReduceSumSquare": ["Square"],
}


def reduce(
    ctx: ExportContext, op_type: str, x: str, axes: list[int], keep: bool, input_since: int
) -> str:
    """An ONNX reduction over ``axes`` (an empty list reduces nothing, unlike ONNX's default)."""
    if not axes:
        for step in _OVER_NOTHING.get(op_type, ["Identity"]):
            x = ctx.one("Mul", [x, x]) if step == "Square" else ctx.one(step, [x])
        return x
    if ctx.opset >= input_since:
        return ctx.one(op_type, [x, ctx.ints(axes, "axes")], keepdims=int(keep))
    return ctx.one(op_type, [x], axes=axes, keepdims=int(keep))


def empty_result(ctx: ExportContext, op: ops.Reduction, node: Node) -> str | None:
    """An initializer for a reduction over an empty axis (its identity, as opgraph defines
    it), else None: runtimes disagree about empty reductions, static shapes settle them."""
    x = node.inputs[0]
    if all(x.shape[a] for a in op.axes):
        return None

    param = parameter(x.element_type, x.shape)
    fn = Function([op(param)], [param])
    (value,) = og.backend("INTERPRETER").compile(fn)(np.empty(x.shape, x.element_type.dtype))
    return ctx.constant(value, "empty_reduction")


def _reduction(op_type: str, input_since: int) -> Exporter:
    def export(ctx: ExportContext, op: ops.Reduction, node: Node, inputs: list[str]) -> list[str]:
        empty = empty_result(ctx, op, node)
        if empty is not None:
            return [empty]
        axes, keep = list(op.axes), bool(op.keep_dims)
        return [reduce(ctx, op_type, inputs[0], axes, keep, input_since)]

    return export


for _cls, (_name, _since) in _REDUCTIONS.items():
    exports(_cls)(_reduction(_name, _since))


def _logical(op_type: str) -> Exporter:
    def export(ctx: ExportContext, op: ops.Reduction, node: Node, inputs: list[str]) -> list[str]:
        empty = empty_result(ctx, op, node)
        if empty is not None:
            return [empty]
        numbers = ctx.one("Cast", inputs, to=6)  # int32
        axes, keep = list(op.axes), bool(op.keep_dims)
        reduced = reduce(ctx, op_type, numbers, axes, keep, 18)
        return [ctx.one("Cast", [reduced], to=9)]

    return export


exports(ops.ReduceAll)(_logical("ReduceMin"))
exports(ops.ReduceAny)(_logical("ReduceMax"))


def _indices(ctx: ExportContext, name: str, element_type: et.ElementType) -> str:
    return name if element_type is et.i64 else ctx.one("Cast", [name], to=6)


def _arg(op_type: str) -> Exporter:
    def export(
        ctx: ExportContext, op: ops.IndexReduction, node: Node, inputs: list[str]
    ) -> list[str]:
        index = ctx.one(
            op_type,
            inputs,
            axis=op.axis,
            keepdims=int(op.keep_dims),
            select_last_index=int(op.select_last_index),
        )
        return [_indices(ctx, index, op.index_element_type)]

    return export


exports(ops.ArgMax)(_arg("ArgMax"))
exports(ops.ArgMin)(_arg("ArgMin"))


@exports(ops.TopK)
def _top_k(ctx: ExportContext, op: ops.TopK, node: Node, inputs: list[str]) -> list[str]:
    if not op.sorted:
        raise unsupported(node, "ONNX leaves the order of unsorted TopK results open")
    values, indices = ctx.emit(
        "TopK",
        [inputs[0], ctx.ints([op.k], "k")],
        2,
        axis=op.axis,
        largest=int(op.largest),
        sorted=1,
    )
    return [values, _indices(ctx, indices, op.index_element_type)]


@exports(ops.CumSum)
def _cumsum(ctx: ExportContext, op: ops.CumSum, node: Node, inputs: list[str]) -> list[str]:
    axis = ctx.constant(np.int64(op.axis), "axis")
    return [
        ctx.one("CumSum", [inputs[0], axis], exclusive=int(op.exclusive), reverse=int(op.reverse))
    ]
