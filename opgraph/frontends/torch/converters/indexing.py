"""Indexing ATen overloads: index_select, gather, embedding, advanced indexing (``index``,
``index_put``), scatters, masked_fill, slice/select scatters.

Boolean-mask indexing has a data-dependent shape and is refused (ConversionError), which the
``torch.compile`` backend turns into an eager fallback for that node.
"""

from __future__ import annotations

from collections.abc import Sequence

from opgraph import ops
from opgraph.builders.broadcasting import numpy_broadcast
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.node import Output
from opgraph.frontends.torch.context import NodeContext, coerce, fill
from opgraph.frontends.torch.converters.common import (
    as_bool,
    broadcast_like,
    dim_of,
    overloads,
)
from opgraph.frontends.torch.converters.shape import clamp_range, reshape, slice_axis
from opgraph.frontends.torch.registry import aten_op


def _indices(value: Output, ctx: NodeContext) -> Output:
    if value.element_type.is_boolean:
        raise ctx.fail("boolean-mask indexing has a data-dependent shape (unsupported)")
    if not value.element_type.is_integral:
        raise ctx.fail(f"indices must be integers, got {value.type}")
    return value


@aten_op(*overloads("index_select.default"))
def _index_select(ctx: NodeContext) -> Output:
    x, index = ctx.tensor("self"), _indices(ctx.tensor("index"), ctx)
    index = reshape(index, [1]) if index.rank == 0 else index
    if x.rank == 0:
        return ops.gather(reshape(x, [1]), index, 0)
    return ops.gather(x, index, dim_of(ctx.integer("dim"), x.rank))


@aten_op(*overloads("embedding.default"))
def _embedding(ctx: NodeContext) -> Output:
    return ops.gather(ctx.tensor("weight"), _indices(ctx.tensor("indices"), ctx), 0)


def _crop_to(x: Output, shape: Sequence[Dim], skip: int) -> Output:
    """``x`` cut down to ``shape`` on every axis but ``skip`` (torch lets index tensors be
    smaller than the data in the other dimensions)."""
    for axis, extent in enumerate(shape):
        if axis != skip and extent < x.shape[axis]:
            x = slice_axis(x, axis, 0, extent)
    return x


@aten_op(*overloads("gather.default"))
def _gather(ctx: NodeContext) -> Output:
    x, index = ctx.tensor("self"), _indices(ctx.tensor("index"), ctx)
    if x.rank == 0:
        return x
    axis = dim_of(ctx.integer("dim"), x.rank)
    return ops.gather_elements(_crop_to(x, index.shape, axis), index, axis)


def _indexed(ctx: NodeContext, x: Output) -> tuple[list[int], list[Output]]:
    """Positions and broadcast values of the non-None index tensors of ``indices``."""
    entries = list(ctx["indices"])
    positions = [i for i, v in enumerate(entries) if v is not None]
    if not positions:
        raise ctx.fail("indexing without index tensors")
    values = [_indices(coerce(entries[p], entries[p].element_type), ctx) for p in positions]
    values = [coerce(v, et.i64) for v in values]
    return positions, list(numpy_broadcast(*values))


def _front(x: Output, positions: list[int]) -> tuple[Output, list[int]]:
    """``x`` with the indexed axes moved to the front, and the other axes in order."""
    rest = [a for a in range(x.rank) if a not in positions]
    order = positions + rest
    return (x if order == list(range(x.rank)) else ops.transpose(x, order)), rest


def _adjacent(positions: list[int]) -> bool:
    return positions == list(range(positions[0], positions[-1] + 1))


@aten_op(*overloads("index.Tensor"))
def _index(ctx: NodeContext) -> Output:
    """NumPy advanced indexing: the broadcast index dimensions replace the indexed axes in
    place when those are adjacent, else they come first."""
    x = ctx.tensor("self")
    positions, values = _indexed(ctx, x)
    if len(values) == 1:
        return ops.gather(x, values[0], positions[0])
    moved, _ = _front(x, positions)
    result = ops.gather_nd(moved, ops.stack(values, -1))
    first, count = positions[0], values[0].rank
    if _adjacent(positions) and first > 0:
        perm = [*range(count, count + first), *range(count), *range(count + first, result.rank)]
        result = ops.transpose(result, perm)
    return result


@aten_op(*overloads("index_put.default"))
def _index_put(ctx: NodeContext) -> Output:
    x, updates = ctx.tensor("self"), coerce(ctx.tensor("values"), ctx.tensor("self").element_type)
    positions, values = _indexed(ctx, x)
    moved, rest = _front(x, positions)
    batch = list(values[0].shape)
    first = positions[0]
    if _adjacent(positions) and first > 0:
        # torch's update layout keeps the leading unindexed axes in front: move them back.
        before = [x.shape[a] for a in rest[:first]]
        after = [x.shape[a] for a in rest[first:]]
        updates = broadcast_like(updates, before + batch + after)
        nb = len(batch)
        perm = [*range(first, first + nb), *range(first), *range(first + nb, updates.rank)]
        updates = ops.transpose(updates, perm) if updates.rank > 1 else updates
    else:
        updates = broadcast_like(updates, batch + [x.shape[a] for a in rest])
    stacked = ops.stack(values, -1)
    reduction = "add" if ctx["accumulate"] else "none"
    scattered = ops.scatter_nd(moved, stacked, updates, reduction)
    order = positions + rest
    inverse = [order.index(a) for a in range(x.rank)]
    return scattered if inverse == list(range(x.rank)) else ops.transpose(scattered, inverse)


_REDUCTIONS = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}


def _scatter(ctx: NodeContext, src: Output, reduction: str) -> Output:
    x, index = ctx.tensor("self"), _indices(ctx.tensor("index"), ctx)
    axis = dim_of(ctx.integer("dim"), x.rank)
    src = _crop_to(coerce(src, x.element_type), index.shape, -1)
    return ops.scatter_elements(x, index, src, axis, reduction)


@aten_op(*overloads("scatter.src"))
def _scatter_src(ctx: NodeContext) -> Output:
    return _scatter(ctx, ctx.tensor("src"), "none")


@aten_op(*overloads("scatter.value"))
def _scatter_value(ctx: NodeContext) -> Output:
    x, index = ctx.tensor("self"), ctx.tensor("index")
    return _scatter(ctx, fill(ctx["value"], x.element_type, index.shape), "none")


@aten_op(*overloads("scatter_add.default"))
def _scatter_add(ctx: NodeContext) -> Output:
    return _scatter(ctx, ctx.tensor("src"), "add")


@aten_op(*overloads("scatter_reduce.two"))
def _scatter_reduce(ctx: NodeContext) -> Output:
    reduce = ctx["reduce"]
    if reduce not in _REDUCTIONS or not ctx["include_self"]:
        raise ctx.fail(f"scatter_reduce {reduce!r} (include_self={ctx['include_self']})")
    return _scatter(ctx, ctx.tensor("src"), _REDUCTIONS[reduce])


@aten_op(*overloads("masked_fill.Scalar", "masked_fill.Tensor"))
def _masked_fill(ctx: NodeContext) -> Output:
    x, mask, value = ctx.tensor("self"), as_bool(ctx.tensor("mask")), ctx.operand("value")
    fill_value = coerce(value, x.element_type)
    mask, x = numpy_broadcast(mask, x)
    return ops.select(mask, broadcast_like(fill_value, x.shape), x)


@aten_op(*overloads("slice_scatter.default"))
def _slice_scatter(ctx: NodeContext) -> Output:
    x, src = ctx.tensor("self"), ctx.tensor("src")
    axis = dim_of(ctx.integer("dim"), x.rank)
    start, stop = clamp_range(ctx["start"], ctx["end"], x.shape[axis])
    lower: list[Dim] = [0] * x.rank
    upper, strides = list(x.shape), [1] * x.rank
    lower[axis], upper[axis], strides[axis] = start, stop, ctx.integer("step")
    return ops.replace_slice(x, coerce(src, x.element_type), lower, upper, strides)


@aten_op(*overloads("select_scatter.default"))
def _select_scatter(ctx: NodeContext) -> Output:
    x, src = ctx.tensor("self"), ctx.tensor("src")
    axis = dim_of(ctx.integer("dim"), x.rank)
    index = ctx.integer("index") % x.shape[axis]
    lower: list[Dim] = [0] * x.rank
    upper = list(x.shape)
    lower[axis], upper[axis] = index, index + 1
    update = reshape(coerce(src, x.element_type), [*x.shape[:axis], 1, *x.shape[axis + 1 :]])
    return ops.replace_slice(x, update, lower, upper)
