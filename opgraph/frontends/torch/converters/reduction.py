"""Reduction, scan and ordering ATen overloads.

ATen's conventions made explicit: a ``dim`` of None or ``[]`` reduces every axis; sums,
products and cumulative sums of booleans and integers accumulate in i64; ``dtype=`` converts
the input first; ``max.dim``/``min.dim`` return (values, i64 indices) with the first index on
ties; variance takes a ``correction`` (Bessel's by default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.torch.context import NodeContext, coerce, fill
from opgraph.frontends.torch.converters.common import (
    as_bool,
    dim_of,
    integral_to_i64,
    overloads,
    reduction_axes,
)
from opgraph.frontends.torch.promotion import float_type
from opgraph.frontends.torch.registry import aten_op
from opgraph.frontends.torch.types import from_torch

Reducer = Callable[[Output, Any, bool], Output]


def reduce(builder: Reducer, x: Output, axes: Sequence[int], keepdim: bool) -> Output:
    """``builder`` over ``axes``; no axes (a rank-0 input) is the identity."""
    if not axes:
        return x
    return builder(x, tuple(axes), keepdim)


def _with_dtype(ctx: NodeContext, x: Output) -> Output:
    dtype = ctx.args.get("dtype")
    return coerce(x, from_torch(dtype, ctx.where)) if dtype is not None else x


def _dims(ctx: NodeContext, x: Output, name: str = "dim") -> list[int]:
    return reduction_axes(ctx.args.get(name), x.rank)


@aten_op(*overloads("sum.dim_IntList", "sum.default"))
def _sum(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    x = _with_dtype(ctx, x) if ctx["dtype"] is not None else integral_to_i64(x)
    return reduce(ops.reduce_sum, x, _dims(ctx, x), bool(ctx.args.get("keepdim", False)))


@aten_op(*overloads("prod.dim_int", "prod.default"))
def _prod(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    x = _with_dtype(ctx, x) if ctx["dtype"] is not None else integral_to_i64(x)
    return reduce(ops.reduce_prod, x, _dims(ctx, x), bool(ctx.args.get("keepdim", False)))


@aten_op(*overloads("mean.dim", "mean.default"))
def _mean(ctx: NodeContext) -> Output:
    x = _with_dtype(ctx, ctx.tensor("self"))
    return reduce(ops.reduce_mean, x, _dims(ctx, x), bool(ctx.args.get("keepdim", False)))


@aten_op(*overloads("amax.default", "max.default"))
def _amax(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    return reduce(ops.reduce_max, x, _dims(ctx, x), bool(ctx.args.get("keepdim", False)))


@aten_op(*overloads("amin.default", "min.default"))
def _amin(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    return reduce(ops.reduce_min, x, _dims(ctx, x), bool(ctx.args.get("keepdim", False)))


@aten_op(*overloads("logsumexp.default"))
def _logsumexp(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    x = coerce(x, float_type(x.element_type))
    return reduce(ops.reduce_log_sum_exp, x, _dims(ctx, x), ctx["keepdim"])


def _index_and_value(
    ctx: NodeContext, value: Reducer, index: Callable[..., Output]
) -> tuple[Output | None, Output | None]:
    x, keepdim = ctx.tensor("self"), bool(ctx["keepdim"])
    if x.rank == 0:
        return x, fill(0, et.i64, ())
    axis = dim_of(ctx.integer("dim"), x.rank)
    used = ctx.used_outputs()
    values = value(x, (axis,), keepdim) if 0 in used else None
    indices = index(x, axis, keep_dims=keepdim) if 1 in used else None
    return values, indices


@aten_op(*overloads("max.dim"))
def _max_dim(ctx: NodeContext) -> tuple[Output | None, Output | None]:
    return _index_and_value(ctx, ops.reduce_max, ops.arg_max)


@aten_op(*overloads("min.dim"))
def _min_dim(ctx: NodeContext) -> tuple[Output | None, Output | None]:
    return _index_and_value(ctx, ops.reduce_min, ops.arg_min)


def _arg(ctx: NodeContext, builder: Callable[..., Output]) -> Output:
    x, dim, keepdim = ctx.tensor("self"), ctx["dim"], bool(ctx["keepdim"])
    if x.rank == 0:
        return fill(0, et.i64, ())
    if dim is None:
        flat = builder(ops.reshape(x, [x.tensor_type.size]), 0)
        return ops.reshape(flat, [1] * x.rank) if keepdim else flat
    return builder(x, dim_of(int(dim), x.rank), keep_dims=keepdim)


@aten_op(*overloads("argmax.default"))
def _argmax(ctx: NodeContext) -> Output:
    return _arg(ctx, ops.arg_max)


@aten_op(*overloads("argmin.default"))
def _argmin(ctx: NodeContext) -> Output:
    return _arg(ctx, ops.arg_min)


def variance(x: Output, axes: list[int], correction: float, keepdim: bool) -> Output:
    """``Σ (x - mean)² / (N - correction)`` over ``axes`` (N - correction <= 0 gives inf or
    NaN, as in ATen)."""
    if not axes:
        return ops.multiply(x, fill(0, x.element_type, x.shape))
    mean = ops.reduce_mean(x, tuple(axes))
    centered = ops.subtract(x, ops.broadcast(mean, x.shape, tuple(axes)))
    total = ops.reduce_sum(ops.multiply(centered, centered), tuple(axes), keep_dims=keepdim)
    what = "the divisor of a variance"
    count = math.prod(static_dim(x.shape[a], what) for a in axes) - correction
    return ops.divide(total, fill(max(count, 0), total.element_type, total.shape))


def _variance_args(ctx: NodeContext) -> tuple[Output, list[int], float, bool]:
    x = ctx.tensor("self")
    x = coerce(x, float_type(x.element_type))
    if "unbiased" in ctx.args:
        correction = 1.0 if ctx["unbiased"] else 0.0
    else:
        correction = 1.0 if ctx["correction"] is None else float(ctx["correction"])
    return x, _dims(ctx, x), correction, bool(ctx["keepdim"])


@aten_op(*overloads("var.correction", "var.dim"))
def _var(ctx: NodeContext) -> Output:
    return variance(*_variance_args(ctx))


@aten_op(*overloads("std.correction", "std.dim"))
def _std(ctx: NodeContext) -> Output:
    return ops.sqrt(variance(*_variance_args(ctx)))


@aten_op(*overloads("var_mean.correction"))
def _var_mean(ctx: NodeContext) -> tuple[Output, Output]:
    x, axes, correction, keepdim = _variance_args(ctx)
    return variance(x, axes, correction, keepdim), reduce(ops.reduce_mean, x, axes, keepdim)


def _logical_reduce(builder: Reducer) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        x = as_bool(ctx.tensor("self"))
        keepdim = bool(ctx.args.get("keepdim", False))
        return reduce(builder, x, _dims(ctx, x), keepdim)

    return convert


aten_op(*overloads("any.dim", "any.dims", "any.default"))(_logical_reduce(ops.reduce_any))
aten_op(*overloads("all.dim", "all.dims", "all.default"))(_logical_reduce(ops.reduce_all))


@aten_op(*overloads("cumsum.default"))
def _cumsum(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    x = _with_dtype(ctx, x) if ctx["dtype"] is not None else integral_to_i64(x)
    if x.rank == 0:
        return x
    return ops.cumsum(x, dim_of(ctx.integer("dim"), x.rank))


@aten_op(*overloads("linalg_vector_norm.default"))
def _vector_norm(ctx: NodeContext) -> Output:
    x = _with_dtype(ctx, ctx.tensor("self"))
    x = coerce(x, float_type(x.element_type))
    axes, keepdim, order = _dims(ctx, x), bool(ctx["keepdim"]), float(ctx["ord"])
    magnitude = ops.abs(x)
    if order == 2:
        return reduce(ops.reduce_l2, x, axes, keepdim)
    if order == 1:
        return reduce(ops.reduce_sum, magnitude, axes, keepdim)
    if math.isinf(order):
        return reduce(ops.reduce_max if order > 0 else ops.reduce_min, magnitude, axes, keepdim)
    if order == 0:
        nonzero = ops.convert(as_bool(x), x.element_type)
        return reduce(ops.reduce_sum, nonzero, axes, keepdim)
    powered = ops.power(magnitude, fill(order, x.element_type, x.shape))
    total = reduce(ops.reduce_sum, powered, axes, keepdim)
    return ops.power(total, fill(1 / order, x.element_type, total.shape))


@aten_op(*overloads("topk.default"))
def _topk(ctx: NodeContext) -> tuple[Output, Output]:
    x = ctx.tensor("self")
    if x.rank == 0:
        return x, fill(0, et.i64, ())
    axis = dim_of(ctx.integer("dim"), x.rank)
    return ops.top_k(x, ctx.integer("k"), axis, bool(ctx["largest"]), bool(ctx["sorted"]))


@aten_op(*overloads("sort.default"))
def _sort(ctx: NodeContext) -> tuple[Output, Output]:
    x = ctx.tensor("self")
    if x.rank == 0:
        return x, fill(0, et.i64, ())
    axis = dim_of(ctx.integer("dim"), x.rank)
    length = static_dim(x.shape[axis], "torch.sort (a top_k of the whole axis)")
    values, indices = ops.top_k(x, length, axis, bool(ctx["descending"]), True)
    return values, indices
