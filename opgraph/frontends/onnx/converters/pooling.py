"""Pooling: AveragePool (dilated windows as depthwise convolutions), MaxPool (with the Indices
output in either storage order), LpPool, the global pools and MaxUnpool."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.errors import ConversionError
from opgraph.core.node import Output
from opgraph.core.shape import DimShape, static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import full, prod, typed_constant
from opgraph.frontends.onnx.registry import onnx_op

_AUTO_PAD = {
    "NOTSET": "explicit",
    "": "explicit",
    "SAME_UPPER": "same_upper",
    "SAME_LOWER": "same_lower",
    "VALID": "valid",
}


def _window(ctx: NodeContext, x: Output) -> dict[str, Any]:
    spatial = x.rank - 2
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    pads = ctx.attr("pads")
    pads = [int(p) for p in pads] if pads is not None else [0] * (2 * spatial)
    auto_pad = str(ctx.attr("auto_pad", "NOTSET"))
    if auto_pad not in _AUTO_PAD:
        raise ctx.fail(f"unknown auto_pad {auto_pad!r}")
    attributes: dict[str, Any] = {
        "window_shape": kernel,
        "strides": [int(s) for s in ctx.attr("strides", [1] * spatial)],
        "padding_below": pads[:spatial],
        "padding_above": pads[spatial:],
        "ceil_mode": bool(ctx.attr("ceil_mode", 0)),
        "auto_pad": _AUTO_PAD[auto_pad],
    }
    if _AUTO_PAD[auto_pad] != "explicit":  # ONNX ignores pads then
        del attributes["padding_below"], attributes["padding_above"]
    return attributes


def _clamp_overhanging(x: Output, window: dict[str, Any]) -> dict[str, Any]:
    """In ceil mode an undilated window larger than the padded data still gives one output,
    over all of it (``AvgPool2d(1280, ceil_mode=True)``, transformers' EfficientNet pooler):
    that window is the padded data itself, which the ops accept. Larger windows with more
    outputs stay as they are (the op rejects them)."""
    if not window["ceil_mode"] or window["auto_pad"] != "explicit":
        return window
    kernel = list(window["window_shape"])
    below, above, strides = window["padding_below"], window["padding_above"], window["strides"]
    for i, size in enumerate(x.shape[2:]):
        padded = size + below[i] + above[i]
        if kernel[i] > padded and _pooled_size(padded, kernel[i], strides[i], True) == 1:
            kernel[i] = padded
    return {**window, "window_shape": kernel}


def _average(ctx: NodeContext, x: Output, include_padding: bool, clamp: bool = False) -> Output:
    """AveragePool; ``clamp`` shrinks an overhanging ceil-mode window (LpPool scales the
    average by the kernel size, so it keeps the window as given)."""
    window = _window(ctx, x)
    dilations = [int(d) for d in ctx.attr("dilations", [1] * (x.rank - 2))]
    if any(d != 1 for d in dilations):
        return _dilated_average(x, window, dilations, include_padding)
    if clamp:
        window = _clamp_overhanging(x, window)
    return ops.avg_pool(x, include_padding=include_padding, **window)


def _dilated_average(
    x: Output, window: dict[str, Any], dilations: list[int], include_padding: bool
) -> Output:
    """Window sums as a depthwise convolution with ones, divided by the count of the taps
    that fall on data (or on data and explicit padding)."""
    if window["auto_pad"] != "explicit":
        raise ConversionError("AveragePool: dilated windows with auto_pad are not supported")
    below, above = list(window["padding_below"]), list(window["padding_above"])
    kernel, strides = window["window_shape"], window["strides"]
    extra = []
    for i, size in enumerate(x.shape[2:]):
        span = dilations[i] * (kernel[i] - 1) + 1
        padded = size + below[i] + above[i]
        count = _pooled_size(padded, span, strides[i], window["ceil_mode"])
        extra.append(max(0, (count - 1) * strides[i] + span - padded))
    channels = x.shape[1]
    ones = typed_constant(np.ones((channels, 1, *kernel)), x.element_type)
    conv = {"strides": strides, "dilations": dilations, "groups": channels}
    above_total = [a + e for a, e in zip(above, extra, strict=True)]
    sums = ops.convolution(x, ones, padding_below=below, padding_above=above_total, **conv)
    mask = full(1, x)
    if include_padding:
        mask = ops.pad(mask, [0, 0, *below], [0, 0, *above], value=full(1, x, ()))
        sums_of_mask = ops.convolution(
            mask, ones, padding_below=[0] * len(below), padding_above=extra, **conv
        )
    else:
        sums_of_mask = ops.convolution(
            mask, ones, padding_below=below, padding_above=above_total, **conv
        )
    return ops.divide(sums, sums_of_mask)


def _pooled_size(padded: int, span: int, stride: int, ceil_mode: bool) -> int:
    if ceil_mode:
        count = -(-(padded - span) // stride) + 1
        if (count - 1) * stride >= padded:  # the last window may not start in the padding
            count -= 1
        return count
    return (padded - span) // stride + 1


@onnx_op("AveragePool", since=1)
def _average_pool(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    return _average(ctx, x, bool(ctx.attr("count_include_pad", 0)), clamp=True)


@onnx_op("MaxPool", since=1)
def _max_pool(ctx: NodeContext) -> Any:
    x = ctx.input(0)
    window = _window(ctx, x)
    dilations = [int(d) for d in ctx.attr("dilations", [1] * (x.rank - 2))]
    wants_indices = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    if all(d == 1 for d in dilations):
        window = _clamp_overhanging(x, window)
    if not wants_indices:
        return [ops.max_pool(x, dilations=dilations, **window)]
    values, indices = ops.max_pool_with_indices(x, dilations=dilations, **window)
    if ctx.attr("storage_order", 0):
        indices = _column_major(indices, x.shape)
    return [values, indices]


def _column_major(indices: Output, shape: DimShape) -> Output:
    """Row-major flat indices of an (N, C, H, W) tensor as column-major within each plane."""
    what = "MaxPool's column-major indices (storage_order=1)"
    height, width = (static_dim(d, what) for d in shape[2:4])
    plane = height * width

    def scalar(v: int) -> Output:
        return full(v, indices)

    base = ops.multiply(ops.divide(indices, scalar(plane)), scalar(plane))
    inside = ops.subtract(indices, base)
    row, col = ops.divide(inside, scalar(width)), ops.mod(inside, scalar(width))
    return ops.add(base, ops.add(ops.multiply(col, scalar(height)), row))


@onnx_op("LpPool", since=1)
def _lp_pool(ctx: NodeContext) -> Output:
    """``(Σ_window |x|^p) ^ (1/p)`` with zero padding (the sum is the kernel size times the
    average that counts the padding)."""
    x = ctx.input(0)
    p = float(ctx.attr("p", 2))
    powered = ops.power(ops.abs(x), full(p, x))
    average = _average(ctx, powered, include_padding=True)
    size = prod([int(k) for k in ctx.attr("kernel_shape")])
    return ops.power(ops.multiply(average, full(size, average)), full(1.0 / p, average))


def _global(reducer: Any) -> Any:
    def convert(ctx: NodeContext) -> Output:
        x = ctx.input(0)
        result: Output = reducer(x, list(range(2, x.rank)), keep_dims=True)
        return result

    return convert


onnx_op("GlobalAveragePool", since=1)(_global(ops.reduce_mean))
onnx_op("GlobalMaxPool", since=1)(_global(ops.reduce_max))


@onnx_op("GlobalLpPool", since=2)
def _global_lp_pool(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    p = float(ctx.attr("p", 2))
    axes = list(range(2, x.rank))
    total = ops.reduce_sum(ops.power(ops.abs(x), full(p, x)), axes, keep_dims=True)
    return ops.power(total, full(1.0 / p, total))


@onnx_op("MaxUnpool", since=9)
def _max_unpool(ctx: NodeContext) -> Output:
    """Scatter the values to their flat indices in a zero tensor of the unpooled shape."""
    x, indices = ctx.input(0), ctx.input(1)
    spatial = x.rank - 2
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    strides = [int(s) for s in ctx.attr("strides", [1] * spatial)]
    pads = [int(p) for p in ctx.attr("pads", [0] * (2 * spatial))]
    inferred = [
        (x.shape[2 + i] - 1) * strides[i] - pads[i] - pads[spatial + i] + kernel[i]
        for i in range(spatial)
    ]
    full_shape: list[Dim] = [x.shape[0], x.shape[1], *inferred]
    zeros = full(0, x, [prod(full_shape)])
    flat_indices = ops.reshape(ops.convert(indices, et.i64), [prod(indices.shape)])
    flat_values = ops.reshape(x, [prod(x.shape)])
    y = ops.reshape(ops.scatter_elements(zeros, flat_indices, flat_values), full_shape)
    if ctx.optional(2) is None:
        return y
    wanted = [int(d) for d in ctx.const(2, "output_shape").reshape(-1)]
    extra = [w - d for w, d in zip(wanted, full_shape, strict=True)]
    return ops.pad(y, [0] * len(extra), extra, value=full(0, x, ()))
