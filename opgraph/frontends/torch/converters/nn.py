"""Neural-network ATen overloads: convolution, pooling, normalization, softmax, resizing.

Per-axis arguments that ATen lets be one value (``padding=0``) are repeated for every spatial
axis; an empty ``stride`` means the kernel size. Normalization statistics outputs (mean,
rstd) are only built when a ``getitem`` reads them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from opgraph import ops
from opgraph.core.dim import Dim
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.torch.context import NodeContext, coerce, fill
from opgraph.frontends.torch.converters.common import (
    broadcast_like,
    dim_of,
    overloads,
)
from opgraph.frontends.torch.converters.shape import reshape
from opgraph.frontends.torch.registry import aten_op
from opgraph.frontends.torch.types import from_torch


def per_axis(ctx: NodeContext, name: str, k: int, default: int | None = None) -> list[int]:
    """Argument ``name`` repeated to ``k`` spatial axes (``default`` when empty)."""
    values = ctx.ints(name)
    if not values:
        if default is None:
            raise ctx.fail(f"argument {name!r} is empty")
        values = [default]
    return values * k if len(values) == 1 else values


def _channel_vector(value: Output, x: Output) -> Output:
    """A per-channel ``[C]`` vector broadcast over ``x: [N, C, ...]``."""
    return ops.broadcast(value, x.shape, tuple(a for a in range(x.rank) if a != 1))


# -------------------------------------------------------------------------- convolution
@aten_op(*overloads("convolution.default"))
def _convolution(ctx: NodeContext) -> Output:
    x, weight, bias = ctx.tensor("input"), ctx.tensor("weight"), ctx.optional_tensor("bias")
    k = x.rank - 2
    strides, padding = per_axis(ctx, "stride", k), per_axis(ctx, "padding", k)
    dilations, groups = per_axis(ctx, "dilation", k), ctx.integer("groups")
    if ctx["transposed"]:
        output_padding = per_axis(ctx, "output_padding", k, default=0)
        y = ops.convolution_backprop_data(
            x, weight, None, strides, dilations, padding, padding, output_padding, groups
        )
    else:
        y = ops.convolution(x, weight, strides, dilations, padding, padding, groups=groups)
    return y if bias is None else ops.add(y, _channel_vector(bias, y))


# ------------------------------------------------------------------------------ pooling
def _batched(x: Output, k: int) -> tuple[Output, bool]:
    """``x`` with a batch axis (torch pools accept unbatched ``(C, d...)`` input)."""
    if x.rank == k + 1:
        return reshape(x, [1, *x.shape]), True
    return x, False


def _pool_args(ctx: NodeContext, x: Output, k: int) -> dict[str, list[int]]:
    kernel = per_axis(ctx, "kernel_size", k)
    strides = ctx.ints("stride") or kernel
    strides = strides * k if len(strides) == 1 else strides
    padding = per_axis(ctx, "padding", k, default=0)
    return {"window_shape": kernel, "strides": strides, "padding": padding}


@aten_op(
    *overloads(
        "max_pool2d_with_indices.default",
        "max_pool3d_with_indices.default",
        "max_pool1d_with_indices.default",
    )
)
def _max_pool_with_indices(ctx: NodeContext) -> tuple[Output | None, Output | None]:
    x = ctx.tensor("self")
    k = _spatial(ctx, x)
    x, unbatched = _batched(x, k)
    args = _pool_args(ctx, x, k)
    window, strides, padding = args["window_shape"], args["strides"], args["padding"]
    dilations = per_axis(ctx, "dilation", k, default=1)
    ceil_mode = bool(ctx["ceil_mode"])
    if 1 not in ctx.used_outputs():
        values = ops.max_pool(x, window, strides, padding, padding, dilations, ceil_mode)
        return (reshape(values, values.shape[1:]) if unbatched else values), None
    values, flat = ops.max_pool_with_indices(
        x, window, strides, padding, padding, dilations, ceil_mode
    )
    plane = math.prod(x.shape[2:])  # torch counts within one (n, c) plane
    indices = ops.mod(flat, fill(plane, flat.element_type, flat.shape))
    if unbatched:
        values, indices = reshape(values, values.shape[1:]), reshape(indices, indices.shape[1:])
    return values, indices


@aten_op(*overloads("max_pool1d.default", "max_pool2d.default", "max_pool3d.default"))
def _max_pool(ctx: NodeContext) -> Output:
    x = ctx.tensor("self")
    k = _spatial(ctx, x)
    x, unbatched = _batched(x, k)
    args = _pool_args(ctx, x, k)
    y = ops.max_pool(
        x,
        args["window_shape"],
        args["strides"],
        args["padding"],
        args["padding"],
        per_axis(ctx, "dilation", k, default=1),
        bool(ctx["ceil_mode"]),
    )
    return reshape(y, y.shape[1:]) if unbatched else y


def _spatial(ctx: NodeContext, x: Output) -> int:
    """The number of spatial axes of a pooling node, from the overload name's ``Nd``."""
    name = str(ctx.node.target)
    for k in (1, 2, 3):
        if f"{k}d" in name:
            return k
    return x.rank - 2


@aten_op(*overloads("avg_pool1d.default", "avg_pool2d.default", "avg_pool3d.default"))
def _avg_pool(ctx: NodeContext) -> Output:
    if ctx.args.get("divisor_override") is not None:
        raise ctx.fail("avg_pool divisor_override is not supported")
    x = ctx.tensor("self")
    k = _spatial(ctx, x)
    x, unbatched = _batched(x, k)
    args = _pool_args(ctx, x, k)
    y = ops.avg_pool(
        x,
        args["window_shape"],
        args["strides"],
        args["padding"],
        args["padding"],
        include_padding=bool(ctx["count_include_pad"]),
        ceil_mode=bool(ctx["ceil_mode"]),
    )
    return reshape(y, y.shape[1:]) if unbatched else y


def _adaptive_matrix(extent: int, out: int, dtype: np.dtype) -> np.ndarray:
    """``[extent, out]`` averaging weights of adaptive pooling along one axis: output ``i``
    averages ``[floor(i·extent/out), ceil((i+1)·extent/out))``."""
    matrix = np.zeros((extent, out), dtype=np.float64)
    for i in range(out):
        start, stop = (i * extent) // out, -(-((i + 1) * extent) // out)
        matrix[start:stop, i] = 1.0 / (stop - start)
    return matrix.astype(dtype)


@aten_op(
    *overloads(
        "_adaptive_avg_pool2d.default",
        "adaptive_avg_pool2d.default",
        "_adaptive_avg_pool3d.default",
        "adaptive_avg_pool1d.default",
    )
)
def _adaptive_avg_pool(ctx: NodeContext) -> Output:
    """Separable: one contraction with a constant averaging matrix per spatial axis."""
    x = ctx.tensor("self")
    sizes = ctx.ints("output_size")
    k = len(sizes)
    for i, out in enumerate(sizes):
        axis = x.rank - k + i
        if out == x.shape[axis]:
            continue
        if out == 1:
            x = ops.reduce_mean(x, (axis,), keep_dims=True)
            continue
        moved = _move_last(x, axis)
        extent = static_dim(x.shape[axis], "adaptive pooling's averaging matrix")
        weights = constant(_adaptive_matrix(extent, out, x.element_type.dtype))
        x = _move_back(ops.dot(moved, weights), axis)
    return x


def _move_last(x: Output, axis: int) -> Output:
    perm = [a for a in range(x.rank) if a != axis] + [axis]
    return x if axis == x.rank - 1 else ops.transpose(x, perm)


def _move_back(x: Output, axis: int) -> Output:
    last = x.rank - 1
    if axis == last:
        return x
    perm = [*range(axis), last, *range(axis, last)]
    return ops.transpose(x, perm)


# ------------------------------------------------------------------------ normalization
def _affine_params(
    x: Output, weight: Output | None, bias: Output | None, shape: Sequence[Dim]
) -> tuple[Output, Output]:
    scale = weight if weight is not None else fill(1, x.element_type, shape)
    shift = bias if bias is not None else fill(0, x.element_type, shape)
    return scale, shift


def _empty_stats(ctx: NodeContext) -> tuple[Output, Output]:
    return (
        fill(0, ctx.out_element_type(1), ctx.out_shape(1)),
        fill(0, ctx.out_element_type(2), ctx.out_shape(2)),
    )


@aten_op(*overloads("_native_batch_norm_legit_no_training.default"))
def _batch_norm_inference(ctx: NodeContext) -> tuple[Output, Output, Output]:
    return _batch_norm(ctx, "running_mean", "running_var")


@aten_op(*overloads("native_batch_norm.default", "_native_batch_norm_legit.default"))
def _native_batch_norm(ctx: NodeContext) -> tuple[Output, Output, Output]:
    if ctx["training"]:
        raise ctx.fail("training-mode batch norm updates running statistics (unsupported)")
    return _batch_norm(ctx, "running_mean", "running_var")


def _batch_norm(ctx: NodeContext, mean_name: str, var_name: str) -> tuple[Output, Output, Output]:
    x = ctx.tensor("input")
    channels = [x.shape[1]]
    scale, shift = _affine_params(
        x, ctx.optional_tensor("weight"), ctx.optional_tensor("bias"), channels
    )
    mean, var = ctx.tensor(mean_name), ctx.tensor(var_name)
    y = ops.batch_norm_inference(x, scale, shift, mean, var, epsilon=float(ctx["eps"]))
    return (y, *_empty_stats(ctx))


@aten_op(*overloads("_native_batch_norm_legit_functional.default"))
def _batch_norm_functional(ctx: NodeContext) -> tuple[Output, ...]:
    """Batch norm with batch statistics; returns (y, mean, rstd, new running mean, new
    running variance), the running variance updated with the unbiased batch variance."""
    if not ctx["training"]:
        y, *_ = _batch_norm(ctx, "running_mean", "running_var")
        return y, *_empty_stats(ctx), ctx.tensor("running_mean"), ctx.tensor("running_var")
    x, eps, momentum = ctx.tensor("input"), float(ctx["eps"]), float(ctx["momentum"])
    scale, shift = _affine_params(
        x, ctx.optional_tensor("weight"), ctx.optional_tensor("bias"), [x.shape[1]]
    )
    y, mean, var, rstd = _batch_statistics_norm(x, scale, shift, eps)
    shape = x.static_shape("batch norm's unbiased running variance")
    count = math.prod(shape) // shape[1] if shape[1] else 0
    unbiased = ops.multiply(var, fill(count / max(count - 1, 1), var.element_type, var.shape))

    def update(running: Output, batch: Output) -> Output:
        kept = ops.multiply(running, fill(1 - momentum, running.element_type, running.shape))
        return ops.add(kept, ops.multiply(batch, fill(momentum, batch.element_type, batch.shape)))

    new_mean = update(ctx.tensor("running_mean"), mean)
    new_var = update(ctx.tensor("running_var"), unbiased)
    return y, mean, rstd, new_mean, new_var


def _batch_statistics_norm(
    x: Output, scale: Output, shift: Output, eps: float
) -> tuple[Output, Output, Output, Output]:
    """Batch norm with batch statistics in plain ops (reductions and elementwise ops, which
    the backends fuse; ``BatchNormTraining`` would run its reference kernel on CPU): the
    result, the batch mean, the biased batch variance and the reciprocal standard deviation,
    the last three per channel."""
    axes = (0, *range(2, x.rank))
    mean, rstd = _statistics(x, axes, eps)
    centered = ops.subtract(x, broadcast_like(mean, x.shape))
    per_channel = [1, x.shape[1], *([1] * (x.rank - 2))]
    factor = ops.multiply(rstd, reshape(scale, per_channel))
    y = ops.add(
        ops.multiply(centered, broadcast_like(factor, x.shape)),
        broadcast_like(reshape(shift, per_channel), x.shape),
    )
    # the same nodes as _statistics' variance: one reduction after common subexpressions
    var = ops.reduce_mean(ops.multiply(centered, centered), axes, keep_dims=True)
    channels = [x.shape[1]]
    return y, reshape(mean, channels), reshape(var, channels), reshape(rstd, channels)


def _statistics(x: Output, axes: tuple[int, ...], eps: float) -> tuple[Output, Output]:
    """Mean and reciprocal standard deviation (biased variance) over ``axes``, kept."""
    mean = ops.reduce_mean(x, axes, keep_dims=True)
    centered = ops.subtract(x, broadcast_like(mean, x.shape))
    var = ops.reduce_mean(ops.multiply(centered, centered), axes, keep_dims=True)
    rstd = ops.divide(
        fill(1, x.element_type, var.shape),
        ops.sqrt(ops.add(var, fill(eps, var.element_type, var.shape))),
    )
    return mean, rstd


@aten_op(*overloads("native_layer_norm.default"))
def _layer_norm(ctx: NodeContext) -> tuple[Output, Output | None, Output | None]:
    x, normalized = ctx.tensor("input"), ctx.ints("normalized_shape")
    axis, eps = x.rank - len(normalized), float(ctx["eps"])
    weight, bias = ctx.optional_tensor("weight"), ctx.optional_tensor("bias")
    y = ops.layer_norm(x, weight, bias, axis=axis, epsilon=eps)
    if not ({1, 2} & ctx.used_outputs()):
        return y, None, None
    mean, rstd = _statistics(x, tuple(range(axis, x.rank)), eps)
    return y, mean, rstd


@aten_op(*overloads("native_group_norm.default"))
def _group_norm(ctx: NodeContext) -> tuple[Output, Output | None, Output | None]:
    x, groups, eps = ctx.tensor("input"), ctx.integer("group"), float(ctx["eps"])
    scale, shift = _affine_params(
        x, ctx.optional_tensor("weight"), ctx.optional_tensor("bias"), [x.shape[1]]
    )
    y = ops.group_norm(x, scale, shift, groups, eps)
    if not ({1, 2} & ctx.used_outputs()):
        return y, None, None
    batch = x.shape[0]
    per_group = x.tensor_type.size // (batch * groups) if batch * groups else 0
    grouped = reshape(x, [batch, groups, per_group])
    mean, rstd = _statistics(grouped, (2,), eps)
    return y, reshape(mean, mean.shape[:2]), reshape(rstd, rstd.shape[:2])


# -------------------------------------------------------------------------------- softmax
def _softmax_input(ctx: NodeContext) -> tuple[Output, int]:
    x = ctx.tensor("self")
    dtype = ctx.args.get("dtype")
    if dtype is not None:
        x = coerce(x, from_torch(dtype, ctx.where))
    elif ctx.args.get("half_to_float"):
        x = coerce(x, from_torch(ctx.out_meta().dtype, ctx.where))
    return x, dim_of(ctx.integer("dim"), x.rank)


@aten_op(*overloads("_softmax.default", "softmax.int"))
def _softmax(ctx: NodeContext) -> Output:
    x, axis = _softmax_input(ctx)
    if x.rank == 0:
        return fill(1, x.element_type, ())
    return ops.softmax(x, axis)


@aten_op(*overloads("_log_softmax.default", "log_softmax.int"))
def _log_softmax(ctx: NodeContext) -> Output:
    x, axis = _softmax_input(ctx)
    if x.rank == 0:
        return fill(0, x.element_type, ())
    return ops.log_softmax(x, axis)


# ------------------------------------------------------------------------------ resizing
@aten_op(*overloads("upsample_nearest2d.vec", "upsample_nearest1d.vec", "upsample_nearest3d.vec"))
def _upsample_nearest(ctx: NodeContext) -> Output:
    """torch ``nearest``: source index ``floor(dst · in / out)`` (ONNX asymmetric + floor)."""
    x = ctx.tensor("input")
    factors = ctx["scale_factors"]
    scales = None if factors is None else [1.0, 1.0, *[float(f) for f in factors]]
    return ops.resize(x, list(ctx.out_shape()), scales, "nearest", "asymmetric", "floor")


@aten_op(*overloads("upsample_bilinear2d.vec", "upsample_linear1d.vec", "upsample_trilinear3d.vec"))
def _upsample_linear(ctx: NodeContext) -> Output:
    x = ctx.tensor("input")
    factors = ctx["scale_factors"]
    scales = None if factors is None else [1.0, 1.0, *[float(f) for f in factors]]
    mode = "align_corners" if ctx["align_corners"] else "pytorch_half_pixel"
    return ops.resize(x, list(ctx.out_shape()), scales, "linear", mode)
