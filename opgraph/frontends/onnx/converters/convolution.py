"""Convolutions: Conv, ConvTranspose (explicit pads computed from ``output_shape`` and
``auto_pad`` as the ONNX reference does), ConvInteger and QLinearConv (exact integer sums
through f64), and Col2Im (a transposed convolution with one-hot filters)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import expand_to, prod, typed_constant
from opgraph.frontends.onnx.converters.quantization import requantize, widen
from opgraph.frontends.onnx.registry import onnx_op

_AUTO_PAD = {
    "NOTSET": "explicit",
    "": "explicit",
    "SAME_UPPER": "same_upper",
    "SAME_LOWER": "same_lower",
    "VALID": "valid",
}


def conv_attributes(ctx: NodeContext, spatial: int) -> dict[str, Any]:
    """The keyword arguments of ``ops.convolution`` for a Conv-like node."""
    auto_pad = str(ctx.attr("auto_pad", "NOTSET"))
    if auto_pad not in _AUTO_PAD:
        raise ctx.fail(f"unknown auto_pad {auto_pad!r}")
    pads = ctx.attr("pads")
    pads = [int(p) for p in pads] if pads is not None else [0] * (2 * spatial)
    attributes: dict[str, Any] = {
        "strides": [int(s) for s in ctx.attr("strides", [1] * spatial)],
        "dilations": [int(d) for d in ctx.attr("dilations", [1] * spatial)],
        "padding_below": pads[:spatial],
        "padding_above": pads[spatial:],
        "groups": int(ctx.attr("group", 1)),
        "auto_pad": _AUTO_PAD[auto_pad],
    }
    if _AUTO_PAD[auto_pad] != "explicit":  # ONNX ignores pads then
        del attributes["padding_below"], attributes["padding_above"]
    return attributes


def add_channel_bias(y: Output, bias: Output | None) -> Output:
    """``y`` plus a per-channel (axis 1) bias."""
    if bias is None:
        return y
    return ops.add(y, expand_to(bias, y.rank, [1], y.shape))


@onnx_op("Conv", since=1)
def _conv(ctx: NodeContext) -> Output:
    x, w = ctx.input(0), ctx.input(1)
    y = ops.convolution(x, w, **conv_attributes(ctx, x.rank - 2))
    return add_channel_bias(y, ctx.optional(2))


@onnx_op("ConvInteger", since=10)
def _conv_integer(ctx: NodeContext) -> Output:
    """Integer convolution, exact in f64 (zero points subtracted before zero padding)."""
    x = _centered(ctx.input(0), ctx.optional(2), None)
    w = _centered(ctx.input(1), ctx.optional(3), 0)
    y = ops.convolution(x, w, **conv_attributes(ctx, x.rank - 2))
    return ops.convert(y, et.i32)


def _centered(x: Output, zero_point: Output | None, axis: int | None) -> Output:
    """``x - zero_point`` as f64 (per-channel zero points run along ``axis``)."""
    value = widen(x, et.f64)
    if zero_point is None:
        return value
    point = widen(zero_point, et.f64)
    if point.rank == 1 and point.shape[0] > 1 and axis is not None:
        point = expand_to(point, x.rank, [axis], x.shape)
    else:
        point = expand_to(ops.reshape(point, []), x.rank, [], x.shape)
    return ops.subtract(value, point)


@onnx_op("QLinearConv", since=10)
def _qlinear_conv(ctx: NodeContext) -> Output:
    x = _centered(ctx.input(0), ctx.input(2), None)
    w = _centered(ctx.input(3), ctx.optional(5), 0)
    y = ops.convolution(x, w, **conv_attributes(ctx, x.rank - 2))
    bias = ctx.optional(8)
    y = add_channel_bias(y, None if bias is None else widen(bias, et.f64))
    scale = ops.divide(
        ops.multiply(_channel_scale(ctx.input(1), y), _channel_scale(ctx.input(4), y)),
        _channel_scale(ctx.input(6), y),
    )
    zero_point = ctx.optional(7)
    target = zero_point.element_type if zero_point is not None else ctx.input(0).element_type
    return requantize(ops.multiply(y, scale), zero_point, target)


def _channel_scale(scale: Output, like: Output) -> Output:
    value = widen(scale, et.f64)
    if value.rank == 1 and value.shape[0] > 1:
        return expand_to(value, like.rank, [1], like.shape)
    return expand_to(ops.reshape(value, []), like.rank, [], like.shape)


@onnx_op("ConvTranspose", since=1)
def _conv_transpose(ctx: NodeContext) -> Output:
    x, w = ctx.input(0), ctx.input(1)
    spatial = x.rank - 2
    strides = [int(s) for s in ctx.attr("strides", [1] * spatial)]
    dilations = [int(d) for d in ctx.attr("dilations", [1] * spatial)]
    output_padding = [int(p) for p in ctx.attr("output_padding", [0] * spatial)]
    kernel = list(w.shape[2:])
    output_shape = ctx.attr("output_shape")
    if output_shape is not None:
        output_shape = [int(s) for s in output_shape][-spatial:]
    pads = ctx.attr("pads")
    auto_pad = str(ctx.attr("auto_pad", "NOTSET"))
    if pads is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = output_shape or [x.shape[2 + i] * strides[i] for i in range(spatial)]
        total = [
            strides[i] * (x.shape[2 + i] - 1)
            + output_padding[i]
            + (kernel[i] - 1) * dilations[i]
            + 1
            - target[i]
            for i in range(spatial)
        ]
        upper = auto_pad == "SAME_UPPER"
        below = [t // 2 if upper else t - t // 2 for t in total]
        above = [t - b for t, b in zip(total, below, strict=True)]
        output_shape = target
    else:
        flat = [int(p) for p in pads] if pads is not None else [0] * (2 * spatial)
        below, above = flat[:spatial], flat[spatial:]
    y = ops.convolution_backprop_data(
        x,
        w,
        output_shape=output_shape,
        strides=strides,
        dilations=dilations,
        padding_below=below,
        padding_above=above,
        output_padding=None if output_shape is not None else output_padding,
        groups=int(ctx.attr("group", 1)),
    )
    return add_channel_bias(y, ctx.optional(2))


@onnx_op("Col2Im", since=18)
def _col2im(ctx: NodeContext) -> Output:
    """Sum column blocks back into an image: a grouped transposed convolution whose filters
    are one-hot over the block (exact: each output adds the inputs that land on it)."""
    x = ctx.input(0)
    image = [int(v) for v in ctx.const(1, "image_shape").reshape(-1)]
    block = [int(v) for v in ctx.const(2, "block_shape").reshape(-1)]
    spatial = len(image)
    dilations = [int(d) for d in ctx.attr("dilations", [1] * spatial)]
    strides = [int(s) for s in ctx.attr("strides", [1] * spatial)]
    pads = [int(p) for p in ctx.attr("pads", [0] * (2 * spatial))]
    counts = [
        (image[i] + pads[i] + pads[i + spatial] - (dilations[i] * (block[i] - 1) + 1)) // strides[i]
        + 1
        for i in range(spatial)
    ]
    batch, columns = x.shape[0], x.shape[1]
    size = prod(block)
    channels = columns // size
    data = ops.reshape(x, [batch, columns, *counts])
    filters = np.zeros((columns, 1, *block))
    for c in range(channels):
        for k in range(size):
            position = tuple(int(i) for i in np.unravel_index(k, block))
            filters[(c * size + k, 0, *position)] = 1.0
    return ops.convolution_backprop_data(
        data,
        typed_constant(filters, x.element_type),
        output_shape=image,
        strides=strides,
        dilations=dilations,
        padding_below=pads[:spatial],
        padding_above=pads[spatial:],
        groups=static_dim(channels, "Col2Im's groups (one per channel)"),
    )
