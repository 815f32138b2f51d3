"""Shape computation and layout: Shape, Size, ConstantOfShape, Range, Reshape, Transpose,
Concat, Slice, Unsqueeze, Squeeze, Flatten, Expand. Shape-valued inputs must be known at
import time: constants (they fold), or shape values with symbolic dimensions (``Shape`` of a
symbolic value; ``symbolic.py`` converts the nodes that read those)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph import ops
from opgraph.builders.broadcasting import broadcast_to, numpy_broadcast_shape
from opgraph.core.dim import Dim, free_symbols
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import DimShape
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import axes_list
from opgraph.frontends.onnx.registry import onnx_op


@onnx_op("Shape", since=1)
def _shape(ctx: NodeContext) -> Output:
    shape = list(ctx.input(0).shape)
    rank = len(shape)
    start = int(ctx.attr("start", 0))
    end = int(ctx.attr("end", rank))
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    if _known_at_run_time(ctx, ctx.input(0)):
        whole = ops.shape_of(ctx.input(0))
        return whole if (start, end) == (0, rank) else ops.slice(whole, [start], [max(start, end)])
    # A symbolic dimension makes a shape value only the importer holds (symbolic.py).
    return ctx.importer.symbolic.make(np.array(shape[start:end], dtype=object))


@onnx_op("Size", since=1)
def _size(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    if _known_at_run_time(ctx, x):
        return ops.reduce_prod(ops.shape_of(x), [0]) if x.rank else constant(np.int64(1))
    return ctx.importer.symbolic.make(np.array(x.tensor_type.size, dtype=object))


def _known_at_run_time(ctx: NodeContext, x: Output) -> bool:
    """True when ``x``'s shape has a data-dependent symbol (an output size a node's values
    decide): its shape is then a run-time tensor, not a symbolic shape value."""
    return bool(free_symbols(x.shape) - ctx.importer.parameter_symbols)


@onnx_op("ConstantOfShape", since=9)
def _constant_of_shape(ctx: NodeContext) -> Output:
    value = ctx.tensor_attr("value")
    fill = value.reshape(-1) if value is not None else np.zeros(1, np.float32)
    if fill.size != 1:
        raise ctx.fail(f"value must hold one element, got {fill.size}")
    scalar = constant(fill.reshape(()))
    if not ctx.known(0):  # a run-time shape: fresh sizes bound when the node runs
        return ops.fill(ctx.input(0), scalar)
    shape = tuple(int(d) for d in ctx.const(0, "shape"))
    return ops.broadcast(scalar, shape, tuple(range(len(shape)))) if shape else scalar


@onnx_op("Range", since=11)
def _range(ctx: NodeContext) -> Output:
    if not all(ctx.known(i) for i in range(3)):
        return ops.dynamic_range(*(ops.reshape(ctx.input(i), []) for i in range(3)))
    start, limit, delta = (ctx.const(i, name) for i, name in enumerate(("start", "limit", "delta")))
    values = np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)
    return constant(values, ctx.input(0).element_type)


@onnx_op("Reshape", since=5)
def _reshape(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    if not ctx.known(1):
        return ops.dynamic_reshape(x, ctx.input(1), bool(ctx.attr("allowzero", 0)))
    target = [int(d) for d in ctx.const(1, "shape")]
    if not ctx.attr("allowzero", 0):
        return ops.reshape(x, [x.shape[i] if d == 0 else d for i, d in enumerate(target)])
    return ops.reshape(x, target)


@onnx_op("Transpose", since=1)
def _transpose(ctx: NodeContext) -> Output:
    x, perm = ctx.input(0), ctx.attr("perm")
    if perm is not None and any(not 0 <= int(p) < x.rank for p in perm):
        raise ctx.fail(f"perm {list(perm)} must hold axes in [0, {x.rank}) for input {x.type}")
    return ops.transpose(x, perm)


@onnx_op("Concat", since=4)
def _concat(ctx: NodeContext) -> Output:
    return ops.concat([v for v in ctx.inputs if v is not None], int(ctx.attr("axis")))


@onnx_op("Slice", since=1)
def _slice_v1(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    return _slice(ctx, x, ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes"), None)


@onnx_op("Slice", since=10)
def _slice_v10(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    if not all(ctx.known(i) for i in (1, 2, 4) if ctx.optional(i) is not None):
        axes = ctx.const_or_none(3, "axes")  # only the bounds and steps may be run-time
        return ops.dynamic_slice(
            x, ctx.input(1), ctx.input(2), None if axes is None else _ints(axes), ctx.optional(4)
        )
    starts = ctx.const(1, "starts")
    ends = ctx.const(2, "ends")
    axes = ctx.const_or_none(3, "axes")
    steps = ctx.const_or_none(4, "steps")
    return _slice(ctx, x, starts, ends, axes, steps)


def _slice(ctx: NodeContext, x: Output, starts: Any, ends: Any, axes: Any, steps: Any) -> Output:
    rank = x.rank
    axes = axes_list(axes, rank) if axes is not None else list(range(len(starts)))
    steps = [int(s) for s in steps] if steps is not None else [1] * len(axes)
    lower, upper, strides = [0] * rank, list(x.shape), [1] * rank
    reversed_axes = []
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        dim = x.shape[axis]
        if step == 0:
            raise ctx.fail(f"slice step 0 on axis {axis}")
        if step > 0:
            lo, hi = _clamp(int(start), dim, 0, dim), _clamp(int(end), dim, 0, dim)
            lower[axis], upper[axis], strides[axis] = lo, max(lo, hi), step
        else:
            lo, hi = _clamp(int(start), dim, -1, dim - 1), _clamp(int(end), dim, -1, dim - 1)
            # Walk from lo down to hi (exclusive): on the reversed axis that is an upward slice.
            lower[axis], upper[axis] = dim - 1 - lo, max(dim - 1 - lo, dim - 1 - hi)
            strides[axis] = -step
            reversed_axes.append(axis)
    if reversed_axes:
        x = _reverse(ctx, x, reversed_axes)
    return ops.slice(x, lower, upper, strides)


def _clamp(value: int, dim: int, low: int, high: int) -> int:
    if value < 0:
        value += dim
    return max(low, min(high, value))


def _reverse(ctx: NodeContext, x: Output, axes: list[int]) -> Output:
    reverse = getattr(ops, "reverse", None)
    if reverse is None:
        raise ctx.fail("negative slice steps need the reverse op")
    result: Output = reverse(x, axes)
    return result


def _unsqueezed_shape(shape: DimShape, axes: list[int]) -> list[Dim]:
    out = list(shape)
    for axis in sorted(axes):
        out.insert(axis, 1)
    return out


@onnx_op("Unsqueeze", since=1)
def _unsqueeze_v1(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    axes = axes_list(ctx.attr("axes"), x.rank + len(ctx.attr("axes")))
    return ops.reshape(x, _unsqueezed_shape(x.shape, axes))


@onnx_op("Unsqueeze", since=13)
def _unsqueeze_v13(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    raw = ctx.const(1, "axes")
    axes = axes_list(raw, x.rank + raw.size)
    return ops.reshape(x, _unsqueezed_shape(x.shape, axes))


def _squeeze(ctx: NodeContext, axes: Any) -> Output:
    x = ctx.input(0)
    drop = (
        axes_list(axes, x.rank)
        if axes is not None
        else [i for i, d in enumerate(x.shape) if d == 1]
    )
    for axis in drop:
        if x.shape[axis] != 1:
            raise ctx.fail(f"cannot squeeze axis {axis} of size {x.shape[axis]}")
    return ops.reshape(x, [d for i, d in enumerate(x.shape) if i not in drop])


@onnx_op("Squeeze", since=1)
def _squeeze_v1(ctx: NodeContext) -> Output:
    return _squeeze(ctx, ctx.attr("axes"))


@onnx_op("Squeeze", since=13)
def _squeeze_v13(ctx: NodeContext) -> Output:
    return _squeeze(ctx, ctx.const_or_none(1, "axes"))


@onnx_op("Flatten", since=1)
def _flatten(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    axis = int(ctx.attr("axis", 1))
    axis = axis + x.rank if axis < 0 else axis
    return ops.reshape(x, [math.prod(x.shape[:axis]), math.prod(x.shape[axis:])])


@onnx_op("Expand", since=8)
def _expand(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    if not ctx.known(1):
        return ops.dynamic_broadcast(x, ctx.input(1))
    shape = tuple(int(d) for d in ctx.const(1, "shape"))
    return broadcast_to(x, numpy_broadcast_shape(x.shape, shape))


def _ints(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]
