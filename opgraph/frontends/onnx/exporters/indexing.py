"""Gather (without batch dims), GatherElements, GatherND, ScatterElements, ScatterND and
OneHot."""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.errors import ConversionError
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, exports, unsupported


@exports(ops.Gather)
def _gather(ctx: ExportContext, op: ops.Gather, node: Node, inputs: list[str]) -> list[str]:
    """Gather; with batch dims, a GatherND over the batch axes with the gathered axis moved
    next to them."""
    axis, batch = op.axis, op.batch_dims
    if not batch:
        return [ctx.one("Gather", inputs, axis=axis)]
    x, indices = node.inputs
    rank = x.rank
    order = [*range(batch), axis, *(a for a in range(batch, rank) if a != axis)]
    moved = ctx.one("Transpose", [inputs[0]], perm=order)
    index = _int64(ctx, node, inputs, 1)[1]
    shape = indices.static_shape("the index Reshape of an exported batched Gather", ConversionError)
    column = ctx.one("Reshape", [index, ctx.ints([*shape, 1], "shape")])
    gathered = ctx.one("GatherND", [moved, column], batch_dims=batch)
    # gathered: [batch…, indices…, x.shape[batch:axis]…, x.shape[axis + 1:]…]
    middle = axis - batch
    picked = indices.rank - batch
    head = list(range(batch))
    index_axes = list(range(batch, batch + picked))
    between = list(range(batch + picked, batch + picked + middle))
    tail = list(range(batch + picked + middle, batch + picked + rank - batch - 1))
    perm = head + between + index_axes + tail
    if perm == list(range(len(perm))):
        return [gathered]
    return [ctx.one("Transpose", [gathered], perm=perm)]


@exports(ops.GatherElements)
def _gather_elements(
    ctx: ExportContext, op: ops.GatherElements, node: Node, inputs: list[str]
) -> list[str]:
    return [ctx.one("GatherElements", inputs, axis=op.axis)]


def _int64(ctx: ExportContext, node: Node, inputs: list[str], index: int) -> list[str]:
    """``inputs`` with input ``index`` cast to int64 (the ONNX ND ops take no int32)."""
    if node.inputs[index].element_type is et.i64:
        return inputs
    cast = ctx.one("Cast", [inputs[index]], to=7)
    return [*inputs[:index], cast, *inputs[index + 1 :]]


@exports(ops.GatherND)
def _gather_nd(ctx: ExportContext, op: ops.GatherND, node: Node, inputs: list[str]) -> list[str]:
    arguments = _int64(ctx, node, inputs, 1)
    return [ctx.one("GatherND", arguments, batch_dims=op.batch_dims)]


def _reduction(op: ops.Scatter, node: Node, ctx: ExportContext) -> str | None:
    value = op.reduction.value
    if value == "none":
        return None
    needed = 18 if value in ("max", "min") else 16
    if ctx.opset < needed:
        raise unsupported(node, f"reduction {value!r} needs opset {needed}")
    return str(value)


@exports(ops.ScatterElements)
def _scatter_elements(
    ctx: ExportContext, op: ops.ScatterElements, node: Node, inputs: list[str]
) -> list[str]:
    reduction = _reduction(op, node, ctx)
    return [ctx.one("ScatterElements", inputs, axis=op.axis, reduction=reduction)]


@exports(ops.ScatterND)
def _scatter_nd(ctx: ExportContext, op: ops.ScatterND, node: Node, inputs: list[str]) -> list[str]:
    arguments = _int64(ctx, node, inputs, 1)
    return [ctx.one("ScatterND", arguments, reduction=_reduction(op, node, ctx))]


@exports(ops.OneHot)
def _one_hot(ctx: ExportContext, op: ops.OneHot, node: Node, inputs: list[str]) -> list[str]:
    depth = ctx.constant(np.int64(op.depth), "depth")
    values = np.array([op.off_value, op.on_value]).astype(op.element_type.dtype)
    return [ctx.one("OneHot", [inputs[0], depth, ctx.constant(values, "values")], axis=op.axis)]
