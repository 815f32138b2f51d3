"""The filter gradient of a 3x3 stride-1 convolution as a native Winograd F(3x3, 2x2) step
(:class:`WinogradFilterGradientStep`, ``codegen/winograd_filters.py``): 16 multiplications
per 2x2 cotangent pixels instead of the im2col GEMM's 36.

The step transforms a block of about ``BLOCK_TILES`` tiles at a time (tile rows of one
image, or whole images on small planes) into scratch that stays in cache and multiplies it
at once, accumulating ``(16, O, C)`` per part. One thread, batch 32, against the im2col step
(2026-11-26, load 4-5): 64 channels at 32x32 0.53-0.55x, 128 at 16x16 0.60x, 256 at 8x8
0.56x, 512 at 4x4 0.69x, 32 in and 64 out at 8x8 0.82x. (The graph-op version this replaces,
all tiles of the batch transformed by strided slices into one batched product, measured
0.80x, 0.62x and 0.77x on the small planes and 0.96-0.99x at 32x32.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opgraph.backends.fused import views
from opgraph.backends.fused.conv_backprop import WinogradFilterGradientStep
from opgraph.backends.fused.lowering.convolution import _pair
from opgraph.backends.fused.lowering.winograd_tiles import padded_row
from opgraph.backends.fused.views import View
from opgraph.core import element_type as et
from opgraph.core.node import Node
from opgraph.ops.convolution import ConvolutionBackpropFilters

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Channels the data and the cotangent need at least (the products' sides).
MIN_CHANNELS = 32
#: ``O · C`` at most: each part keeps a ``(16, O, C)`` accumulator.
MAX_FILTERS = 512 * 512
#: Tiles transformed and multiplied at a time (the 16 products' inner dimension): the block's
#: transformed data and cotangent, ``16 · (C + O) · tiles`` floats, stay in L2 at 64 channels.
BLOCK_TILES = 128


def _qualifies(builder: ProgramBuilder, node: Node) -> bool:
    op = node.op
    assert isinstance(op, ConvolutionBackpropFilters)
    x, ct = node.inputs
    out = node.outputs[0]
    if not (
        builder.features.winograd
        and out.element_type is et.f32
        and out.rank == 4
        and op.groups == 1
        and tuple(op.filter_shape) == (3, 3)
        and not builder.symbolic
    ):
        return False
    ones = (*(op.strides or ()), *(op.dilations or ()), *(op.data_dilations or ()))
    padding = (*(op.padding_below or (0, 0)), *(op.padding_above or (0, 0)))
    n, o, oh, ow = (int(d) for d in ct.shape)
    c = int(x.shape[1])
    return (
        all(v == 1 for v in ones)
        and all(0 <= p <= 2 for p in padding)
        and oh % 2 == 0
        and ow % 2 == 0
        and n * oh * ow > 0
        and min(o, c) >= MIN_CHANNELS
        and o * c <= MAX_FILTERS
    )


def lower_winograd_filter_gradient(builder: ProgramBuilder, node: Node, target: View) -> bool:
    """Add the Winograd filter-gradient step of ``node`` writing ``target`` (its home),
    or return False when the shapes do not qualify (the im2col step then runs)."""
    if not _qualifies(builder, node):
        return False
    op = node.op
    assert isinstance(op, ConvolutionBackpropFilters)
    x = builder.operand(node.inputs[0])
    ct = builder.operand(node.inputs[1])
    if not isinstance(x, View) or x.strides[3] != 1:
        x = builder.materialize(x)
    if not isinstance(ct, View):
        ct = builder.materialize(ct)
    n, c, _, w = views.static_all(x.shape)
    o, oh, ow = views.static_all(ct.shape[1:])
    th, tw = oh // 2, ow // 2
    block_rows = max(1, min(n * th, BLOCK_TILES // tw))  # may span images
    padding = _pair(op.padding_below, 0)
    row = padded_row(w, padding[1], ow, 2)
    parts = max(1, min(n, builder.threads))
    per_part = 16 * o * c + 16 * (c + o) * block_rows * tw + 4 * row
    scratch = builder.scratch(et.f32, (parts, per_part))
    dense = View(target.buffer, et.f32, (o, c * 9), (c * 9, 1), target.offset)
    step = WinogradFilterGradientStep(
        builder.describe(node), (node,), x=x, ct=ct, out=dense, padding=padding,
        block_rows=block_rows, parts=parts, scratch=scratch,
    )  # fmt: skip
    builder.add_step(step)
    return True
