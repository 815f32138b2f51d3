"""Data movement and shaping: Broadcast (Reshape + Expand), Reshape (with its input order),
Transpose, Slice, Reverse (negative-step Slice), ReplaceSlice (ScatterND at the slice's
positions), Concat, Split, Pad, Tile, DepthToSpace, SpaceToDepth, ReverseSequence, and the
framework-level Expand, Flatten, Squeeze, Unsqueeze and Stack."""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.errors import ConversionError
from opgraph.core.node import Node
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.exporters.base import ExportContext, exports, unsupported

_INT64_MIN = -(2**63)


@exports(ops.Broadcast)
def _broadcast(ctx: ExportContext, op: ops.Broadcast, node: Node, inputs: list[str]) -> list[str]:
    shape = list(op.shape)
    kept = [1 if axis in op.broadcast_axes else d for axis, d in enumerate(shape)]
    reshaped = ctx.one("Reshape", [inputs[0], ctx.ints(kept, "shape")])
    return [ctx.one("Expand", [reshaped, ctx.ints(shape, "shape")])]


@exports(ops.Reshape)
def _reshape(ctx: ExportContext, op: ops.Reshape, node: Node, inputs: list[str]) -> list[str]:
    x = inputs[0]
    order = op.input_order
    if order is not None and list(order) != list(range(len(order))):
        x = ctx.one("Transpose", [x], perm=list(order))
    return [ctx.one("Reshape", [x, ctx.ints(op.output_shape, "shape")])]


@exports(ops.Transpose)
def _transpose(ctx: ExportContext, op: ops.Transpose, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Transpose", inputs, perm=list(op.perm))]


@exports(ops.Slice)
def _slice(ctx: ExportContext, op: ops.Slice, node: Node, inputs: list[str]) -> list[str]:
    rank = len(op.lower_bounds)
    steps = list(op.strides) if op.strides is not None else [1] * rank
    arguments = [
        inputs[0],
        ctx.ints(op.lower_bounds, "starts"),
        ctx.ints(op.upper_bounds, "ends"),
        ctx.ints(range(rank), "axes"),
        ctx.ints(steps, "steps"),
    ]
    return [ctx.one("Slice", arguments)]


@exports(ops.Reverse)
def _reverse(ctx: ExportContext, op: ops.Reverse, node: Node, inputs: list[str]) -> list[str]:
    axes = list(op.axes)
    if not axes:
        return [ctx.one("Identity", inputs)]
    arguments = [
        inputs[0],
        ctx.ints([-1] * len(axes), "starts"),
        ctx.ints([_INT64_MIN] * len(axes), "ends"),
        ctx.ints(axes, "axes"),
        ctx.ints([-1] * len(axes), "steps"),
    ]
    return [ctx.one("Slice", arguments)]


@exports(ops.ReplaceSlice)
def _replace_slice(
    ctx: ExportContext, op: ops.ReplaceSlice, node: Node, inputs: list[str]
) -> list[str]:
    rank = len(op.lower_bounds)
    steps = list(op.strides) if op.strides is not None else [1] * rank
    ranges = [
        np.arange(lo, hi, st)
        for lo, hi, st in zip(op.lower_bounds, op.upper_bounds, steps, strict=True)
    ]
    grid = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1).astype(np.int64)
    indices = ctx.constant(grid.reshape(*node.inputs[1].shape, rank), "indices")
    return [ctx.one("ScatterND", [inputs[0], indices, inputs[1]])]


@exports(ops.Concat)
def _concat(ctx: ExportContext, op: ops.Concat, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Concat", inputs, axis=op.axis)]


@exports(ops.Split)
def _split(ctx: ExportContext, op: ops.Split, node: Node, inputs: list[str]) -> list[str]:
    what = "the sizes of an exported Split"
    sizes = [static_dim(o.shape[op.axis], what, ConversionError) for o in node.outputs]
    split = ctx.ints(sizes, "split")
    return ctx.emit("Split", [inputs[0], split], len(sizes), axis=op.axis)


_PAD_MODES = {
    ops.PadMode.CONSTANT: "constant",
    ops.PadMode.EDGE: "edge",
    ops.PadMode.REFLECT: "reflect",
}


@exports(ops.Pad)
def _pad(ctx: ExportContext, op: ops.Pad, node: Node, inputs: list[str]) -> list[str]:
    if op.mode is ops.PadMode.SYMMETRIC:
        return [_symmetric_pad(ctx, op, node, inputs[0])]
    if not node.inputs[0].rank:
        return [ctx.one("Identity", [inputs[0]])]  # nothing to pad
    pads = ctx.ints([*op.padding_below, *op.padding_above], "pads")
    return [ctx.one("Pad", [inputs[0], pads, inputs[1]], mode=_PAD_MODES[op.mode])]


def _symmetric_pad(ctx: ExportContext, op: ops.Pad, node: Node, x: str) -> str:
    """Mirror padding with the edge repeated: a Gather per axis at import-time positions."""
    shape = node.inputs[0].static_shape("the positions of an exported reflect Pad", ConversionError)
    for axis, (low, high) in enumerate(zip(op.padding_below, op.padding_above, strict=True)):
        if low == 0 and high == 0:
            continue
        dim = shape[axis]
        phase = np.arange(-low, dim + high) % (2 * dim)
        positions = np.where(phase < dim, phase, 2 * dim - 1 - phase).astype(np.int64)
        x = ctx.one("Gather", [x, ctx.constant(positions, "positions")], axis=axis)
    return x


@exports(ops.Tile)
def _tile(ctx: ExportContext, op: ops.Tile, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Tile", [inputs[0], ctx.ints(op.repeats, "repeats")])]


@exports(ops.DepthToSpace)
def _depth_to_space(
    ctx: ExportContext, op: ops.DepthToSpace, node: Node, inputs: list[str]
) -> list[str]:
    if node.inputs[0].rank != 4:
        raise unsupported(node, "ONNX DepthToSpace takes 4-D data only")
    mode = "DCR" if op.mode is ops.BlockMode.BLOCKS_FIRST else "CRD"
    return [ctx.one("DepthToSpace", inputs, blocksize=op.block_size, mode=mode)]


@exports(ops.SpaceToDepth)
def _space_to_depth(
    ctx: ExportContext, op: ops.SpaceToDepth, node: Node, inputs: list[str]
) -> list[str]:
    if op.mode is not ops.BlockMode.BLOCKS_FIRST or node.inputs[0].rank != 4:
        raise unsupported(node, "ONNX SpaceToDepth takes 4-D data in blocks-first order only")
    return [ctx.one("SpaceToDepth", inputs, blocksize=op.block_size)]


@exports(ops.ReverseSequence)
def _reverse_sequence(
    ctx: ExportContext, op: ops.ReverseSequence, node: Node, inputs: list[str]
) -> list[str]:
    """ONNX takes the batch and time axes among the first two: others are moved there."""
    lengths = inputs[1]
    if node.inputs[1].element_type is not et.i64:
        lengths = ctx.one("Cast", [lengths], to=7)
    batch, time = op.batch_axis, op.seq_axis
    rank = node.inputs[0].rank
    if {batch, time} == {0, 1}:
        return [ctx.one("ReverseSequence", [inputs[0], lengths], batch_axis=batch, time_axis=time)]
    perm = [time, batch, *(a for a in range(rank) if a not in (batch, time))]
    moved = ctx.one("Transpose", [inputs[0]], perm=perm)
    reversed_ = ctx.one("ReverseSequence", [moved, lengths], batch_axis=1, time_axis=0)
    back = [perm.index(a) for a in range(rank)]
    return [ctx.one("Transpose", [reversed_], perm=back)]


@exports(ops.Expand)
def _expand(ctx: ExportContext, op: ops.Expand, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Expand", [inputs[0], ctx.ints(op.shape, "shape")])]


@exports(ops.Flatten)
def _flatten(ctx: ExportContext, op: ops.Flatten, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Flatten", inputs, axis=op.axis)]


@exports(ops.Squeeze, ops.Unsqueeze)
def _squeeze(
    ctx: ExportContext, op: ops.Squeeze | ops.Unsqueeze, node: Node, inputs: list[str]
) -> list[str]:
    """Both become a Reshape to the result's shape (exact, and the same at every opset)."""
    shape = node.outputs[0].static_shape("the shape of an exported Squeeze", ConversionError)
    return [ctx.one("Reshape", [inputs[0], ctx.ints(shape, "shape")])]


@exports(ops.Stack)
def _stack(ctx: ExportContext, op: ops.Stack, node: Node, inputs: list[str]) -> list[str]:
    shape = list(node.inputs[0].static_shape("the shape of an exported Stack", ConversionError))
    shape.insert(op.axis, 1)
    target = ctx.ints(shape, "shape")
    parts = [ctx.one("Reshape", [x, target]) for x in inputs]
    return [ctx.one("Concat", parts, axis=op.axis)]
