"""Indexing: Gather, GatherElements, GatherND, ScatterElements (and the older Scatter),
ScatterND, TensorScatter, OneHot, and the data-dependent Compress and NonZero (``ops.compress``
and ``ops.non_zero``: fresh symbols bound at run time; constant data folds at import)."""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext, constant_value
from opgraph.frontends.onnx.converters.common import axis_of, expand_to, full, prod
from opgraph.frontends.onnx.registry import onnx_op


@onnx_op("Gather", since=1)
def _gather(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    return ops.gather(x, _index(ctx.input(1)), axis=axis_of(int(ctx.attr("axis", 0)), x.rank))


@onnx_op("GatherElements", since=11)
def _gather_elements(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    axis = axis_of(int(ctx.attr("axis", 0)), x.rank)
    return ops.gather_elements(x, _index(ctx.input(1)), axis=axis)


@onnx_op("GatherND", since=11)
def _gather_nd(ctx: NodeContext) -> Output:
    batch_dims = int(ctx.attr("batch_dims", 0))
    return ops.gather_nd(ctx.input(0), _index(ctx.input(1)), batch_dims=batch_dims)


def _scatter_elements(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    axis = axis_of(int(ctx.attr("axis", 0)), x.rank)
    reduction = str(ctx.attr("reduction", "none"))
    return ops.scatter_elements(
        x, _index(ctx.input(1)), ctx.input(2), axis=axis, reduction=reduction
    )


onnx_op("Scatter", since=9)(_scatter_elements)
onnx_op("ScatterElements", since=11)(_scatter_elements)


@onnx_op("ScatterND", since=11)
def _scatter_nd(ctx: NodeContext) -> Output:
    reduction = str(ctx.attr("reduction", "none"))
    return ops.scatter_nd(ctx.input(0), _index(ctx.input(1)), ctx.input(2), reduction=reduction)


def _index(indices: Output) -> Output:
    return indices if indices.element_type in (et.i32, et.i64) else ops.convert(indices, et.i64)


@onnx_op("TensorScatter", since=24)
def _tensor_scatter(ctx: NodeContext) -> Output:
    """Write ``update`` into the cache along ``axis`` from each batch entry's write index."""
    cache, update, starts = ctx.input(0), ctx.input(1), ctx.optional(2)
    axis = axis_of(int(ctx.attr("axis", -2)), cache.rank)
    circular = str(ctx.attr("mode", "linear")) == "circular"
    what = "TensorScatter's write positions"
    steps = constant(np.arange(static_dim(update.shape[axis], what), dtype=np.int64))
    positions = expand_to(steps, update.rank, [axis], update.shape)
    if starts is not None:
        positions = ops.add(positions, expand_to(_index64(starts), update.rank, [0], update.shape))
    if circular:
        positions = ops.mod(positions, full(cache.shape[axis], positions))
    return ops.scatter_elements(cache, positions, update, axis=axis)


def _index64(value: Output) -> Output:
    return value if value.element_type is et.i64 else ops.convert(value, et.i64)


@onnx_op("OneHot", since=9)
def _one_hot(ctx: NodeContext) -> Output:
    indices = _index(ctx.input(0))
    depth = int(np.asarray(ctx.const(1, "depth")).reshape(-1)[0])
    values = ctx.input(2)
    axis = int(ctx.attr("axis", -1))
    known = constant_value(values)
    if known is not None:
        off, on = (v.item() for v in known.reshape(-1)[:2])
        return ops.one_hot(indices, depth, axis, on, off, values.element_type)
    mask = ops.one_hot(indices, depth, axis, True, False, et.boolean)
    off, on = ops.split(ops.reshape(values, [2]), 0, 2)
    shape = mask.shape
    return ops.select(
        mask,
        ops.broadcast(ops.reshape(on, []), shape, tuple(range(len(shape)))),
        ops.broadcast(ops.reshape(off, []), shape, tuple(range(len(shape)))),
    )


@onnx_op("Compress", since=9)
def _compress(ctx: NodeContext) -> Output:
    x, condition, axis = ctx.input(0), ctx.input(1), ctx.attr("axis")
    known = constant_value(condition)
    if known is None:
        return ops.compress(x, condition, None if axis is None else int(axis))
    # A constant condition: a gather of constant positions keeps the result's size static.
    chosen = np.flatnonzero(np.asarray(known).reshape(-1)).astype(np.int64)
    if axis is None:
        x, axis = ops.reshape(x, [prod(x.shape)]), 0
    return ops.gather(x, constant(chosen), axis=axis_of(int(axis), x.rank))


@onnx_op("NonZero", since=9)
def _non_zero(ctx: NodeContext) -> Output:
    return ops.non_zero(ctx.input(0))
