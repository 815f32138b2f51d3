"""The data gradient of a 3x3 stride-1 convolution by Winograd F(2x2, 3x3), with the filter
transform computed at run time.

The data gradient of ``y = conv(x, w, padding p)`` is the forward convolution of the
cotangent by the filters with their spatial taps reversed and their channel axes swapped,
``w'[c, o] = w[o, c, ::-1, ::-1]``, with padding ``2 - p``. As an im2col GEMM and col2im
(``lowering/conv_backprop.py``) it costs 36 products per 2x2 outputs; Winograd costs 16, so it
runs as the inference convolution's :class:`WinogradStep` does (``codegen/winograd.py``). The
filters change every training step, so their transform ``U = G w Gᵀ`` is part of the graph:
a rewrite replaces the ``ConvolutionBackpropData`` node by a product of the filters with the
constant ``(9, 16)`` transform matrix, ``(16, O, C)``, and an internal
:class:`WinogradConvolution` node marked ``flipped`` whose lowering is the Winograd step. The
transform of the reversed filters is a permutation of the tile points of the forward's
(``FLIPPED_POINTS``), so the step reads the forward's transform (the same graph node once
CSE merged them) through that permutation and transposed: no transform or copy of its own.
The rewrite is the CPU backend's (``backends/cpu/rewrites.py``); the lowering of the node is
here, with the other lowerings.

Only shapes where Winograd measured faster qualify: f32, one group, at least 16 channels in and
out, output planes of at least ``MIN_TILES`` 2x2 tiles per image (CIFAR ResNet's 32x32 to
4x4 layers), and enough images for a unit of ``WINOGRAD_TILES`` tiles (``winograd_layout``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from opgraph.backends.fused import views
from opgraph.backends.fused.lowering.convolution import add_winograd_step, winograd_layout
from opgraph.backends.fused.lowering.registry import STEP_OPS
from opgraph.backends.fused.views import View
from opgraph.core import element_type as et
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import Constant, constant
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.core.shape import is_static
from opgraph.core.tensor_type import TensorType
from opgraph.ops.convolution import Convolution, ConvolutionBackpropData
from opgraph.ops.linalg import dot
from opgraph.ops.movement import reshape, transpose
from opgraph.ops.quantization import DequantizeLinear

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Channels in and out a forward convolution by computed filters needs (measured faster at 64
#: and 128; smaller layers keep the im2col step, as ``test_cpu_convolution`` expects of
#: parameter filters).
MIN_FORWARD_CHANNELS = 32
#: 2x2 tiles an output plane needs for the data gradient to run by Winograd. 4x4 planes
#: (4 tiles, the images folded into a unit's products) measured 1.0x and 1.3x the GEMM when
#: the data gradient transformed and transposed its own reversed filters; read flipped from
#: the forward's transform (``WinogradConvolution.flipped``), batch 32, one thread, against
#: im2col and col2im: 512 channels 20.2 against 27.0 ms, 32 channels 0.19 against 0.24 ms,
#: 64 level (0.63, 0.64 ms), 128 channels on 6x6 planes 2.9 against 4.5 ms (2026-11-26, H92,
#: load 5; the transform's product included, which a training step shares with the forward).
MIN_TILES = 4
#: The same for the forward convolution: 4x4 planes (4 tiles, the batch's images folded into
#: one unit's products) measured 0.82-0.84x the im2col GEMM's time at batch 32 and 512
#: channels, one thread, the filter transform included (2026-11-26, H71, load 8).
MIN_FORWARD_TILES = 4

# F(2x2, 3x3) filter transform G.
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)


def _transform_matrix() -> np.ndarray:
    """``K[(i, j), (a, b)] = G[a, i] · G[b, j]``: ``U = reshape(w, (.., 9)) · K``."""
    return np.einsum("ai,bj->ijab", _G, _G).reshape(9, 16).astype(np.float32)


@dataclass(frozen=True, slots=True)
class WinogradConvolution(Op):
    """A 3x3 stride-1 convolution of ``x (N, C, H, W)`` by Winograd-transformed filters
    ``u (16, O, C)``, padded by ``padding_below``/``padding_above``: ``(N, O, H', W')``.

    An internal op of the fused compiler: only :func:`winograd_data_gradient` builds it
    (before ``lower``, on the CPU); it has no reference kernel and is never serialized.
    """

    padding_below: tuple[int, int] = (0, 0)
    padding_above: tuple[int, int] = (0, 0)
    #: ``u`` (16, C, O) is the transform of the filters (C, O, 3, 3) of the convolution whose
    #: data gradient this is: the products read ``u[FLIPPED_POINTS[ξ]]ᵀ`` (reversed taps,
    #: swapped channels) and the result has ``u.shape[2]`` channels.
    flipped: bool = False
    num_inputs: ClassVar[int] = 2
    foldable: ClassVar[bool] = False
    differentiable: ClassVar[bool] = False

    def infer(self, x: TensorType, u: TensorType) -> TensorType:
        if x.element_type is not et.f32 or u.element_type is not et.f32:
            raise OpTypeError(f"expected f32 data and filters, got {x} and {u}")
        read, made = (1, 2) if self.flipped else (2, 1)  # u's axes: data and result channels
        layout = "(16, C, O)" if self.flipped else "(16, O, C)"
        if x.rank != 4 or u.rank != 3 or u.shape[0] != 16 or u.shape[read] != x.shape[1]:
            raise OpTypeError(f"expected data (N, C, H, W) and filters {layout}, got {x}, {u}")
        n, _, h, w = x.shape
        (pt, pl), (pb, pr) = self.padding_below, self.padding_above
        return TensorType(et.f32, (n, u.shape[made], h + pt + pb - 2, w + pl + pr - 2))


def _plain_3x3(
    op: Convolution | ConvolutionBackpropData, w: Output, out: Output, min_tiles: int = MIN_TILES
) -> bool:
    """What both rewrites need: a static f32 4-D output, one group, 3x3 filters, unit strides
    and dilations, paddings 0-2, at least ``min_tiles`` output tiles per image, and enough
    images for a Winograd unit."""
    padding = (*(op.padding_below or ()), *(op.padding_above or ()))
    if not (out.rank == 4 and is_static(out.shape)):
        return False
    n, o, oh, ow = (int(d) for d in out.shape)
    return (
        out.element_type is et.f32
        and is_static(w.shape)
        and op.groups == 1
        and tuple(w.shape[2:]) == (3, 3)
        and all(s == 1 for s in op.strides or ())
        and all(d == 1 for d in op.dilations or ())
        and all(0 <= p <= 2 for p in padding)
        and -(-oh // 2) * -(-ow // 2) >= min_tiles
        and winograd_layout(n, o, oh, ow, 1) is not None  # the layout ignores threads here
    )


def _qualifies(op: ConvolutionBackpropData, ct: Output, w: Output, out: Output) -> bool:
    return (
        _plain_3x3(op, w, out)
        and not any(op.output_padding or ())
        and min(int(w.shape[0]), int(w.shape[1])) >= 16
    )


def winograd_data_gradient(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    """``ConvolutionBackpropData`` rebuilt on ``inputs`` as the filter transform and a
    :class:`WinogradConvolution`, or None when the shapes do not qualify (a CPU rewrite:
    ``backends/cpu/rewrites.py``; the GPU keeps its own gradient steps)."""
    op = node.op
    assert isinstance(op, ConvolutionBackpropData)
    ct, w = inputs
    if not _qualifies(op, ct, w, node.outputs[0]):
        return None
    # the forward's transform (16, O, C) (one node with the forward's own after CSE), read
    # flipped: no transform of the reversed filters, no transposed copy
    u = _transformed_filters(w)
    assert op.padding_below is not None and op.padding_above is not None
    below = (2 - op.padding_below[0], 2 - op.padding_below[1])
    above = (2 - op.padding_above[0], 2 - op.padding_above[1])
    return [WinogradConvolution(below, above, flipped=True)(ct, u)]


def _transformed_filters(w: Output) -> Output:
    """The F(2x2, 3x3) transform of the (O, C, 3, 3) filters ``w`` as graph ops: (16, O, C)
    (the data gradient reads the same, flipped: ``WinogradConvolution.flipped``)."""
    o, c = int(w.shape[0]), int(w.shape[1])
    # (16, O·C) = Kᵀ · (O·C, 9)ᵀ: the product reads the filters transposed and writes the
    # (16, O, C) layout itself
    taps = transpose(reshape(w, (o * c, 9)), (1, 0))
    matrix = np.ascontiguousarray(_transform_matrix().T)
    return reshape(dot(constant(matrix, et.f32), taps, 1), (16, o, c))


def _forward_qualifies(op: Convolution, x: Output, w: Output, out: Output) -> bool:
    return (
        _plain_3x3(op, w, out, MIN_FORWARD_TILES)
        and not isinstance(w.op, Constant)  # constant filters: the inference lowering's own
        # a QDQ model's convolution (DequantizeLinear on its data or filters) is an integer
        # one for fuse_quantized_products; in f32 Winograd it was neither exact nor fast
        and not isinstance(w.op, DequantizeLinear)
        and not isinstance(x.op, DequantizeLinear)
        and all(d == 1 for d in op.data_dilations or ())
        and min(int(w.shape[0]), int(w.shape[1])) >= MIN_FORWARD_CHANNELS
    )


def winograd_forward(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    """A 3x3 stride-1 ``Convolution`` whose filters are computed (a training step's
    parameters) rebuilt on ``inputs`` as the filter transform and a
    :class:`WinogradConvolution`, or None when the shapes do not qualify (a CPU rewrite; the
    inference lowering transforms constant filters at compile time)."""
    op = node.op
    assert isinstance(op, Convolution)
    x, w = inputs
    if not _forward_qualifies(op, x, w, node.outputs[0]):
        return None
    u = _transformed_filters(w)  # (16, O, C)
    assert op.padding_below is not None and op.padding_above is not None
    below = (int(op.padding_below[0]), int(op.padding_below[1]))
    above = (int(op.padding_above[0]), int(op.padding_above[1]))
    return [WinogradConvolution(below, above)(x, u)]


@STEP_OPS.register(WinogradConvolution)
def _lower(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, WinogradConvolution)
    x_value, u_value = node.inputs
    target = builder.home(node.outputs[0])
    data = builder.operand(x_value)
    if not isinstance(data, View) or data.strides[3] != 1:
        data = builder.materialize(data)
    u = builder.operand(u_value)
    if not isinstance(u, View) or not u.is_dense:
        u = builder.materialize(u)
    n = views.static(data.shape[0])
    o, oh, ow = views.static_all(node.outputs[0].shape[1:])
    layout = winograd_layout(n, o, oh, ow, builder.threads)
    assert layout is not None, "the rewrites checked that the shapes make a layout"
    out = View(target.buffer, et.f32, (n, o, oh, ow), views.row_major_strides((n, o, oh, ow)),
               target.offset)  # fmt: skip
    add_winograd_step(builder, node, data, u, out, op.padding_below, layout, flipped=op.flipped)
