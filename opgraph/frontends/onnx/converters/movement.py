"""Data movement: Split (sizes as an attribute, an input from opset 13, ``num_outputs`` from
18), Pad (attributes before opset 11, inputs after, ``axes`` from 18, ``wrap`` from 19), Tile,
DepthToSpace, SpaceToDepth, ReverseSequence, Trilu and EyeLike."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from opgraph import ops
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import (
    axes_list,
    axis_of,
    full,
    typed_constant,
)
from opgraph.frontends.onnx.registry import onnx_op
from opgraph.frontends.onnx.types import from_onnx

# ----------------------------------------------------------------------------------- Split


def _split(ctx: NodeContext, sizes: Sequence[int] | None) -> tuple[Output, ...]:
    x = ctx.input(0)
    axis = axis_of(int(ctx.attr("axis", 0)), x.rank)
    dim = x.shape[axis]
    if sizes is None:
        pieces = int(ctx.attr("num_outputs", 0)) or len(ctx.node.output)
        dim = static_dim(dim, "Split's piece sizes (num_outputs)")
        chunk = -(-dim // pieces)  # the last piece is smaller when the dimension does not divide
        sizes = [max(0, min(chunk, dim - i * chunk)) for i in range(pieces)]
    return ops.split(x, axis, [int(s) for s in sizes])


@onnx_op("Split", since=1)
def _split_v1(ctx: NodeContext) -> tuple[Output, ...]:
    sizes = ctx.attr("split")
    if sizes is None and ctx.optional(1) is not None:
        sizes = [int(s) for s in ctx.const(1, "split")]
    return _split(ctx, sizes)


@onnx_op("Split", since=13)
def _split_v13(ctx: NodeContext) -> tuple[Output, ...]:
    raw = ctx.const_or_none(1, "split")
    return _split(ctx, None if raw is None else [int(s) for s in raw.reshape(-1)])


# ------------------------------------------------------------------------------------- Pad

_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge"}


@onnx_op("Pad", since=1)
def _pad_v1(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    pads = ctx.attr("pads") if ctx.opset >= 2 else ctx.attr("paddings")
    value = typed_constant(float(ctx.attr("value", 0.0)), x.element_type)
    return _pad(ctx, x, [int(p) for p in pads], list(range(x.rank)), value)


@onnx_op("Pad", since=11)
def _pad_v11(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    mode = str(ctx.attr("mode", "constant"))
    if not ctx.known(1) and ctx.optional(3) is None and mode in _MODES:
        value = ctx.optional(2)
        scalar = ops.reshape(value, []) if value is not None else None
        return ops.dynamic_pad(x, ctx.input(1), scalar, _MODES[mode])
    pads = [int(p) for p in ctx.const(1, "pads").reshape(-1)]
    value = ctx.optional(2)
    raw_axes = ctx.const_or_none(3, "axes")
    axes = axes_list(raw_axes, x.rank) if raw_axes is not None else list(range(x.rank))
    scalar = ops.reshape(value, []) if value is not None else full(0, x, ())
    return _pad(ctx, x, pads, axes, scalar)


def _pad(ctx: NodeContext, x: Output, pads: list[int], axes: list[int], value: Output) -> Output:
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"pads has {len(pads)} values for {len(axes)} axes")
    below, above = [0] * x.rank, [0] * x.rank
    for i, axis in enumerate(axes):
        below[axis], above[axis] = pads[i], pads[i + len(axes)]
    mode = str(ctx.attr("mode", "constant"))
    if mode == "wrap":
        return _wrap(x, below, above)
    if mode not in _MODES:
        raise ctx.fail(f"unsupported pad mode {mode!r}")
    if mode == "constant":
        return ops.pad(x, below, above, value=value)
    return ops.pad(x, below, above, mode=_MODES[mode])


def _wrap(x: Output, below: list[int], above: list[int]) -> Output:
    """Circular padding: gather each axis at its indices modulo the dimension."""
    for axis, (low, high) in enumerate(zip(below, above, strict=True)):
        if low == 0 and high == 0:
            continue
        dim = static_dim(x.shape[axis], "the gather positions of a wrap Pad")
        positions = np.arange(-low, dim + high, dtype=np.int64) % max(dim, 1)
        x = ops.gather(x, constant(positions), axis=axis)
    return x


# -------------------------------------------------------------------------------- the rest


@onnx_op("Tile", since=6)
def _tile(ctx: NodeContext) -> Output:
    if not ctx.known(1):
        return ops.dynamic_tile(ctx.input(0), ctx.input(1))
    return ops.tile(ctx.input(0), [int(r) for r in ctx.const(1, "repeats").reshape(-1)])


@onnx_op("DepthToSpace", since=1)
def _depth_to_space(ctx: NodeContext) -> Output:
    mode = "depth_first" if str(ctx.attr("mode", "DCR")).upper() == "CRD" else "blocks_first"
    return ops.depth_to_space(ctx.input(0), int(ctx.attr("blocksize")), mode=mode)


@onnx_op("SpaceToDepth", since=1)
def _space_to_depth(ctx: NodeContext) -> Output:
    return ops.space_to_depth(ctx.input(0), int(ctx.attr("blocksize")))


@onnx_op("ReverseSequence", since=10)
def _reverse_sequence(ctx: NodeContext) -> Output:
    batch_axis, time_axis = int(ctx.attr("batch_axis", 1)), int(ctx.attr("time_axis", 0))
    return ops.reverse_sequence(
        ctx.input(0), ctx.input(1), batch_axis=batch_axis, seq_axis=time_axis
    )


@onnx_op("Trilu", since=14)
def _trilu(ctx: NodeContext) -> Output:
    """The upper or lower triangle (offset ``k``) of the last two axes, zeros elsewhere."""
    x = ctx.input(0)
    k = int(ctx.const(1, "k").reshape(-1)[0]) if ctx.optional(1) is not None else 0
    rows, cols = (static_dim(d, "Trilu's mask") for d in x.shape[-2:])
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset >= k if ctx.attr("upper", 1) else offset <= k
    mask = ops.broadcast(constant(keep), x.shape, tuple(range(x.rank - 2)))
    return ops.select(mask, x, full(0, x))


@onnx_op("EyeLike", since=9)
def _eye_like(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    dtype = ctx.attr("dtype")
    element_type = x.element_type if dtype is None else from_onnx(int(dtype), ctx.where)
    rows, cols = (static_dim(d, "EyeLike's constant") for d in x.shape)
    eye = np.eye(rows, cols, k=int(ctx.attr("k", 0)))
    return typed_constant(eye, element_type)
