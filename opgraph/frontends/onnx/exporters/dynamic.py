"""Shape (ShapeOf) and the data-dependent NonZero, Unique, NonMaxSuppression and Compress.

Their fresh count symbols are written as ``dim_param`` (by the exporter's value infos), as
every symbolic dimension is."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.literals import Constant
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, exports, onnx_type


@exports(ops.ShapeOf)
def _shape_of(ctx: ExportContext, op: ops.ShapeOf, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Shape", inputs)]


@exports(ops.NonZero, since=9)
def _non_zero(ctx: ExportContext, op: ops.NonZero, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("NonZero", inputs)]


@exports(ops.Unique, since=11)
def _unique(ctx: ExportContext, op: ops.Unique, node: Node, inputs: list[str]) -> list[str]:
    return ctx.emit("Unique", inputs, 4, axis=op.axis, sorted=int(op.sorted))


@exports(ops.Compress, since=11)
def _compress(ctx: ExportContext, op: ops.Compress, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Compress", inputs, axis=op.axis)]


@exports(ops.NonMaxSuppression, since=11)
def _non_max_suppression(
    ctx: ExportContext, op: ops.NonMaxSuppression, node: Node, inputs: list[str]
) -> list[str]:
    """ONNX takes f32 boxes and scores, an i64 limit and f32 thresholds (others are cast); an
    empty ``[0]`` Constant (opgraph's 'absent') becomes an omitted input."""
    wanted = (et.f32, et.f32, et.i64, et.f32, et.f32)
    names: list[str] = []
    for value, name, element_type in zip(node.inputs, inputs, wanted, strict=True):
        if isinstance(value.node.op, Constant) and value.node.op.value.size == 0:
            names.append("")
        elif value.element_type is not element_type:
            names.append(ctx.one("Cast", [name], to=onnx_type(element_type)))
        else:
            names.append(name)
    while names and not names[-1]:
        names.pop()
    return [ctx.one("NonMaxSuppression", names, center_point_box=int(op.center_point_box))]
