"""Convolution and pooling as native steps (2-D, and 1-D as 2-D of height 1).

A convolution runs by blocks of output rows: each block's im2col patch matrix is built in a
per-thread scratch slice small enough to stay in L2, then multiplied by the group's filter
matrix with BLAS straight into the output. A 1x1 stride-1 unpadded convolution needs no
patches: the image itself is the right operand. 1x1 convolutions with constant f32 filters
and a static batch are :class:`~opgraph.backends.fused.lowering.pointwise.PointwiseConvStep`
products by filters packed at compile time (``lowering/pointwise.py``). Depthwise
convolutions and grouped ones with few channels per group are *direct* steps
(``ConvStep.direct``, laid out by :class:`DirectPlan`): thin per-group GEMMs waste most of
their time, so the target sums each output straight from a padded copy of the image. Other
shapes (3-D, data dilation, integer types) run their reference kernels.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opgraph.backends.fused import views
from opgraph.backends.fused.derived import derived
from opgraph.backends.fused.lowering.conv_panels import panel_conv_step
from opgraph.backends.fused.lowering.pointwise import patch_conv_step, pointwise_conv_step
from opgraph.backends.fused.lowering.registry import STEP_OPS, SYMBOLIC_STEP_OPS
from opgraph.backends.fused.lowering.winograd_tiles import (
    F4_BLOCK,
    F4_IMAGE_TILES,
    filter_transform,
    padded_row,
    scratch_per_thread,
    winograd_tile,
)
from opgraph.backends.fused.program import BufferKind, ConvStep, PoolStep, WinogradStep
from opgraph.backends.fused.views import Literal, Operand, View
from opgraph.core import element_type as et
from opgraph.core.dim import Dim, bounds
from opgraph.core.element_type import ElementType
from opgraph.core.literals import Constant
from opgraph.core.node import Node
from opgraph.ops.conversion import Convert
from opgraph.ops.convolution import Convolution
from opgraph.ops.pooling import AvgPool, MaxPool

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Bytes of one thread's patch block: about half of an L2 cache.
PATCH_BYTES = 1 << 20
#: Columns (output pixels) per block: narrower products waste the GEMM.
MIN_COLUMNS = 256
#: Output planes smaller than this run as one GEMM over all images ("wide").
WIDE_BELOW = 256


def _as_2d(x: Operand, builder: ProgramBuilder, compute: ElementType) -> View:
    """``x`` as a rank-4 view of ``compute`` elements (rank 3 gains a height of 1)."""
    if isinstance(x, Literal) or x.element_type is not compute:
        op = Convert(compute) if x.element_type is not compute else None
        x = builder.materialize(x, compute, op)
    if len(x.shape) == 3:
        n, c, w = x.shape
        x = View(
            x.buffer, x.element_type, (n, c, 1, w), (*x.strides[:2], 0, x.strides[2]), x.offset
        )
    return x


def _pair(values: tuple[int, ...] | None, default: int) -> tuple[int, int]:
    values = values or (default,)
    return (default, values[0]) if len(values) == 1 else (values[0], values[1])


@STEP_OPS.register(Convolution)
def _convolution(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, Convolution)
    x, w = node.inputs
    out = node.outputs[0]
    t = out.element_type
    if x.rank not in (3, 4) or any(d != 1 for d in op.data_dilations or ()):
        builder.fallback(node)
        return
    if builder.symbolic and (not _batch_only(node) or _direct_node(node)):
        builder.fallback(node)  # (the direct plan sizes its blocks from the batch)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    compute = t if t in (et.f32, et.f64) else et.f32
    data = _static_layout(builder, _as_2d(builder.operand(x), builder, compute))
    filters = _as_2d(builder.operand(w), builder, compute)
    o, cg, kh, kw = views.static_all(filters.shape)  # only the batch may be symbolic
    matrix = views.reshape(filters, (o, cg * kh * kw))
    if not isinstance(matrix, View) or not matrix.is_dense:
        matrix = views.reshape(builder.materialize(filters), (o, cg * kh * kw))
    assert isinstance(matrix, View)
    n = out.shape[0]
    channels, oh, ow = views.static_all(
        (out.shape[1], 1 if out.rank == 3 else out.shape[2], out.shape[-1])
    )
    shape4 = (n, channels, oh, ow)
    dense = View(target.buffer, t, shape4, views.row_major_strides(shape4), target.offset)
    if _direct(op.groups, cg, (kh, kw), oh * ow):
        if data.strides[3] != 1:  # the direct kernel reads rows with unit stride
            data = builder.materialize(data)
        result = dense if compute is t else builder.scratch(compute, shape4)
        step = _conv_step(builder, node, data, matrix, result, (kh, kw), shape4, direct=True)
        builder.add_step(step)
        if compute is not t:
            builder.materialize(result, t, Convert(t), into=dense)
        return
    if compute is t and _winograd(builder, node, data, dense):
        return
    strides = _pair(op.strides, 1)
    pointwise = pointwise_conv_step(builder, node, data, dense, strides) if compute is t else None
    if pointwise is not None:
        builder.add_step(pointwise)
        return
    windows = (_pair(op.strides, 1), _pair(op.dilations, 1), _pair(op.padding_below, 0))
    small = oh * ow < WIDE_BELOW
    static4 = (views.static(n), channels, oh, ow) if type(n) is int else None
    columns = n * oh * ow
    plane = dense
    if small:  # small outputs: one GEMM over all images, split by channels
        plane = dense if n == 1 and compute is t else builder.scratch(compute, (o, columns))
        plane = View(plane.buffer, compute, (o, columns), (columns, 1), plane.offset)
    panels = small and static4 and panel_conv_step(builder, node, data, plane, static4, windows)
    patches = None if panels or compute is not t else patch_conv_step(
        builder, node, data, dense, ((kh, kw), *windows)
    )  # fmt: skip
    if patches is not None:
        builder.add_step(patches)
        return
    if small:
        step = panels or _conv_step(builder, node, data, matrix, plane, (kh, kw), shape4)
        builder.add_step(step)
        # (O, N, OH, OW) back to (N, O, OH, OW), converted to the output type if needed.
        if plane.buffer != target.buffer:
            source = View(plane.buffer, compute, shape4, (oh * ow, columns, ow, 1), plane.offset)
            builder.materialize(source, t, Convert(t) if compute is not t else None, into=dense)
        return
    result = dense if compute is t else builder.scratch(compute, shape4)
    builder.add_step(_conv_step(builder, node, data, matrix, result, (kh, kw), shape4))
    if compute is not t:
        builder.materialize(result, t, Convert(t), into=dense)


#: A grouped convolution (more than one channel per group) runs directly when its
#: multiply-adds per output channel (channels per group x taps x output pixels) are at most
#: this; larger ones run as im2col and one GEMM per group, which then wins (measured with
#: ``bench/depthwise.py``, 1 thread, Zen 4: 3x3 with 2 channels per group at 56x56 and 4-8 at
#: 28x28 were 1.2-1.6x faster directly; 4 and 8 at 56x56 1.2-1.4x slower).
DIRECT_MAX_WORK = 1 << 16
#: ... and when its channels per group x taps are at most this (32 channels per group at 7x7
#: ran 2x slower directly: 32 passes over tiny planes).
DIRECT_MAX_TAPS = 72
#: Filter widths up to which the direct kernel runs (it unrolls one filter row).
DIRECT_MAX_WIDTH = 64


#: Output channels of one group computed together by the direct kernel at most (each
#: loaded input vector feeds that many multiply-adds).
DIRECT_BLOCK = 8
#: Output rows of a one-pass unit computed together (each loaded input row feeds them all)
#: (``_together``). With 7x7 filters four rows together ran 1.1-1.3x faster than two
#: (``bench/depthwise.py`` shapes, one thread, Zen 4); 3x3 ones were 1.05-1.4x slower.
DIRECT_TOGETHER = 2
DIRECT_TOGETHER_LARGE = 4
DIRECT_LARGE_TAPS = 25
#: Filter taps written out in one pass of the direct kernel at most (more: one pass per
#: filter row).
DIRECT_UNROLL = 64
#: Weights (output channels x taps) one pass keeps in registers: a block of output channels
#: is only as large as this allows (spilled weights cost a load per multiply-add).
DIRECT_WEIGHTS = 24
#: Elements of a direct unit's buffers (padded input and flat outputs) it aims for: they
#: stay in the L1 cache while the unit's passes run over them.
DIRECT_FLAT = 4096
#: Output widths from which one-pass depthwise units write their output rows in place
#: (``opgraph.backends.cpu.codegen.depthwise``; their flat outputs go unused).
DIRECT_ROWWISE = 16
#: Phase elements up to which one-pass depthwise units copy the next unit's input in first
#: (:class:`DirectPlan` ``pipelined``; two sets of larger phases would crowd the L1 cache).
DIRECT_PIPELINE = 1024
#: Elements of slack past a thread's direct-convolution scratch: vector kernels may read one
#: vector (16 f32) past the last input they use (the CPU's pair of loads per phase row).
DIRECT_SLACK = 16
#: Output widths below which one-pass f32 depthwise steps with one output channel per
#: group run channel-blocked (``codegen/depthwise_blocked.py``: 16 channels per vector,
#: every tap a full-vector multiply-add; rows of 7 or 14 outputs fill half a vector or
#: less). 0 switches the channel-blocked kernel off.
DIRECT_BLOCKED_WIDTH = 16
#: ... and filters of at least this many taps (5x5 and 7x7: 1.4-2.4x faster than the
#: row-wise vectors, one thread, Zen 4; 3x3 ones measured 0.93-1.03x: the transposes in
#: and out cost as much as the nine taps save).
DIRECT_BLOCKED_TAPS = 25
#: Channels of one vector (and one unit) of the channel-blocked depthwise kernel.
CHANNEL_BLOCK = 16


@dataclass(frozen=True)
class DirectPlan:
    """How a direct convolution unit lays out its work (shared by the lowering, which sizes
    the scratch, and the target's kernel).

    A unit is ``rows`` output rows of ``block`` output channels of one image, computed
    ``together`` rows at a time (adjacent output rows share most of their input rows, so a
    loaded input vector feeds ``block x together`` outputs). For each input channel the unit
    copies the input it reads into ``(together * strides[0]) x strides[1]`` zero-padded
    *phases* (space to depth: phase ``(pr, pc)`` holds padded rows ``pr, pr + sh', …`` and
    columns ``pc, pc + sw, …``) of ``in_rows`` rows of ``pitch`` elements; the copy resolves
    padding, cropping and rows outside the data. Every filter tap then reads one phase at
    unit stride, so output ``f = i * pitch + j`` of the block reads ``phase + f + offset``:
    one flat loop of ``flat`` outputs (rounded up to 16) per output row of a group of
    ``together``, every tap at a constant offset, no bounds tests. Columns ``ow .. pitch``
    are computed and dropped when the block is copied out. ``row_passes``: a pass is one
    filter row (tall filters) instead of all taps. ``pipelined``: one-pass depthwise units
    with small phases keep two sets of phases and copy the next unit's input in before
    computing this one (the loads of a small block right after its copy waited on the
    copy's stores). ``in_place``: one-pass depthwise units with rows of at least
    :data:`DIRECT_ROWWISE` outputs write their output rows in place (no flat outputs).
    """

    rows: int
    pitch: int
    in_rows: int
    flat: int
    block: int
    together: int
    row_passes: bool
    phases: int
    pipelined: bool = False
    in_place: bool = False
    frame: tuple[int, int] | None = None
    least: int = 0

    @property
    def phase_size(self) -> int:
        return self.in_rows * self.pitch

    @property
    def blocked(self) -> bool:
        """Channel-blocked units (:func:`blocked_frame`): :data:`CHANNEL_BLOCK` channels of
        one image's whole planes, in a zero-padded ``frame`` (rows, columns) of channel
        vectors."""
        return self.frame is not None

    @property
    def per_thread(self) -> int:
        """Scratch elements of one thread: the phases (twice when pipelined) and the flat
        outputs; channel-blocked units: the padded frame, the filters and the outputs, each
        as vectors of :data:`CHANNEL_BLOCK` channels, or the row-wise plan's scratch
        (``least``: builds without AVX-512 run that one), whichever is larger."""
        if self.frame is not None:
            outputs = self.rows * self.pitch  # whole planes: rows x output columns
            taps = self.flat  # blocked plans keep the filter taps here
            used = (self.frame[0] * self.frame[1] + taps + outputs) * CHANNEL_BLOCK
            return max(used + DIRECT_SLACK, self.least)
        sets = 2 if self.pipelined else 1
        used = sets * self.phases * self.phase_size + self.block * self.together * self.flat
        return used + DIRECT_SLACK


def direct_plan(step: ConvStep, threads: int, blocked: bool = True) -> DirectPlan:
    """The :class:`DirectPlan` of a direct convolution step with ``threads`` threads;
    ``blocked`` False: the row-wise plan even where the channel-blocked one applies (what
    builds without AVX-512 run)."""
    assert step.x is not None and step.w is not None
    (kh, kw), (sh, sw), (dh, dw) = step.kernel, step.strides, step.dilations
    n = views.static(step.images[0])  # direct steps are static (symbolic ones fall back)
    oh, ow = step.images[1:]
    frame = blocked_frame(step) if blocked else None
    if frame is not None:  # whole planes; pitch: output columns, flat: filter taps
        least = direct_plan(step, threads, blocked=False).per_thread
        return DirectPlan(oh, ow, 0, kh * kw, 1, 1, False, 1, frame=frame, least=least)
    og = views.static(step.w.shape[0]) // step.groups
    row_passes = kh * kw > DIRECT_UNROLL and kh > 1
    taps = kw if row_passes else kh * kw
    fits = [b for b in range(1, min(DIRECT_BLOCK, og) + 1) if og % b == 0]
    block = max([b for b in fits if b * taps <= DIRECT_WEIGHTS] or [1])
    together = _together(kh, kw, oh, ow, row_passes)
    pitch = ow + (kw - 1) * dw // sw
    planes = n * (views.static(step.w.shape[0]) // block)
    in_place = step.x.shape[1] == step.groups and not row_passes and ow >= DIRECT_ROWWISE
    # split planes written in place: half the rows (the output rows share the cache)
    halve = in_place and pitch * block * oh > DIRECT_FLAT
    rows = max(1, min(oh, DIRECT_FLAT // (pitch * block * (2 if halve else 1))))
    want = 4 * threads
    if planes * -(-oh // rows) < want:  # few planes: more row blocks
        rows = max(1, min(rows, -(-oh // -(-want // planes))))
    rows = -(-rows // together) * together
    flat = -(-(rows // together) * pitch // 16) * 16
    span = together * sh
    reach = flat + ((together - 1) * sh + (kh - 1) * dh) // span * pitch + (kw - 1) * dw // sw
    in_rows = -(-reach // pitch)
    phases = span * sw
    one_pass = step.x.shape[1] == step.groups and not row_passes
    pipelined = one_pass and phases * in_rows * pitch <= DIRECT_PIPELINE
    return DirectPlan(
        rows, pitch, in_rows, flat, block, together, row_passes, phases, pipelined, in_place
    )


def blocked_frame(step: ConvStep) -> tuple[int, int] | None:
    """The padded frame (rows, columns) of a depthwise step that runs channel-blocked, or
    None: one-pass f32 depthwise steps (one input and one output channel per group, filters
    of :data:`DIRECT_BLOCKED_TAPS` to :data:`DIRECT_UNROLL` taps) with output rows narrower than
    :data:`DIRECT_BLOCKED_WIDTH`, no negative padding and unit-stride planes. The frame holds
    every padded row and column a tap reads and the whole image."""
    assert step.x is not None and step.w is not None and step.out is not None
    (kh, kw), (sh, sw), (dh, dw) = step.kernel, step.strides, step.dilations
    oh, ow = step.images[1:]
    _, c, h, w = step.x.shape
    depthwise = c == step.groups and step.w.shape[0] == step.groups
    if not (
        depthwise
        and step.out.element_type is et.f32
        and ow < DIRECT_BLOCKED_WIDTH
        and DIRECT_BLOCKED_TAPS <= kh * kw <= DIRECT_UNROLL
        and min(step.padding) >= 0
        and step.x.strides[3] == 1
        and step.x.strides[2] == w
    ):
        return None
    pt, pl = step.padding
    rows = max((oh - 1) * sh + (kh - 1) * dh + 1, pt + views.static(h))
    columns = max((ow - 1) * sw + (kw - 1) * dw + 1, pl + views.static(w))
    return rows, columns


def _together(kh: int, kw: int, oh: int, ow: int, row_passes: bool) -> int:
    """Output rows of a direct unit computed together: :data:`DIRECT_TOGETHER`, or
    :data:`DIRECT_TOGETHER_LARGE` for filters of at least :data:`DIRECT_LARGE_TAPS` taps
    (7x7 ones, and 5x5 ones on planes of 28 rows or more: on 14- and 7-row planes the 5x5
    filters measured faster with two), or one for smaller filters on rows narrower than
    :data:`DIRECT_ROWWISE` (the flat loop: 3x3 filters on 7x7 and 14x14 planes measured
    1.02-1.15x faster one row at a time, fewer padded columns computed), or one for large
    filters on planes no taller than the filter (a 7x7 filter on 7x7 planes measured 1.25x
    faster one row at a time than four)."""
    if kh == 1 or oh == 1 or row_passes:
        return 1
    if kh * kw >= DIRECT_LARGE_TAPS and oh <= kh:
        return 1
    if kh * kw >= DIRECT_LARGE_TAPS and (oh >= 28 or kh >= 7):
        return DIRECT_TOGETHER_LARGE
    if kh * kw < DIRECT_LARGE_TAPS and ow < DIRECT_ROWWISE:
        return 1
    return DIRECT_TOGETHER


def _direct(groups: int, per_group: int, kernel: tuple[int, int], pixels: int) -> bool:
    """Whether a convolution with ``per_group`` input channels per group runs directly:
    depthwise ones (one channel per group, any channel multiplier) and grouped ones whose
    groups are small (``pixels``: output pixels per channel)."""
    kh, kw = kernel
    if kw > DIRECT_MAX_WIDTH:
        return False
    taps = per_group * kh * kw
    small = taps <= DIRECT_MAX_TAPS and taps * pixels <= DIRECT_MAX_WORK
    return per_group == 1 or (groups > 1 and small)


#: Winograd needs this many tiles per unit for its 16 GEMMs to be worth running.
WINOGRAD_TILES = 48
#: Tiles a unit aims for (its transformed tiles and products stay in L2); planes with fewer
#: tiles than this take several images per unit (a static batch only).
WINOGRAD_BLOCK = 128
#: Row blocks of one image are made smaller (to share the work out) only down to this many
#: tiles; past that, units split the output channels instead.
WINOGRAD_ROW_TILES = 48
#: Output channels of one unit at least, when units split them.
WINOGRAD_CHANNELS = 64
#: Whether the channel blocks of one block of tiles share one input transform (a phase of
#: its own before the products; ``WinogradStep.shared``) rather than each transforming it.
SHARED_TRANSFORM = True


def _winograd(builder: ProgramBuilder, node: Node, data: View, out: View) -> bool:
    """Lower a 3x3 stride-1 single-group f32 convolution with constant filters and enough
    output to Winograd F(2x2, 3x3); False when it does not qualify."""
    op = node.op
    assert isinstance(op, Convolution)
    filters = node.inputs[1].node.op
    n, c = data.shape[0], views.static(data.shape[1])  # only the batch may be symbolic
    o, oh, ow = views.static_all(out.shape[1:])
    plain = (
        builder.features.winograd
        and isinstance(filters, Constant)
        and out.element_type is et.f32
        and op.groups == 1
        and node.inputs[0].rank == 4
        and filters.shape[2:] == (3, 3)
        and _pair(op.strides, 1) == (1, 1)
        and _pair(op.dilations, 1) == (1, 1)
        and min(_pair(op.padding_below, 0)) >= 0
        and data.strides[3] == 1
        and min(c, o) >= 16
    )
    if not plain:
        return False
    tile = winograd_tile(n, o, oh, ow, builder.threads) if builder.features.winograd_f4 else 2
    layout = winograd_layout(n, o, oh, ow, builder.threads, tile)
    if layout is None and tile != 2:  # too few 4x4 tiles per unit: 2x2 tiles
        tile, layout = 2, winograd_layout(n, o, oh, ow, builder.threads)
    if layout is None:
        return False
    assert isinstance(filters, Constant)
    u = derived(filters.value, ("winograd", tile), lambda: filter_transform(filters.value, tile))
    buffer = builder.new_buffer(BufferKind.CONST, et.f32, u.shape, len(builder.constants()),
                                node.inputs[1], u)  # fmt: skip
    transformed = View.dense(buffer.id, et.f32, u.shape)
    padding = _pair(op.padding_below, 0)
    add_winograd_step(builder, node, data, transformed, out, padding, layout, tile)
    return True


def add_winograd_step(
    builder: ProgramBuilder,
    node: Node,
    data: View,
    u: View,
    out: View,
    padding: tuple[int, int],
    layout: tuple[int, int, int],
    tile: int = 2,
    flipped: bool = False,
) -> None:
    """Add the WinogradStep of ``node``: ``data`` [n, c, h, w] (unit stride along w) by the
    transformed filters ``u`` [(tile + 2)², o, c] (``flipped``: [16, c, o], read flipped:
    ``WinogradStep.flipped``) into ``out`` [n, o, oh, ow], in the units ``layout`` (tile
    rows, images, output-channel blocks: :func:`winograd_layout`) says."""
    rows, images, channel_blocks = layout
    c = views.static(data.shape[1])
    o, ow = views.static(out.shape[1]), views.static(out.shape[3])
    part = -(-o // channel_blocks)
    tiles = images * rows * -(-ow // tile)
    row = padded_row(views.static(data.shape[3]), padding[1], ow, tile)
    per_thread = scratch_per_thread(c, part, tiles, tile, row)
    n = data.shape[0]
    shared = 0  # channel blocks of one block of tiles: its input transformed once, shared
    if channel_blocks > 1 and type(n) is int and SHARED_TRANSFORM:
        tile_rows = -(-views.static(out.shape[2]) // tile)
        shared = -(-n // images) * -(-tile_rows // rows)
    scratch = builder.scratch(et.f32, (builder.threads + shared, per_thread))
    step = WinogradStep(
        builder.describe(node), (node,), data, u, out, padding, rows, scratch,
        images=images, channel_blocks=channel_blocks, tile=tile, shared=shared, flipped=flipped,
    )  # fmt: skip
    builder.add_step(step)


def winograd_layout(
    n: Dim, o: int, oh: int, ow: int, threads: int, tile: int = 2
) -> tuple[int, int, int] | None:
    """(tile rows, images, output-channel blocks) of a Winograd unit for ``n`` images of
    ``o`` x ``oh`` x ``ow`` outputs in ``tile`` x ``tile`` tiles, or None when the units
    would have too few tiles.

    Planes of fewer than :data:`WINOGRAD_BLOCK` tiles (F(4x4): ``F4_BLOCK``) take several
    whole images per unit (a static batch; F(4x4): ``F4_IMAGE_TILES`` tiles, also the least
    an F(4x4) unit has); larger ones blocks of tile rows, made smaller to feed every thread down
    to :data:`WINOGRAD_ROW_TILES` tiles: two units per thread of F(2x2) tiles, one of F(4x4)
    tiles (each unit reads all 36 planes of filters: 64 x 56² on two threads, two units of
    98 tiles ran 0.90x the per-core time of four of 42-56 and 0.90x the two-thread time).
    Still too few units: the output channels are split (each unit transforms the same tiles,
    then multiplies by its block of filters)."""
    th, tw = -(-oh // tile), -(-ow // tile)
    least = least_batch(n)  # a symbolic batch: blocks sized for its smallest value
    images = 1
    block = WINOGRAD_BLOCK if tile == 2 else F4_BLOCK
    if type(n) is int and th * tw < block:
        images = min(n, -(-(block if tile == 2 else F4_IMAGE_TILES) // (th * tw)))
        rows = th
    else:
        rows = max(1, min(th, -(-block // tw)))
        if least * -(-th // rows) < 2 * threads:
            share = threads if tile == 4 else 2 * threads  # units the rows aim for
            fewer = max(1, -(-th // max(1, -(-share // least))))
            rows = max(fewer, min(rows, -(-WINOGRAD_ROW_TILES // tw)))
    if images * rows * tw < (WINOGRAD_TILES if tile == 2 else F4_IMAGE_TILES):
        return None
    units = -(-least // images) * -(-th // rows)
    channel_blocks = 1
    if units < 2 * threads:
        channel_blocks = max(1, min(-(-2 * threads // units), o // WINOGRAD_CHANNELS))
    return rows, images, channel_blocks


def _conv_step(
    builder: ProgramBuilder,
    node: Node,
    data: View,
    matrix: View,
    result: View,
    kernel: tuple[int, int],
    shape4: tuple[Dim, int, int, int],
    direct: bool = False,
) -> ConvStep:
    op = node.op
    assert isinstance(op, Convolution)
    strides = _pair(op.strides, 1)  # a 1-D convolution is 2-D with height 1: (1, s)
    dilations = _pair(op.dilations, 1)
    padding = _pair(op.padding_below, 0)
    k = views.static(matrix.shape[1])
    n, _, oh, ow = shape4
    wide = len(result.shape) == 2
    threads = builder.threads
    itemsize = result.element_type.itemsize
    # As many output rows per block as fit the patch budget (wide GEMMs are efficient), but at
    # least MIN_COLUMNS pixels, then fewer if the blocks would not feed every thread.
    fit = PATCH_BYTES // max(1, k * ow * itemsize)
    rows = max(1, min(oh, max(fit, -(-MIN_COLUMNS // ow))))
    least = least_batch(n)  # a symbolic batch: blocks sized for its smallest value
    if least * op.groups * -(-oh // rows) < 2 * threads:
        rows = max(1, min(rows, math.ceil(oh / max(1, -(-2 * threads // (least * op.groups))))))
    scratch: View | None = None
    if direct:
        rows = 1
    elif wide:
        scratch = builder.scratch(result.element_type, (op.groups, k, n * oh * ow))
    else:
        scratch = builder.scratch(result.element_type, (threads, k, rows * ow))
    step = ConvStep(
        builder.describe(node),
        (node,),
        data,
        matrix,
        result,
        kernel,
        strides,
        dilations,
        padding,
        op.groups,
        rows,
        scratch,
        wide,
        (n, oh, ow),
        direct=direct,
    )
    return _with_direct_scratch(builder, step) if direct else step


def _with_direct_scratch(builder: ProgramBuilder, step: ConvStep) -> ConvStep:
    """``step`` with its :class:`DirectPlan`'s rows and per-thread scratch."""
    assert step.out is not None
    plan = direct_plan(step, builder.threads)
    scratch = builder.scratch(step.out.element_type, (builder.threads, plan.per_thread))
    return dataclasses.replace(step, block_rows=plan.rows, scratch=scratch)


def _pool(builder: ProgramBuilder, node: Node, maximum: bool) -> None:
    op = node.op
    assert isinstance(op, AvgPool | MaxPool)
    x = node.inputs[0]
    out = node.outputs[0]
    if x.rank not in (3, 4) or (builder.symbolic and not _batch_only(node)):
        builder.fallback(node)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    data = builder.operand(x)
    if isinstance(data, Literal):
        data = builder.materialize(data)
    data = _static_layout(builder, _as_2d(data, builder, data.element_type))
    one_d = x.rank == 3
    window = (1, op.window_shape[0]) if one_d else tuple(op.window_shape)
    strides = (1, op.strides[0]) if one_d and op.strides else _pair(op.strides, 1)
    below = (0, op.padding_below[0]) if one_d and op.padding_below else _pair(op.padding_below, 0)
    above = (0, op.padding_above[0]) if one_d and op.padding_above else _pair(op.padding_above, 0)
    dilations = (1, 1)
    if maximum:
        assert isinstance(op, MaxPool)
        d = op.window_dilations(x.rank - 2)
        dilations = (1, d[0]) if one_d else (d[0], d[1])
    h, w = views.static_all(data.shape[2:])  # only the batch may be symbolic
    shape4 = (out.shape[0], out.shape[1], 1 if one_d else out.shape[2], out.shape[-1])
    dense = View(
        target.buffer, target.element_type, shape4, views.row_major_strides(shape4), target.offset
    )
    step = PoolStep(
        builder.describe(node),
        (node,),
        data,
        dense,
        maximum,
        (int(window[0]), int(window[1])),
        strides,
        dilations,
        below,
        bool(getattr(op, "include_padding", False)),
        (h + below[0] + above[0], w + below[1] + above[1]),
    )
    builder.add_step(step)


STEP_OPS.add(MaxPool, lambda builder, node: _pool(builder, node, True))
STEP_OPS.add(AvgPool, lambda builder, node: _pool(builder, node, False))


def _batch_only(node: Node) -> bool:
    """Whether the only symbolic size of a windowed node is its batch (axis 0 of the data
    and the result): what the targets' convolution and pooling steps take symbolically."""
    types = [x.tensor_type for x in node.inputs[:1]] + [node.outputs[0].tensor_type]
    types += [x.tensor_type for x in node.inputs[1:]]
    for i, t in enumerate(types):
        rest = t.shape if i >= 2 else t.shape[1:]
        if any(type(d) is not int for d in rest):
            return False
    return True


def _static_layout(builder: ProgramBuilder, data: View) -> View:
    """``data``, copied densely when a stride or its offset is symbolic (the windowed
    kernels index images with static strides; a dense batch-first copy has them)."""
    if all(type(d) is int for d in (*data.strides, data.offset)):
        return data
    return builder.materialize(data)


def _direct_node(node: Node) -> bool:
    """Whether the convolution ``node`` would be a direct step."""
    op = node.op
    assert isinstance(op, Convolution)
    w, out = node.inputs[1], node.outputs[0]
    sizes = views.static_all(w.shape)  # called on batch-only nodes: filters are static
    kernel = (1, sizes[2]) if w.rank == 3 else (sizes[2], sizes[3])
    pixels = math.prod(views.static_all(out.shape[2:]))
    return _direct(op.groups, sizes[1], kernel, pixels)


def least_batch(n: Dim) -> int:
    """A static batch, or a symbolic one's smallest value that has work (at least 1)."""
    if type(n) is int:
        return n
    return max(1, int(bounds(n)[0]))


SYMBOLIC_STEP_OPS.update({Convolution, MaxPool, AvgPool})
