"""Views, copies and data movement: view/reshape, permute, expand, slice, select, squeeze,
cat, split, flip, roll, pad, repeat, dtype casts.

Exported graphs are functional: a "view" is a value with the viewed contents (in logical
row-major order), so every view op becomes a copying movement op, and ``clone``/``alias``/
``detach`` are the identity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from opgraph import ops
from opgraph.core.dim import Dim, DimExpr, floor_div
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.torch.context import NodeContext, coerce, fill, literal
from opgraph.frontends.torch.converters.common import (
    broadcast_like,
    dim_of,
    overloads,
)
from opgraph.frontends.torch.promotion import result_type
from opgraph.frontends.torch.registry import aten_op
from opgraph.frontends.torch.types import from_torch


# ------------------------------------------------------------------------------ helpers
def infer_shape(size: Sequence[Dim], numel: Dim) -> list[Dim]:
    """``size`` with its one ``-1`` (if any) resolved for ``numel`` elements (sizes may be
    symbolic: ``[s0*s1, 16]``)."""
    shape = list(size)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = 0 if known == 0 else floor_div(numel, known)
    if math.prod(shape) != numel:
        raise ValueError(f"shape {list(size)} is invalid for {numel} elements")
    return shape


def reshape(x: Output, shape: Sequence[Dim]) -> Output:
    """``x`` reshaped (skipped when the shape does not change)."""
    return x if tuple(shape) == x.shape else ops.reshape(x, list(shape))


def transpose_axes(x: Output, a: int, b: int) -> Output:
    """``x`` with axes ``a`` and ``b`` swapped."""
    a, b = dim_of(a, x.rank), dim_of(b, x.rank)
    if a == b or x.rank < 2:
        return x
    perm = list(range(x.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(x, perm)


def slice_axis(x: Output, axis: int, start: Dim, stop: Dim, step: int = 1) -> Output:
    """``x[..., start:stop:step, ...]`` on ``axis`` (bounds already clamped)."""
    if (start, stop, step) == (0, x.shape[axis], 1):
        return x
    lower: list[Dim] = [0] * x.rank
    upper: list[Dim] = list(x.shape)
    strides = [1] * x.rank
    lower[axis], upper[axis], strides[axis] = start, stop, step
    return ops.slice(x, lower, upper, strides)


def clamp_range(start: int | None, end: int | None, extent: Dim) -> tuple[Dim, Dim]:
    """Python slice bounds (None, negative, past the end) made concrete, as ATen does (on a
    symbolic ``extent`` where the bounds decide the comparisons)."""
    first = 0 if start is None else int(start)
    last = extent if end is None else int(end)
    lo = min(max(first + extent if first < 0 else first, 0), extent)
    hi = min(max(last + extent if last < 0 else last, 0), extent)
    return lo, max(lo, hi)


# -------------------------------------------------------------------------------- views
@aten_op(*overloads("view.default", "_unsafe_view.default", "reshape.default", "view_copy.default"))
def _view(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    size = ctx.dims("size") if "size" in ctx.args else ctx.dims("shape")
    return reshape(x, infer_shape(size, math.prod(x.shape)))


@aten_op(*overloads("view_as.default"))
def _view_as(ctx: NodeContext) -> Output:
    return reshape(ctx.tensor("self"), ctx.tensor("other").shape)


@aten_op(*overloads("flatten.using_ints"))
def _flatten(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    if x.rank == 0:
        return reshape(x, [1])
    start, end = dim_of(ctx.integer("start_dim"), x.rank), dim_of(ctx.integer("end_dim"), x.rank)
    middle = math.prod(x.shape[start : end + 1])
    return reshape(x, [*x.shape[:start], middle, *x.shape[end + 1 :]])


@aten_op(*overloads("permute.default", "permute_copy.default"))
def _permute(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    perm = [dim_of(d, x.rank) for d in ctx.ints("dims")]
    return x if perm == list(range(x.rank)) else ops.transpose(x, perm)


@aten_op(*overloads("t.default", "t_copy.default"))
def _t(ctx: NodeContext) -> Output:
    return transpose_axes(ctx.tensor("self"), 0, 1)


@aten_op(*overloads("transpose.int", "transpose_copy.int"))
def _transpose(ctx: NodeContext) -> Output:
    return transpose_axes(ctx.tensor("self"), ctx.integer("dim0"), ctx.integer("dim1"))


@aten_op(*overloads("expand.default", "expand_copy.default"))
def _expand(ctx: NodeContext) -> Output:
    x, size = ctx.tensor("self"), ctx.dims("size")
    offset = len(size) - x.rank
    target = [x.shape[i - offset] if s == -1 else s for i, s in enumerate(size)]
    return broadcast_like(x, target)


@aten_op(*overloads("expand_as.default"))
def _expand_as(ctx: NodeContext) -> Output:
    return broadcast_like(ctx.tensor("self"), ctx.tensor("other").shape)


@aten_op(*overloads("slice.Tensor", "slice_copy.Tensor"))
def _slice(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    axis = dim_of(ctx.integer("dim"), x.rank)
    step = ctx.integer("step")
    if step < 1:
        raise ctx.fail(f"slice step {step} must be positive")
    extent, begin, end = x.shape[axis], ctx["start"], ctx["end"]
    if isinstance(extent, DimExpr) or any(isinstance(v, DimExpr) for v in (begin, end)):
        # symbolic: torch's metadata has the clamped size; the start is normalised here
        start = symbolic_index(0 if begin is None else begin, extent)
        size = ctx.out_shape()[axis]
        return slice_axis(x, axis, start, start + (size - 1) * step + 1, step)
    start, stop = clamp_range(begin, end, extent)
    return slice_axis(x, axis, start, stop, step)


def symbolic_index(index: Dim, extent: Dim) -> Dim:
    """A start index on an axis of symbolic size (a negative int counts from the end); the
    slice type rule checks it against the size when the symbols are bound."""
    return extent + index if isinstance(index, int) and index < 0 else index


@aten_op(*overloads("narrow.default"))
def _narrow(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    axis = dim_of(ctx.integer("dim"), x.rank)
    start = ctx.integer("start") % x.shape[axis] if x.shape[axis] else 0
    return slice_axis(x, axis, start, start + ctx.integer("length"))


def select(x: Output, axis: int, index: int) -> Output:
    """``x`` indexed at ``index`` on ``axis`` (which disappears)."""
    extent = x.shape[axis]
    if isinstance(extent, DimExpr):
        start = symbolic_index(index, extent)
        picked = slice_axis(x, axis, start, start + 1)
        return reshape(picked, [d for i, d in enumerate(x.shape) if i != axis])
    if not -extent <= index < extent:
        raise IndexError(f"index {index} is out of range for dimension {axis} of size {extent}")
    index = index + extent if index < 0 else index
    picked = slice_axis(x, axis, index, index + 1)
    return reshape(picked, [d for i, d in enumerate(x.shape) if i != axis])


@aten_op(*overloads("select.int", "select_copy.int"))
def _select(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    return select(x, dim_of(ctx.integer("dim"), x.rank), ctx.integer("index"))


def squeeze(x: Output, dims: Sequence[int] | None) -> Output:
    """``x`` without the listed size-1 axes (all size-1 axes for None); others are kept."""
    axes = range(x.rank) if dims is None else [dim_of(d, x.rank) for d in dims]
    dropped = {a for a in axes if x.rank and x.shape[a] == 1}
    return reshape(x, [d for i, d in enumerate(x.shape) if i not in dropped])


@aten_op(*overloads("squeeze.default", "squeeze_copy.default"))
def _squeeze_all(ctx: NodeContext) -> Output:
    return squeeze(ctx.tensor("self"), None)


@aten_op(*overloads("squeeze.dim", "squeeze.dims", "squeeze_copy.dim", "squeeze_copy.dims"))
def _squeeze(ctx: NodeContext) -> Output:
    return squeeze(ctx.tensor("self"), ctx.ints("dim"))


@aten_op(*overloads("unsqueeze.default", "unsqueeze_copy.default"))
def _unsqueeze(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    axis = dim_of(ctx.integer("dim"), x.rank + 1)
    return reshape(x, [*x.shape[:axis], 1, *x.shape[axis:]])


@aten_op(
    *overloads(
        "clone.default",
        "alias.default",
        "alias_copy.default",
        "detach.default",
        "detach_copy.default",
        "lift_fresh_copy.default",
        "contiguous.default",
    )
)
def _identity(ctx: NodeContext) -> Output:
    return ctx.tensor("self")


@aten_op(*overloads("_to_copy.default", "to.dtype", "_to_dim_order_copy.default"))
def _to_copy(ctx: NodeContext) -> Output:
    x, dtype = ctx.tensor("self"), ctx["dtype"]
    return x if dtype is None else coerce(x, from_torch(dtype, ctx.where))


@aten_op(*overloads("type_as.default"))
def _type_as(ctx: NodeContext) -> Output:
    return coerce(ctx.tensor("self"), ctx.tensor("other").element_type)


@aten_op(
    *overloads(
        "_assert_tensor_metadata.default",
        "_assert_scalar.default",
        "_assert_async.msg",
        "sym_constrain_range_for_size.default",
    )
)
def _no_op(ctx: NodeContext) -> None:
    """Runtime assertions: shapes are static, so they hold by construction."""
    return None


@aten_op(*overloads("copy.default"))
def _copy(ctx: NodeContext) -> Output:
    """The value ``self`` takes after ``self.copy_(src)``: ``src`` cast and broadcast."""
    x, src = ctx.tensor("self"), ctx.tensor("src")
    return broadcast_like(coerce(src, x.element_type), x.shape)


# ----------------------------------------------------------------------- join and split
@aten_op(*overloads("cat.default"))
def _cat(ctx: NodeContext) -> Output:
    values = [v for v in ctx["tensors"] if isinstance(v, Output)]
    # ATen skips legacy empty 1-D tensors (shape [0]) when concatenating higher ranks.
    kept = [v for v in values if not (v.shape == (0,) and any(u.rank > 1 for u in values))]
    target = result_type(kept)
    kept = [coerce(v, target) for v in kept]
    if len(kept) == 1:
        return kept[0]
    return ops.concat(kept, dim_of(ctx.integer("dim"), kept[0].rank))


@aten_op(*overloads("stack.default"))
def _stack(ctx: NodeContext) -> Output:
    values = list(ctx["tensors"])
    target = result_type(values)
    values = [coerce(v, target) for v in values]
    return ops.stack(values, dim_of(ctx.integer("dim"), values[0].rank + 1))


def split(x: Output, axis: int, sizes: Sequence[int]) -> tuple[Output, ...]:
    """``x`` cut into consecutive pieces of ``sizes`` along ``axis``."""
    if len(sizes) == 1:
        return (x,)
    pieces, start = [], 0
    for size in sizes:
        pieces.append(slice_axis(x, axis, start, start + size))
        start += size
    return tuple(pieces)


@aten_op(*overloads("split_with_sizes.default", "split_with_sizes_copy.default"))
def _split_with_sizes(ctx: NodeContext) -> tuple[Output, ...]:
    x = ctx.tensor("self")
    return split(x, dim_of(ctx.integer("dim"), x.rank), ctx.ints("split_sizes"))


@aten_op(*overloads("split.Tensor", "split_copy.Tensor"))
def _split(ctx: NodeContext) -> tuple[Output, ...]:
    x, size = ctx.tensor("self"), ctx.integer("split_size")
    axis = dim_of(ctx.integer("dim"), x.rank)
    extent = static_dim(x.shape[axis], "torch split's piece sizes")
    sizes = [min(size, extent - s) for s in range(0, extent, size)] if size else [0]
    return split(x, axis, sizes or [0])


@aten_op(*overloads("unbind.int", "unbind_copy.int"))
def _unbind(ctx: NodeContext) -> tuple[Output, ...]:
    x = ctx.tensor("self")
    axis = dim_of(ctx.integer("dim"), x.rank)
    return tuple(select(x, axis, i) for i in range(x.shape[axis]))


# ------------------------------------------------------------------------------- motion
@aten_op(*overloads("flip.default"))
def _flip(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    axes = sorted({dim_of(d, x.rank) for d in ctx.ints("dims")}) if x.rank else []
    return ops.reverse(x, axes) if axes else x


def roll(x: Output, shift: int, axis: int) -> Output:
    """``torch.roll`` along one axis."""
    extent = x.shape[axis]
    offset = shift % extent if extent else 0
    if offset == 0:
        return x
    tail = slice_axis(x, axis, extent - offset, extent)
    return ops.concat([tail, slice_axis(x, axis, 0, extent - offset)], axis)


@aten_op(*overloads("roll.default"))
def _roll(ctx: NodeContext) -> Output:
    x, shifts, dims = ctx.tensor("self"), ctx.ints("shifts"), ctx.ints("dims")
    if not dims:
        flat = roll(reshape(x, [x.tensor_type.size]), shifts[0], 0)
        return reshape(flat, x.shape)
    for shift, dim in zip(shifts, dims, strict=True):
        x = roll(x, shift, dim_of(dim, x.rank))
    return x


@aten_op(*overloads("constant_pad_nd.default"))
def _constant_pad_nd(ctx: NodeContext) -> Output:
    """``pad`` lists (before, after) pairs from the last axis backwards; negative crops."""
    x, pad = ctx.tensor("self"), ctx.ints("pad")
    below, above = [0] * x.rank, [0] * x.rank
    for i in range(len(pad) // 2):
        axis = x.rank - 1 - i
        below[axis], above[axis] = pad[2 * i], pad[2 * i + 1]
    value = literal(ctx["value"], x.element_type)
    return ops.pad(x, below, above, "constant", value)


@aten_op(*overloads("repeat.default"))
def _repeat(ctx: NodeContext) -> Output:
    x, repeats = ctx.tensor("self"), ctx.ints("repeats")
    x = reshape(x, [1] * (len(repeats) - x.rank) + list(x.shape))
    return x if all(r == 1 for r in repeats) else ops.tile(x, repeats)


@aten_op(*overloads("pixel_shuffle.default"))
def _pixel_shuffle(ctx: NodeContext) -> Output:
    """Channel ``c·r² + i·r + j`` moves to pixel offset (i, j): ONNX DepthToSpace CRD."""
    x = ctx.tensor("self")
    return ops.depth_to_space(x, ctx.integer("upscale_factor"), mode="depth_first")


@aten_op(*overloads("tril.default", "triu.default"))
def _triangle(ctx: NodeContext) -> Output:
    x, k = ctx.tensor("self"), ctx.integer("diagonal")
    rows, cols = (static_dim(d, "torch tril/triu's mask") for d in x.shape[-2:])
    lower = ctx.node.target in overloads("tril.default")
    keep = np.tri(rows, cols, k, dtype=bool) if lower else ~np.tri(rows, cols, k - 1, dtype=bool)
    mask = broadcast_like(constant(keep), x.shape)
    return ops.select(mask, x, fill(0, x.element_type, x.shape))
