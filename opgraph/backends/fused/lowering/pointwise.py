"""Pointwise (1x1) convolutions with constant filters as products by filters packed once, at
compile time (:class:`PointwiseConvStep`).

A 1x1 convolution of an NCHW image is ``Y[o, p] = sum_c W[o, c] X[c, p]`` per image: a
product whose right operand is the image itself. OpenBLAS repacks both operands on every
call (the filters are constant), the "wide" path of small planes copies the image into a
patch matrix first, and the panel path (``conv_panels.py``) transposes the image in and the
result out. Here the filters are repacked at compile time and the generated kernel
(``cpu/codegen/pointwise.py``) reads the image and writes the output in place, in one of two
layouts, whichever computes fewer padding lanes:

* ``pixels`` (planes whose pixel count is a multiple of the vector width, most of them):
  vectors run along the output pixels, ``W`` packed as :data:`ROWS`-channel panels
  (``(O/8, C, 8)``): every input row is read as vectors, every filter value broadcast.
* ``channels`` (small planes, 7x7 and 14x14, whose output channels are a multiple of 32
  and enough input channels to amortize the transposed stores):
  vectors run along the output channels, ``Wᵀ`` packed as :data:`PANEL`-column panels
  (``(O/32, C, 32)``), every input value broadcast; the tile is written transposed.

Strided convolutions (ResNet's downsampling shortcuts) and images read through other
strides copy the pixels they read into a dense scratch first (one pass over a quarter of the
image for stride 2). The fused epilogue runs on each unit's output while it is in cache.
Measured with ``bench/pointwise.py`` (docs/performance.md).

**Patches** (:func:`patch_conv_step`): a larger kernel that neither Winograd nor the direct
kernel takes (ResNet's 7x7 stride-2 stem and its stride-2 3x3 convolutions, Whisper's
Conv1d layers) runs the same way on its im2col patch matrix: the copy phase writes every
(channel, kernel row, kernel column) row of the patches, in parallel, zeros where the window
reads padding, and the product takes ``C·kh·kw`` as its inner dimension, the filters packed
as ``(O, C·kh·kw)``. Against im2col blocks and OpenBLAS (``ConvStep``) this parallelizes
the copy, packs the filters once and fuses the epilogue per unit (``bench/zoo_layers.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from opgraph.backends.fused.derived import derived
from opgraph.backends.fused.lowering.conv_panels import packed_filters
from opgraph.backends.fused.program import BufferKind, ConvStep, KKind, KNode
from opgraph.backends.fused.views import Literal, View
from opgraph.core import element_type as et
from opgraph.core.literals import Constant
from opgraph.core.node import Node
from opgraph.ops import elementwise as ew
from opgraph.ops.convolution import Convolution

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Output channels per packed panel of the ``pixels`` layout (rows of one micro-tile).
ROWS = 8
#: Output channels per packed panel of the ``channels`` layout.
PANEL = 32
#: Columns of the tail buffer: the last ``pixels % TAIL`` input columns of every channel are
#: copied there (zero-padded) so that the kernel reads whole vectors.
TAIL = 16


@dataclass(eq=False)
class PointwiseConvStep(ConvStep):
    """A 1x1 single-group f32 convolution with constant filters (see the module).

    ``w`` views the packed filters as ``(C, O)``: ``ROWS``-channel panels (``(O/8, C, 8)``)
    when ``channels_first`` is False, else ``PANEL``-channel panels of ``Wᵀ``. ``out`` is the
    dense (N, O, OH, OW) output. ``scratch`` holds, per thread, a tail buffer of ``C x TAIL``
    floats, then (``compact``) the dense (N, C, OH·OW) copy of the pixels the filters read;
    or (``unit_patches``) per thread the ``C x`` block patches of one unit's pixels (the
    ``pixels`` layout, block sizes from :func:`pixel_blocks`), then (``plane_rows`` > 0)
    the padded phase planes of the input at ``planes_at`` (:func:`phase_planes`); with
    ``from_planes`` only the planes (at 0), which the products read in place of patches
    (:func:`reads_planes`)."""

    channels_first: bool = False
    compact: bool = False
    unit_patches: bool = False
    plane_rows: int = 0  # rows of each padded phase plane (0: patches read the input)
    plane_cols: int = 0  # columns of each padded phase plane
    planes_at: int = 0  # where the planes start in the scratch (floats)
    from_planes: bool = False  # the products read the planes: no patch blocks
    unit_floats: int = 1 << 16  # a ``pixels`` unit's input and output at most (unit_floats)

    def inplace_pairs(self) -> list[tuple[int, int]]:
        """(residual buffer, output buffer) where the ``pixels`` kernels add a whole
        residual of the output's layout in registers (:func:`channel_bias`): each tile reads
        its residual before it stores the same places, so the output may take the
        residual's block when the residual dies here (its lines are in cache as the tile
        stores over them: no write to memory the call has not touched)."""
        bias = channel_bias(self) if not self.channels_first else None
        if bias is None or bias.residual is None or self.out is None:
            return []
        res, out = bias.residual, self.out
        same = res.shape == out.shape and res.element_type == out.element_type
        if res.buffer == out.buffer or not (same and res.is_whole and out.is_whole):
            return []
        if sum(v.buffer == res.buffer for v in self.reads()) != 1:
            return []  # the residual is the products' input too (read after stores)
        return [(res.buffer, out.buffer)]


@dataclass(frozen=True)
class HardSwish:
    """``v * max(min(v * alpha + beta, 1), +0)`` of the biased products ``v``, as the graph
    spells ``x * hard_sigmoid(x)`` (``HardSwish``'s decomposition: alpha 1/6, beta 1/2)."""

    alpha: float
    beta: float


@dataclass(frozen=True)
class ChannelBias:
    """An epilogue the ``pixels`` kernel applies to its accumulators before it stores them:
    ``y + bias[o]`` (``bias`` a view of one value per output channel), then ``+ residual``
    (a view of the output's shape and strides) where there is one, then ``relu`` or not, or
    (no residual) ``hard_swish``; the same operations on the same values as the epilogue's
    pass, without the pass."""

    bias: View
    relu: bool
    residual: View | None = None
    hard_swish: HardSwish | None = None


def channel_bias(step: PointwiseConvStep) -> ChannelBias | None:
    """The step's epilogue as a :class:`ChannelBias` where it is exactly ``Add(out, bias)``
    (either order), or ``Add`` of that and a residual (either order), or ``Relu`` of one of
    them, or the hard-swish of ``Add(out, bias)`` (:func:`hard_swish_of`), stored back into
    ``out``; else None."""
    e = step.epilogue
    if e is None or e.axes or len(e.stores) != 1 or e.stores[0][1] != step.out:
        return None
    assert step.out is not None
    top = e.nodes[e.stores[0][0]]
    swish = hard_swish_of(e.nodes, top)
    if swish is not None:
        add, hard_swish = e.nodes[swish[0]], swish[1]
        if _reached(e.nodes, top) != len(e.nodes) or not _is_op(add, ew.Add):
            return None
        found = _biased(step.out, [e.nodes[a] for a in add.args])
        return None if found is None else ChannelBias(found, False, None, hard_swish)
    relu = _is_op(top, ew.Relu)
    add = e.nodes[top.args[0]] if relu else top
    if not _is_op(add, ew.Add):
        return None
    residual = None
    inner = [e.nodes[a] for a in add.args if _is_op(e.nodes[a], ew.Add)]
    if len(inner) == 1:  # (out + bias) + residual
        (other,) = [e.nodes[a] for a in add.args if e.nodes[a] is not inner[0]]
        residual = _operand(other, step.out)
        add = inner[0]
    if len(e.nodes) != 3 + relu + 2 * (residual is not None):
        return None
    bias = _biased(step.out, [e.nodes[a] for a in add.args])
    if bias is None or residual == step.out:
        return None
    if residual is not None and residual.strides != step.out.strides:
        return None
    return ChannelBias(bias, relu, residual)


def _biased(out: View, args: list[KNode]) -> View | None:
    """The bias view where ``args`` (an ``Add``'s) load ``out`` and one value per output
    channel (either order); else None."""
    views = [_operand(a, out) for a in args]
    if out not in views:
        return None
    bias = views[1] if views[0] == out else views[0]
    per_channel = tuple(1 if axis == 1 else 0 for axis in range(len(out.shape)))
    return bias if bias is not None and bias.strides == per_channel else None


def hard_swish_of(nodes: list[KNode], top: KNode) -> tuple[int, HardSwish] | None:
    """(the index of ``v``, the :class:`HardSwish`) where ``top`` is
    ``Mul(v, Max(Min(Add(Mul(v, alpha), beta), 1), +0))`` (either order at each ``Mul`` and
    ``Add``; the bounds second, as ``hard_sigmoid`` puts them: the pass's short clamps),
    alpha and beta finite f32 literals; else None."""
    if not _is_op(top, ew.Mul) or top.element_type != et.f32:
        return None
    for v, clamp in (top.args, top.args[::-1]):
        low = nodes[clamp]
        if not _is_op(low, ew.Max) or _literal(nodes[low.args[1]]) != (0.0, 1.0):
            continue
        high = nodes[low.args[0]]
        if not _is_op(high, ew.Min) or _literal(nodes[high.args[1]]) != (1.0, 1.0):
            continue
        line = _sum_of_scaled(nodes, nodes[high.args[0]], v)
        if line is not None:
            return v, line
    return None


def _sum_of_scaled(nodes: list[KNode], add: KNode, v: int) -> HardSwish | None:
    """alpha and beta where ``add`` is ``Add(Mul(v, alpha), beta)`` (either order at each)."""
    if not _is_op(add, ew.Add):
        return None
    for scaled, offset in (add.args, add.args[::-1]):
        mul, beta = nodes[scaled], _literal(nodes[offset])
        if not _is_op(mul, ew.Mul) or beta is None or v not in mul.args:
            continue
        other = mul.args[1] if mul.args[0] == v else mul.args[0]
        alpha = _literal(nodes[other])
        if alpha is not None:
            return HardSwish(alpha[0], beta[0])
    return None


def _literal(node: KNode) -> tuple[float, float] | None:
    """(value, its sign) of a finite f32 literal a LOAD node reads; else None."""
    v = node.operand
    if node.kind is not KKind.LOAD or not isinstance(v, Literal) or v.element_type != et.f32:
        return None
    value = v.value
    if isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value), math.copysign(1.0, value)


def _reached(nodes: list[KNode], top: KNode) -> int:
    """The number of nodes ``top`` reads, itself included."""
    seen, stack = set(), [top.index]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(nodes[i].args)
    return len(seen)


def _is_op(node: KNode, op: type) -> bool:
    return node.kind is KKind.OP and type(node.op) is op


def _operand(node: KNode, out: View) -> View | None:
    """The f32 view of ``out``'s shape a LOAD node reads; else None."""
    v = node.operand
    if node.kind is not KKind.LOAD or not isinstance(v, View):
        return None
    return v if v.element_type == et.f32 and v.shape == out.shape else None


#: Output elements plus input elements of one unit's block at most (floats; 256 KiB, a
#: quarter of the 1 MiB L2 of the Zen 5 it was measured on; the ``pixels`` layout takes a
#: quarter of a larger L2, :func:`unit_floats`).
UNIT_FLOATS = 1 << 16


def unit_floats(l2_bytes: int, filter_bytes: int) -> int:
    """Floats of a ``pixels`` unit's input and output: :data:`UNIT_FLOATS`, or a quarter of
    an L2 of ``l2_bytes`` where that is more and the filters (``filter_bytes``, read once by
    every unit) take more than half of it, so that they come from L3 or memory each time
    (the lowering keeps the smaller units where the larger ones would be fewer than two a
    thread). Whisper-tiny's k3 stride-2 Conv1d (1152 patch rows x 384
    filters, 1.77 MB, at 1500 positions) on a 2 MiB L2 (Emerald Rapids guest): 16 units of
    96 positions in place of 32 of 48 ran its Conv1d front end 0.94x the time per core
    (docs/performance.md, 2026-11-28, h153). Outputs are the same: blocks split at whole
    tiles, and each output's sum runs over the same inner order."""
    return UNIT_FLOATS if filter_bytes <= l2_bytes // 2 else max(UNIT_FLOATS, l2_bytes // 16)


def _pixel_units(
    builder: ProgramBuilder, n: int, pixels: int, c: int, o: int
) -> tuple[int, int, int]:
    """(unit floats, blocks, pixels of the largest) of a ``pixels`` step of ``n`` images:
    :func:`unit_floats` for the target's L2, or :data:`UNIT_FLOATS` where the larger units
    would be fewer than two a thread (threads left idle)."""
    unit = unit_floats(builder.features.l2_bytes, 4 * c * o)
    blocks, per = pixel_blocks(pixels, c, o, unit)
    if unit != UNIT_FLOATS and n * blocks < 2 * builder.threads:
        unit = UNIT_FLOATS
        blocks, per = pixel_blocks(pixels, c, o, unit)
    return unit, blocks, per


#: Pixels per block of the ``pixels`` layout are a multiple of this (whole tiles on every
#: instruction set: 3 x 16, 6 x 8, 12 x 4).
BLOCK_STEP = 48


def pixel_blocks(
    pixels: int, inner: int, channels: int, unit: int = UNIT_FLOATS
) -> tuple[int, int]:
    """(blocks, pixels of the largest) of one image's pixels in the ``pixels`` layout: each
    block's input and output within ``unit`` floats (:func:`unit_floats`), whole
    :data:`BLOCK_STEP` runs, balanced."""
    blocks = max(1, pixels * (inner + channels) // unit)
    least = -(-pixels // blocks)
    per = -(-least // BLOCK_STEP) * BLOCK_STEP
    blocks = -(-pixels // per)
    steps = -(-pixels // BLOCK_STEP)
    return blocks, -(-steps // blocks) * BLOCK_STEP


#: Floats of the patch matrix (all images) up to which :func:`patch_conv_step` takes a
#: convolution (64 MiB); larger ones keep the row-blocked im2col of ``ConvStep``.
PATCH_FLOATS = 1 << 24


#: Floats of the padded phase planes (all images) up to which a ``unit_patches`` step builds
#: them (1 MiB: they stay in L2 while the units copy their patches out of them).
PLANE_FLOATS = 1 << 18
#: Planes are built where a window has at least this many taps per output pixel's stride
#: step (``kh·kw >= PLANE_REUSE·sh·sw``: each input value copied into that many patch rows):
#: the 7x7 stride-2 stem (49 taps, 4 per step: its patches 0.92x the time per core,
#: docs/performance.md). A 3x3 stride-2 layer (ResNet-18's 64 -> 128 at 56x56) or Whisper's
#: k3 Conv1d measured the same with and without them. Steps whose products read the planes
#: in place of patches (:func:`reads_planes`) build them whatever their taps: MobileNetV3's
#: 3x3 stride-2 stem 0.82x, EfficientNet-B0's 0.94x the time per core (h130).
PLANE_REUSE = 4


def phase_planes(
    channels: int,
    out_hw: tuple[int, int],
    windows: tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]],
) -> tuple[int, int]:
    """(rows, columns) of each padded phase plane of a patch step's input.

    The plane of channel ``c`` and phase ``q`` (``0 <= q < sw``) holds, at row ``R`` and
    column ``J``, the input at row ``R - ph`` and column ``J·sw + q - pw`` (zero outside the
    input). Kernel column ``kj`` of output column ``j`` reads padded column
    ``j·sw + kj·dw``: phase ``kj·dw % sw``, plane column ``j + kj·dw // sw``, so one output
    row of a patch row is a contiguous run of a plane row (a copy, no bounds or strides).
    The 7x7 stride-2 stem's planes are 3 x 2 x 229 x 115 floats (0.6 MB)."""
    (kh, kw), (sh, sw), (dh, dw), _ = windows
    oh, ow = out_hw
    return (oh - 1) * sh + (kh - 1) * dh + 1, (kw - 1) * dw // sw + ow


def reads_planes(out_hw: tuple[int, int]) -> bool:
    """Whether a ``unit_patches`` step with phase planes multiplies straight from them, each
    vector of output pixels at one run of a plane row per patch row (its offset from a
    table), instead of copying each unit's patches into a block first: where every vector
    of :data:`TAIL` (the widest lanes) pixels lies in one output row (units start at whole
    ``BLOCK_STEP`` runs: whole vectors). The 7x7 stem (112 columns) copied 0.10 of its
    1.05 ms per core into patch blocks (docs/performance.md, h130)."""
    return out_hw[1] % TAIL == 0


#: The ``channels`` layout's transposed stores cost about this many multiply-adds per
#: input channel, per f32 lanes of the target's vectors (16: AVX-512; 8: the CPU's AVX2
#: builds). AVX-512: 8 with scalar stores (C harness, Zen 4, one thread: 480 <- 80
#: channels at 14x14 ran 4 % slower than the ``pixels`` layout, which computes 6 % padding
#: lanes there; 256 <- 1024 ran 5 % faster); 4 since its tiles are transposed in
#: registers (H107, Zen 5, ``bench/pointwise.py --cpu-time``: EfficientNet-B0's 80 -> 480
#: and 112 -> 672 at 14x14 1.12-1.25x onnxruntime in ``pixels``, 1.02-1.09x in ``channels``;
#: any value under 4.9 moves those layers, 14x14 with 80 or more input channels). AVX2: 1
#: (H118, Zen 5, one thread, thread CPU per call): its ``pixels`` tile (4 rows x 3 vectors,
#: partial tiles of 4 accumulators) lost to ``channels`` on every 14x14 and 7x7 layer of
#: MobileNetV3 and EfficientNet-B0 (80 -> 184: 63 against 56 us, 672 -> 112: 287 against
#: 235, 1152 -> 192 at 7x7: 352 against 186) and won at 28x28 and up (40 -> 240: 194
#: against 232; ResNet-50's 512 -> 128: 808 against 872); 80 -> 184 and 80 -> 200 at 14x14,
#: whose 16-channel passes pad 4 %, take ``channels`` below 1.37.
TRANSPOSE_COST = {16: 4.0, 8: 1.0}


def layout_waste(pixels: int, channels: int, inner: int, lanes: int = 16) -> tuple[float, float]:
    """Relative costs of the ``pixels`` layout (computed lanes per useful output, vectors
    of 16 along the pixels: a plane's last pixels run from the 16-column tail copy on
    either width) and of the ``channels`` layout (passes of two vectors of ``lanes``
    channels over each 32-channel panel, and its transposed stores amortized over
    ``inner`` input channels)."""
    along_pixels = -(-pixels // TAIL) * TAIL / pixels
    width = min(PANEL, 2 * lanes)  # the channels of one pass (og_pw_ch)
    waste = -(-channels // width) * width / channels
    return along_pixels, waste * (1 + TRANSPOSE_COST[lanes] / inner)


def pointwise_conv_step(
    builder: ProgramBuilder,
    node: Node,
    data: View,
    out: View,
    strides: tuple[int, int],
) -> PointwiseConvStep | None:
    """The :class:`PointwiseConvStep` of ``node`` writing ``out`` (dense (N, O, OH, OW)),
    or None when the convolution does not qualify (not 1x1, padded, grouped, not f32, not
    constant filters, or a symbolic batch)."""
    op = node.op
    assert isinstance(op, Convolution)
    filters = _packable(builder, node, out)
    if (
        filters is None
        or node.inputs[0].rank != 4
        or tuple(filters.shape[2:]) != (1, 1)
        or any(p != 0 for p in (*(op.padding_below or ()), *(op.padding_above or ())))
    ):
        return None
    _, _, oh, ow = (int(d) for d in out.shape)  # static: not symbolic
    h, w = (int(d) for d in data.shape[2:])
    xs = data.strides
    compact = strides != (1, 1) or xs[3] != 1 or (h > 1 and xs[2] != w) or oh != h or ow != w
    return _packed_step(builder, node, data, out, compact, ((1, 1), strides, (1, 1), (0, 0)))


def patch_conv_step(
    builder: ProgramBuilder,
    node: Node,
    data: View,
    out: View,
    windows: tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]],
) -> PointwiseConvStep | None:
    """The :class:`PointwiseConvStep` of ``node`` on its patch matrix (``compact``; see the
    module), writing ``out`` (dense (N, O, OH, OW)); ``windows`` are its kernel, strides,
    dilations and padding below as 2-D pairs. None when it does not qualify (grouped, not
    f32, not constant filters, a symbolic batch, or patches over :data:`PATCH_FLOATS`)."""
    filters = _packable(builder, node, out)
    if filters is None or not builder.features.patches or data.element_type is not et.f32:
        return None
    n, _, oh, ow = (int(d) for d in out.shape)
    if n * int(np.prod(filters.shape[1:])) * oh * ow > PATCH_FLOATS:
        return None
    return _packed_step(builder, node, data, out, True, windows)


def _packable(builder: ProgramBuilder, node: Node, out: View) -> Constant | None:
    """The constant filters of convolution ``node`` when they may be packed at compile time
    (a static batch, panel products on the target, one group, an f32 result), else None."""
    op = node.op
    filters = node.inputs[1].node.op
    assert isinstance(op, Convolution)
    if (
        builder.symbolic
        or not builder.features.panels
        or not isinstance(filters, Constant)
        or op.groups != 1
        or out.element_type is not et.f32
    ):
        return None
    return filters


def _packed_step(
    builder: ProgramBuilder,
    node: Node,
    data: View,
    out: View,
    compact: bool,
    windows: tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]],
) -> PointwiseConvStep:
    """The step with the filters packed for its layout (``c`` = the inner dimension)."""
    filters = node.inputs[1].node.op
    assert isinstance(filters, Constant)
    n, o, oh, ow = (int(d) for d in out.shape)
    c = int(np.prod(filters.shape[1:]))
    pixels = oh * ow
    kernel, strides, dilations, padding = windows
    # the target's lanes (TargetFeatures.vector_lanes) for 1x1 products only, 16's costs for
    # patch convolutions: one in the channels layout writes its whole patch matrix first,
    # where the pixels layout builds each unit's patches in L2 (Whisper's k3 stride-2 Conv1d
    # on AVX2, 1152 -> 384 at 1500 positions: 10.6-10.7 ms in pixels, 10.7-11.9 in channels)
    patches = kernel != (1, 1) or padding != (0, 0)
    lanes = 16 if patches else builder.features.vector_lanes
    along_pixels, along_channels = layout_waste(pixels, o, c, lanes)
    channels_first = along_channels < along_pixels
    width = PANEL if channels_first else ROWS
    value = filters.value
    packed = derived(value, ("conv panels", width), lambda: packed_filters(value, width))
    buffer = builder.new_buffer(BufferKind.CONST, et.f32, packed.shape, len(builder.constants()),
                                node.inputs[1], packed)  # fmt: skip
    packed_view = View(buffer.id, et.f32, (c, o), (width, c * width), 0)
    unit, blocks, per = _pixel_units(builder, n, pixels, c, o)
    # patches built per unit, in the thread's L2 (no patch matrix written to memory and read
    # back: the 7x7 stem's is 7.4 MB) when every unit has its own pixels (one channel block)
    unit_patches = compact and patches and not channels_first and n * blocks >= 2 * builder.threads
    rows = cols = at = 0
    direct = False
    if unit_patches:
        size = at = builder.threads * c * per
        rows, cols = phase_planes(int(data.shape[1]), (oh, ow), windows)
        planes = n * int(data.shape[1]) * strides[1] * rows * cols
        taps, step = kernel[0] * kernel[1], strides[0] * strides[1]
        direct = reads_planes((oh, ow))
        if planes <= PLANE_FLOATS and (direct or taps >= PLANE_REUSE * step):
            size, at = (planes, 0) if direct else (size + planes, at)
        else:
            rows = cols = at = 0
            direct = False
    else:
        size = builder.threads * c * TAIL + (n * c * pixels if compact else 0)
    scratch = builder.scratch(et.f32, (size,))
    return PointwiseConvStep(
        builder.describe(node), (node,), data, packed_view, out, kernel, strides, dilations,
        padding, 1, 1, scratch, False, (n, oh, ow),
        channels_first=channels_first, compact=compact and not unit_patches,
        unit_patches=unit_patches, plane_rows=rows, plane_cols=cols, planes_at=at,
        from_planes=direct, unit_floats=unit,
    )  # fmt: skip
