"""Quantization in the fused compiler: QuantizeLinear and DequantizeLinear as pointwise code,
the integer products (MatMulInteger, ConvInteger) as 8-bit steps.

QuantizeLinear and DequantizeLinear are rewritten before fusion into elementwise ops that
fuse (a GEMM's epilogue then quantizes its result for the next layer), computing exactly what
the reference kernels compute: ``x / scale`` in f32 (f64 for f64 data), rounded half to even,
plus the zero point, NaN to the zero point, saturated by the conversion; ``(x - zero_point)``
in integers times ``scale`` in f32 when that is exact (8- and 16-bit data, f32 scales), else
in f64 like the reference.

The integer products become :class:`QGemmStep` (rows of activations times constant weights
repacked as 8-bit quads) and :class:`QConvStep` (constant filters times patches built as
quads), whose i32 results are exact. The zero points must be constants and the weights'
zero points zero (onnxruntime's quantizer writes symmetric weights), and ``a_zero_point``'s
contribution is folded into a constant per output row or column; anything else (and other
shapes) runs the reference kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from opgraph.backends.fused import views
from opgraph.backends.fused.lowering.convolution import _as_2d, _pair
from opgraph.backends.fused.lowering.registry import REWRITES, STEP_OPS
from opgraph.backends.fused.program import BufferKind, ConvStep, GemmStep
from opgraph.backends.fused.views import View
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.node import Node, Output
from opgraph.ops import conversion, elementwise, movement
from opgraph.ops.quantization import ConvInteger, DequantizeLinear, MatMulInteger, QuantizeLinear
from opgraph.pattern import constant_value

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Bytes of a quad (four consecutive inner-dimension elements: one ``vpdpbusd`` lane).
QUAD = 4
#: Columns of a panel of the 8-bit GEMM (two AVX-512 vectors of i32 accumulators).
PANEL = 32
#: Rows of the 8-bit micro-kernel tile (the convolutions' units of output channels are
#: multiples of it).
ROWS = 12
#: Bytes of one thread's patch block of a quantized convolution (about a quarter of L2).
PATCH_BYTES = 1 << 18
#: Output planes smaller than this share their patches between units of output channels.
SHARED_BELOW = 256


# ------------------------------------------------------------------ quantize / dequantize
def _spread(value: Output, like: Output, axis: int | None) -> Output:
    """A scalar or per-axis parameter broadcast to ``like``'s shape."""
    if like.rank == 0:
        return value
    kept = () if axis is None else (axis,)
    others = tuple(a for a in range(like.rank) if a not in kept)
    return movement.broadcast(value, like.shape, others)


def _widen(x: Output, t: ElementType) -> Output:
    return x if x.element_type is t else conversion.convert(x, t)


@REWRITES.register(QuantizeLinear)
def _quantize(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    op = node.op
    assert isinstance(op, QuantizeLinear)
    x, scale, zero = inputs
    wide = et.f64 if x.element_type is et.f64 else et.f32
    ratio = elementwise.divide(_widen(x, wide), _spread(_widen(scale, wide), x, op.axis))
    point = _spread(_widen(zero, wide), x, op.axis)
    shifted = elementwise.add(elementwise.round(ratio), point)
    value = elementwise.select(elementwise.is_nan(ratio), point, shifted)
    return [conversion.convert(value, zero.element_type)]  # saturates


@REWRITES.register(DequantizeLinear)
def _dequantize(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    op = node.op
    assert isinstance(op, DequantizeLinear)
    x, scale, zero = inputs
    t = scale.element_type
    narrow = x.element_type.itemsize <= 2 and t is et.f32  # f32 product exact: one rounding
    wide = et.i32 if x.element_type.itemsize <= 2 else et.i64
    shifted = elementwise.subtract(_widen(x, wide), _spread(_widen(zero, wide), x, op.axis))
    compute = et.f32 if narrow else et.f64
    product = elementwise.multiply(
        _widen(shifted, compute), _spread(_widen(scale, compute), x, op.axis)
    )
    return [_widen(product, t)]


# ------------------------------------------------------------------------ integer steps
@dataclass(eq=False)
class QGemmStep(GemmStep):
    """``out`` (i32, rows x cols) = ``a`` (u8 or i8 rows, inner contiguous) times the constant
    weights ``b`` repacked as s8 quad panels: per 32-column panel, ``ceil(K/4)`` rows of 32
    quads (128 bytes), zero-padded. ``offsets`` (i32, one per column, a constant) starts each
    sum: ``-a_zero · Σ_k b[k, n]`` (in the u8 domain of ``a``). ``flip``: ``a`` is i8, read
    as u8 by flipping its sign bit (``a + 128``)."""

    offsets: View | None = None
    flip: bool = False

    def reads(self) -> list[View]:
        assert self.offsets is not None
        return [*super().reads(), self.offsets]


@dataclass(eq=False)
class QConvStep(ConvStep):
    """A 2-D convolution of 8-bit data ``x`` with constant s8 filters ``w`` (``(O, K4·4)``,
    rows zero-padded to whole quads), by blocks of output rows: each block's patches are built
    as u8 quads (``(K/4, columns padded to 32, 4)``) in this thread's ``scratch``, padding
    reading ``x_zero``. ``offsets`` (i32 per output channel): ``-x_zero · Σ_k w[o, k]``.
    ``flip``: ``x`` is i8 (its sign bit flipped as it is copied). ``out`` is i32 (N, O, OH,
    OW), dense. ``shared`` (small output planes): the patches of each (image, group) are
    built once into its own slice of ``scratch``, then units of output channels share them
    (a unit per block of rows would waste most of each 32-column panel and stream the
    filters once per unit). ``batched`` (shared, planes that do not fill whole panels,
    several images): the images' patches lie side by side as the columns of one matrix per
    group (``n · OH · OW`` columns, padded once to a whole panel), so 4x4 planes fill the
    32-column panels; each unit multiplies into its thread's slice of ``scratch`` after the
    patches (``rows`` x the padded columns, i32) and copies the result out per image."""

    offsets: View | None = None
    flip: bool = False
    x_zero: int = 0
    shared: bool = False
    batched: bool = False
    #: Channel quads (every group's channels a multiple of 4, :func:`channel_quads`): the
    #: inner dimension is ordered (channel quad, filter row, filter column, channel in the
    #: quad), so a quad is four channels of one input pixel. Each unit first interleaves its
    #: input rows once into ``interleaved`` bytes of its thread's area of ``scratch`` (from
    #: ``interleaved_at``): per channel quad, rows of u32 quads with ``x_zero`` columns on
    #: either side; every patch row is then a copy of a run of it (no per-tap bounds).
    interleaved: int = 0
    interleaved_at: int = 0

    def reads(self) -> list[View]:
        assert self.offsets is not None
        return [*super().reads(), self.offsets]


def channel_quads(
    size: tuple[int, int],
    out: tuple[int, int],
    block: int,
    windows: tuple[tuple[int, int], ...],
    channels: int,
) -> tuple[int, int]:
    """(rows, columns) of one unit's interleaved input rows (``block`` output rows of a
    convolution of ``size`` (H, W) into ``out`` (OH, OW); ``windows``: kernel, strides,
    dilations, padding below), or (0, 0) when the group's ``channels`` are not whole quads."""
    (kh, kw), (sh, sw), (dh, dw), (_, pl) = windows
    if channels % QUAD or channels == 0:
        return 0, 0
    rows = (block - 1) * sh + (kh - 1) * dh + 1
    reach = (out[1] - 1) * sw - pl + (kw - 1) * dw + 1  # one past the last input column read
    return rows, pl + max(size[1], reach)


def _zero(value: Output) -> np.ndarray | None:
    return constant_value(value)


def _weights(w: Output, zero: Output) -> np.ndarray | None:
    """The constant weights as s8 with zero weight zero points, else None."""
    values, points = constant_value(w), _zero(zero)
    if values is None or points is None or np.any(points != 0) or w.element_type is not et.i8:
        return None
    return np.asarray(values, np.int8)


def _activation_zero(value: Output, element_type: ElementType) -> int | None:
    """The activations' zero point in the u8 domain the kernels read (i8 data: + 128)."""
    point = _zero(value)
    if point is None:
        return None
    return int(point.reshape(-1)[0]) + (128 if element_type is et.i8 else 0)


def _const(builder: ProgramBuilder, source: Output, t: ElementType, data: np.ndarray) -> View:
    buffer = builder.new_buffer(
        BufferKind.CONST, t, data.shape, len(builder.constants()), source, data
    )
    return View.dense(buffer.id, t, data.shape)


def quad_panels(matrix: np.ndarray) -> np.ndarray:
    """A (K, N) s8 matrix as quad panels: (ceil(N/32), ceil(K/4), 32, 4), zero-padded."""
    inner, cols = matrix.shape
    quads, count = -(-inner // QUAD), -(-cols // PANEL)
    padded = np.zeros((quads * QUAD, count * PANEL), np.int8)
    padded[:inner, :cols] = matrix
    panels = padded.reshape(quads, QUAD, count, PANEL).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(panels).reshape(-1)


@STEP_OPS.register(MatMulInteger)
def _matmul_integer(builder: ProgramBuilder, node: Node) -> None:
    a, b, a_zero, b_zero = node.inputs
    out = node.outputs[0]
    weights = _weights(b, b_zero)
    point = _activation_zero(a_zero, a.element_type)
    view = builder.operand(a)
    if weights is None or point is None or not isinstance(view, View):
        builder.fallback(node)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    inner, cols = weights.shape
    rows = views.static(math.prod(a.shape[:-1]))  # integer products run on static sizes
    left = view if view.strides[-1] == 1 else builder.materialize(view)
    matrix = _rows(builder, left, rows, inner)
    packed = _const(builder, b, et.i8, quad_panels(weights))
    sums = weights.astype(np.int64).sum(axis=0)
    offsets = _const(builder, b, et.i32, (-point * sums).astype(np.int64).astype(np.int32))
    right = View(packed.buffer, et.i8, (inner, cols), (0, 0), 0)
    dense = View(target.buffer, et.i32, (rows, cols), (cols, 1), target.offset)
    step = QGemmStep(builder.describe(node), (node,), matrix, right, dense, panel=PANEL)
    step.offsets, step.flip = offsets, a.element_type is et.i8
    builder.add_step(step)


def _rows(builder: ProgramBuilder, view: View, rows: int, inner: int) -> View:
    """``view`` as ``rows x inner`` with unit inner stride and rows at a constant stride."""
    matrix = views.reshape(view, (rows, inner))
    if not isinstance(matrix, View) or (inner > 1 and matrix.strides[1] != 1):
        matrix = views.reshape(builder.materialize(view), (rows, inner))
    assert isinstance(matrix, View)
    return matrix


@STEP_OPS.register(ConvInteger)
def _conv_integer(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, ConvInteger)
    x, w, x_zero, w_zero = node.inputs
    out = node.outputs[0]
    weights = _weights(w, w_zero)
    point = _activation_zero(x_zero, x.element_type)
    if weights is None or point is None or x.rank not in (3, 4):
        builder.fallback(node)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    data = _as_2d(builder.operand(x), builder, x.element_type)
    o = weights.shape[0]
    k = math.prod(weights.shape[1:])
    quads = -(-k // QUAD)
    kernel = (1, weights.shape[2]) if out.rank == 3 else (weights.shape[2], weights.shape[3])
    cg = weights.shape[1]
    matrix = np.zeros((o, quads * QUAD), np.int8)
    if cg % QUAD == 0:  # channel quads: (channel quad, row, column, channel in the quad)
        grouped = weights.reshape(o, cg // QUAD, QUAD, *kernel)
        matrix[:, :k] = grouped.transpose(0, 1, 3, 4, 2).reshape(o, k)
    else:
        matrix[:, :k] = weights.reshape(o, k)
    filters = _const(builder, w, et.i8, matrix)
    sums = weights.astype(np.int64).reshape(o, k).sum(axis=1)
    offsets = _const(builder, w, et.i32, (-point * sums).astype(np.int32))
    n, oh, ow = views.static_all(
        (out.shape[0], 1 if out.rank == 3 else out.shape[2], out.shape[-1])
    )
    shape4 = (n, o, oh, ow)
    dense = View(target.buffer, et.i32, shape4, _strides(shape4), target.offset)
    shared = oh * ow < SHARED_BELOW
    batched = shared and n > 1 and (oh * ow) % PANEL != 0
    if batched:  # the images' columns side by side, then a product per block of channels
        block = oh
        padded_cols = -(-(n * oh * ow) // PANEL) * PANEL
        _, rows = shared_blocks(o // op.groups, op.groups, builder.threads)
        patches = op.groups * quads * QUAD * padded_cols
        scratch_bytes = patches + builder.threads * rows * padded_cols * 4
    elif shared:  # small planes: patches once per image, then units split the channels
        block = oh
        padded_cols = -(-(oh * ow) // PANEL) * PANEL
        scratch_bytes = n * op.groups * quads * QUAD * padded_cols
    else:
        fit = PATCH_BYTES // max(1, quads * QUAD * ow)
        block = max(1, min(oh, fit))
        if n * op.groups * -(-oh // block) < 2 * builder.threads:
            wanted = -(-2 * builder.threads // (n * op.groups))
            block = max(1, min(block, -(-oh // max(1, wanted))))
        padded_cols = -(-(block * ow) // PANEL) * PANEL
        scratch_bytes = builder.threads * quads * QUAD * padded_cols
    windows = (kernel, _pair(op.strides, 1), _pair(op.dilations, 1), _pair(op.padding_below, 0))
    height, width = views.static_all(data.shape[2:])
    rows, cols = channel_quads((height, width), (oh, ow), block, windows, cg)
    interleaved = -(-(cg * rows * cols) // 64) * 64  # bytes: cg / 4 quads of 4 per column
    interleaved_at = -(-scratch_bytes // 64) * 64
    if interleaved:
        scratch_bytes = interleaved_at + builder.threads * interleaved
    scratch = builder.scratch(et.u8, (1, scratch_bytes))
    matrix_view = View(filters.buffer, et.i8, (o, k), (quads * QUAD, 1), 0)
    step = QConvStep(
        builder.describe(node), (node,), data, matrix_view,
        dense, *windows, op.groups, block, scratch, False, (n, oh, ow),
    )  # fmt: skip
    step.offsets, step.flip, step.x_zero = offsets, x.element_type is et.i8, point
    step.shared, step.batched = shared, batched
    step.interleaved, step.interleaved_at = interleaved, interleaved_at
    builder.add_step(step)


def shared_blocks(channels: int, groups: int, threads: int) -> tuple[int, int]:
    """(units per group, output channels per unit: a multiple of ``ROWS``) of a shared
    quantized convolution: about four units per thread over all groups."""
    want = -(-4 * threads // groups)
    blocks = max(1, min(-(-channels // ROWS), want))
    per_block = -(-channels // blocks)
    rows = -(-per_block // ROWS) * ROWS
    return -(-channels // rows), rows


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, size = [], 1
    for d in reversed(shape):
        strides.append(size)
        size *= d
    return tuple(reversed(strides))
