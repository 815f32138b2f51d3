"""A convolution's gradients as native steps (:mod:`opgraph.backends.fused.conv_backprop`):
``ConvolutionBackpropData`` (transposed convolution) and ``ConvolutionBackpropFilters``, 2-D
and 1-D (as 2-D of height 1), f32 and f64. Other shapes (3-D, data dilation, other element
types) run their reference kernels.

The work is shared out so that every thread gets units (at least two per thread when the
shapes allow) and each unit's patch or column block stays about ``PATCH_BYTES``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opgraph.backends.fused import views
from opgraph.backends.fused.conv_backprop import ConvDataGradientStep, ConvFilterGradientStep
from opgraph.backends.fused.lowering.convolution import PATCH_BYTES, WIDE_BELOW, _as_2d, _pair
from opgraph.backends.fused.lowering.registry import STEP_OPS
from opgraph.backends.fused.lowering.winograd_filter_gradient import (
    lower_winograd_filter_gradient,
)
from opgraph.backends.fused.views import View
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.node import Node
from opgraph.ops.convolution import ConvolutionBackpropData, ConvolutionBackpropFilters

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Pixels (columns of the GEMMs) a chunk of images aims for when each image's output plane is
#: smaller than ``WIDE_BELOW``: the GEMMs' inner (filter gradient) or column (data gradient)
#: dimension, which is too thin for BLAS one small image at a time.
CHUNK_COLUMNS = 2048

#: Output channels per group up to which a filter gradient accumulates ``dWᵀ`` (patch rows by
#: channels) and transposes it at the end: OpenBLAS's sgemm measured 0.79x the time of the
#: ``dW`` order at 64 channels (K 576, 1024 pixels per image) and 0.87x at 128 (K 1152, 256
#: pixels), the same from 256 on (one thread).
TRANSPOSED_CHANNELS = 128


def _native(node: Node, rank: int, t: ElementType) -> bool:
    op = node.op
    dilated = any(d != 1 for d in getattr(op, "data_dilations", None) or ())
    return rank in (3, 4) and t in (et.f32, et.f64) and not dilated


def _rows_contiguous(ct: View) -> bool:
    """Pixels of each (image, channel) one row, channels at least a row apart (BLAS's
    leading dimension)."""
    _, _, oh, ow = ct.shape
    return ct.strides[3] == 1 and (oh == 1 or ct.strides[2] == ow) and ct.strides[1] >= oh * ow


def _cotangent(builder: ProgramBuilder, ct: View) -> tuple[View, int]:
    """The cotangent as the steps read it, and the images per chunk: in place (rows of
    pixels contiguous) for large output planes, else a transposed ``(O, N, OH, OW)`` copy
    viewed as ``(N, O, OH, OW)`` so that a chunk of images is one row of pixels."""
    n, o, oh, ow = views.static_all(ct.shape)  # no symbolic lowering: static Programs only
    pixels = oh * ow
    if pixels >= WIDE_BELOW or n == 1:
        return (ct if _rows_contiguous(ct) else builder.materialize(ct)), 1
    transposed = builder.scratch(ct.element_type, (o, n, oh, ow))
    source = views.permute(ct, (1, 0, 2, 3))
    builder.materialize(source, into=transposed)
    logical = View(
        transposed.buffer, ct.element_type, (n, o, oh, ow), (pixels, n * pixels, ow, 1),
        transposed.offset,
    )  # fmt: skip
    return logical, min(n, -(-CHUNK_COLUMNS // pixels))


def _block(rows: int, per_row: int, columns: int, itemsize: int, outer: int, threads: int) -> int:
    """Rows (of ``per_row`` patch rows each) per unit out of ``rows``: as many as fit
    ``PATCH_BYTES`` at ``columns`` columns, then fewer so that ``outer`` times the blocks give
    every thread two units."""
    fit = max(1, PATCH_BYTES // max(1, per_row * columns * itemsize))
    block = min(rows, fit)
    if outer * -(-rows // block) < 2 * threads:
        block = max(1, -(-rows // max(1, -(-2 * threads // outer))))
    return block


def _geometry(node: Node, kernel: tuple[int, ...]) -> dict[str, tuple[int, int]]:
    op = node.op
    assert isinstance(op, ConvolutionBackpropData | ConvolutionBackpropFilters)
    return {
        "kernel": (int(kernel[0]), int(kernel[1])),
        "strides": _pair(op.strides, 1),
        "dilations": _pair(op.dilations, 1),
        "padding": _pair(op.padding_below, 0),
    }


def _dense4(target: View, shape: tuple[int, ...]) -> View:
    shape4 = (shape[0], shape[1], 1 if len(shape) == 3 else shape[2], shape[-1])
    return View(target.buffer, target.element_type, shape4, views.row_major_strides(shape4),
                target.offset)  # fmt: skip


@STEP_OPS.register(ConvolutionBackpropData)
def _data_gradient(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, ConvolutionBackpropData)
    ct_value, w_value = node.inputs
    out = node.outputs[0]
    t = out.element_type
    if not _native(node, out.rank, t) or ct_value.tensor_type.size == 0:
        builder.fallback(node)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    w = _as_2d(builder.operand(w_value), builder, t)
    if not w.is_dense:
        w = builder.materialize(w)
    ct, chunk = _cotangent(builder, _as_2d(builder.operand(ct_value), builder, t))
    dense = _dense4(target, views.static_all(out.shape))  # static Programs only
    n, c = views.static_all(dense.shape[:2])
    kh, kw = views.static_all(w.shape[2:])
    pixels = views.static(ct.shape[2] * ct.shape[3])
    chunks = -(-n // chunk)
    cg = c // op.groups
    block = _block(cg, kh * kw, chunk * pixels, t.itemsize, chunks * op.groups, builder.threads)
    scratch = builder.scratch(t, (builder.threads, block * kh * kw * chunk * pixels))
    step = ConvDataGradientStep(
        builder.describe(node), (node,), ct, dense, groups=op.groups,
        data=views.static_all(dense.shape), chunk=chunk, block=block, scratch=scratch, w=w,
        **_geometry(node, (kh, kw)),
    )  # fmt: skip
    builder.add_step(step)


@STEP_OPS.register(ConvolutionBackpropFilters)
def _filter_gradient(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, ConvolutionBackpropFilters)
    x_value, ct_value = node.inputs
    out = node.outputs[0]
    t = out.element_type
    if not _native(node, out.rank, t):
        builder.fallback(node)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    if ct_value.tensor_type.size == 0:  # no pixels: the gradient is zero
        builder.materialize(views.Literal(0, t, out.shape), into=target)
        return
    if lower_winograd_filter_gradient(builder, node, target):
        return
    x = _as_2d(builder.operand(x_value), builder, t)
    ct, chunk = _cotangent(builder, _as_2d(builder.operand(ct_value), builder, t))
    kernel = (1, *op.filter_shape) if out.rank == 3 else op.filter_shape
    geometry = _geometry(node, kernel)
    channels = views.static(x.shape[1])  # no symbolic lowering: static Programs only
    rows = channels // op.groups * geometry["kernel"][0] * geometry["kernel"][1]
    columns = chunk * views.static(ct.shape[2] * ct.shape[3])
    block = _block(rows, 1, columns, t.itemsize, op.groups, builder.threads)
    per_group = views.static(out.shape[0]) // op.groups
    transposed = per_group <= TRANSPOSED_CHANNELS
    accumulator = block * per_group if transposed else 0
    scratch = builder.scratch(t, (builder.threads, block * columns + accumulator))
    dense = View(target.buffer, t, (out.shape[0], rows), (rows, 1), target.offset)
    step = ConvFilterGradientStep(
        builder.describe(node), (node,), ct, dense, groups=op.groups,
        data=views.static_all(x.shape), chunk=chunk, block=block, scratch=scratch, x=x,
        transposed=transposed, **geometry,
    )  # fmt: skip
    builder.add_step(step)
