"""Quantization: QuantizeLinear and DequantizeLinear (per tensor, per axis from opset 13,
blocked from opset 21), MatMulInteger and QLinearMatMul (exact integer sums through f64).

Per-tensor and per-axis cases map to the catalogue's ops (so that the CPU backend's
``fuse_quantized_products`` sees the QDQ structure); blocked scales, and types those ops
do not take, are composed from core ops exactly as the ONNX reference computes them.
"""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.errors import ConversionError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import axis_of, expand_to
from opgraph.frontends.onnx.registry import onnx_op
from opgraph.frontends.onnx.types import from_onnx

_CATALOGUE_TYPES = (et.u8, et.i8, et.u16, et.i16)
_DEQUANTIZABLE = (*_CATALOGUE_TYPES, et.i32)


def widen(x: Output, element_type: ElementType) -> Output:
    """``x`` converted to ``element_type`` unless it already is."""
    return x if x.element_type is element_type else ops.convert(x, element_type)


def requantize(value: Output, zero_point: Output | None, target: ElementType) -> Output:
    """``saturate(round_half_even(value) + zero_point)`` as ``target`` (``value`` is float)."""
    rounded = ops.round(value)
    if zero_point is not None:
        point = widen(zero_point, value.element_type)
        rounded = ops.add(rounded, _spread(point, value, None, None))
    info = np.iinfo(target.dtype)
    return ops.convert(ops.clamp(rounded, float(info.min), float(info.max)), target)


def _spread(value: Output, like: Output, axis: int | None, block: int | None) -> Output:
    """A scale or zero point made elementwise for ``like`` (scalar, per axis or blocked)."""
    if value.shape == like.shape:
        return value
    if value.rank == 0 or value.tensor_type.size == 1:
        scalar = ops.reshape(value, [])
        return expand_to(scalar, like.rank, [], like.shape) if like.rank else scalar
    if axis is None:
        raise ConversionError(f"a scale or zero point of shape {list(value.shape)} needs an axis")
    if block:
        what = "the gather positions of a blocked scale"
        length, count = static_dim(like.shape[axis], what), static_dim(value.shape[axis], what)
        positions = np.minimum(np.arange(length) // block, count - 1)
        return ops.gather(value, constant(positions.astype(np.int64)), axis=axis)
    return expand_to(value, like.rank, [axis], like.shape)


def _target_type(ctx: NodeContext, zero_point: Output | None, attr: str) -> ElementType:
    if zero_point is not None:
        return zero_point.element_type
    code = ctx.attr(attr)
    return et.u8 if not code else from_onnx(int(code), ctx.where)


@onnx_op("QuantizeLinear", since=10)
def _quantize(ctx: NodeContext) -> Output:
    x, scale, zero_point = ctx.input(0), ctx.input(1), ctx.optional(2)
    axis = axis_of(int(ctx.attr("axis", 1)), x.rank) if x.rank else None
    block = int(ctx.attr("block_size", 0))
    target = _target_type(ctx, zero_point, "output_dtype")
    if not block and scale.rank <= 1 and target in _CATALOGUE_TYPES:
        per_axis = scale.rank == 1 and scale.shape[0] != 1
        scale_value = scale if per_axis else ops.reshape(scale, [])
        point = None
        if zero_point is not None:
            point = zero_point if per_axis else ops.reshape(zero_point, [])
        return ops.quantize_linear(
            x, scale_value, point, axis=axis if per_axis else None, element_type=target
        )
    quotient = ops.divide(x, _spread(widen(scale, x.element_type), x, axis, block))
    point = None if zero_point is None else _spread(zero_point, x, axis, block)
    return requantize(quotient, point, target)


@onnx_op("DequantizeLinear", since=10)
def _dequantize(ctx: NodeContext) -> Output:
    x, scale, zero_point = ctx.input(0), ctx.input(1), ctx.optional(2)
    axis = axis_of(int(ctx.attr("axis", 1)), x.rank) if x.rank else None
    block = int(ctx.attr("block_size", 0))
    code = ctx.attr("output_dtype")
    target = scale.element_type if not code else from_onnx(int(code), ctx.where)
    if not block and scale.rank <= 1 and x.element_type in _DEQUANTIZABLE:
        per_axis = scale.rank == 1 and scale.shape[0] != 1
        scale_value = scale if per_axis else ops.reshape(scale, [])
        point = None
        if zero_point is not None:
            point = zero_point if per_axis else ops.reshape(zero_point, [])
        value = ops.dequantize_linear(x, scale_value, point, axis=axis if per_axis else None)
        return widen(value, target)
    centered = widen(x, et.f32)
    if zero_point is not None:
        centered = ops.subtract(centered, _spread(widen(zero_point, et.f32), x, axis, block))
    product = ops.multiply(widen(centered, scale.element_type), _spread(scale, x, axis, block))
    return widen(product, target)


@onnx_op("MatMulInteger", since=10)
def _matmul_integer(ctx: NodeContext) -> Output:
    a = _minus_point(ctx.input(0), ctx.optional(2), row_axis=True)
    b = _minus_point(ctx.input(1), ctx.optional(3), row_axis=False)
    return ops.convert(ops.matmul(a, b), et.i32)


def _minus_point(x: Output, zero_point: Output | None, row_axis: bool) -> Output:
    """``x - zero_point`` in f64; a 1-D zero point runs along A's rows or B's columns."""
    value = widen(x, et.f64)
    if zero_point is None:
        return value
    point = widen(zero_point, et.f64)
    if point.tensor_type.size == 1:
        return ops.subtract(value, _scalar(point, value))
    axis = x.rank - 2 if row_axis else x.rank - 1
    return ops.subtract(value, expand_to(ops.reshape(point, [-1]), x.rank, [axis], x.shape))


def _scalar(value: Output, like: Output) -> Output:
    return expand_to(ops.reshape(value, []), like.rank, [], like.shape)


@onnx_op("QLinearMatMul", since=10)
def _qlinear_matmul(ctx: NodeContext) -> Output:
    a = _minus_point(ctx.input(0), ctx.optional(2), row_axis=True)
    b = _minus_point(ctx.input(3), ctx.optional(5), row_axis=False)
    product = ops.matmul(a, b)
    scales = [widen(ctx.input(i), et.f64) for i in (1, 4, 6)]
    factor = ops.divide(ops.multiply(scales[0], scales[1]), scales[2])
    zero_point = ctx.optional(7)
    target = zero_point.element_type if zero_point is not None else ctx.input(0).element_type
    scaled = ops.multiply(product, _spread(factor, product, None, None))
    return requantize(scaled, zero_point, target)
