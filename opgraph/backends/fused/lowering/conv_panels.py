"""Convolutions with few output pixels by the packed-panel GEMM (:class:`PanelConvStep`).

A convolution whose output has few pixels in all and a long inner dimension (ResNet's last
stage at batch 1: 49 pixels, K = 4608, 512 channels) is a product of a short, wide patch
matrix by a large filter matrix. OpenBLAS repacks that filter matrix (9.4 MB in ResNet-18)
on every call; here it is repacked
once, at compile time, as the transposed filters ``Wᵀ`` (K x O) in 32-column panels, and the
product runs transposed: ``Yᵀ (pixels x O) = patches (pixels x K) · Wᵀ`` by the generated
register-blocked panel GEMM (``og_gemm_panels``), which streams the panels once. Each
pixel's patch is one contiguous row, built once per call; units of output-channel panels
share the patches, transpose their block of ``Yᵀ`` into the output and run the epilogue on
it. Measured against the "wide" im2col + OpenBLAS path (``bench/resnet_layers.py``,
docs/performance.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from opgraph.backends.fused.derived import derived
from opgraph.backends.fused.lowering.linalg import halve_panels
from opgraph.backends.fused.program import BufferKind, ConvStep
from opgraph.backends.fused.views import View
from opgraph.core import element_type as et
from opgraph.core.literals import Constant
from opgraph.core.node import Node
from opgraph.ops.convolution import Convolution

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Output pixels (all images) up to which a convolution runs as a panel product, and the
#: inner dimension (C·kh·kw) from which it does (bench/resnet_layers.py, one thread, Zen 4:
#: 512 3x3 at 7x7 3.4 -> 2.3 ms, 256->512 3x3 stride 2 at 14x14 1.36 -> 1.12 ms, 128->256
#: at 28x28 (196 pixels) 1.24 -> 1.15 ms; the 1x1 stride-2 convolutions (K 128-256) were
#: 10-20 % slower: building a patch row per pixel costs more than OpenBLAS's packing there).
PANEL_COLUMNS = 256
PANEL_INNER = 512
#: Output channels from which it does (fewer: a single panel, nothing to share out).
PANEL_CHANNELS = 64
#: Panel width of ``og_gemm_panels`` (columns of the packed matrix per panel).
PANEL = 32


@dataclass(eq=False)
class PanelConvStep(ConvStep):
    """A single-group f32 convolution with constant filters and few output pixels: ``w`` is
    the filters as ``Wᵀ`` (K x O) packed in :data:`PANEL`-column panels (a ``(O/32, K, 32)``
    array, zero-padded); ``scratch`` holds the patches (one row of K per output pixel of
    every image) then ``Yᵀ`` (pixels x O); ``out`` is the (O, N·OH·OW) plane of a wide
    :class:`ConvStep` (the dense output when N is 1)."""


def panel_conv_step(
    builder: ProgramBuilder,
    node: Node,
    data: View,
    plane: View,
    shape4: tuple[int, int, int, int],
    windows: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
) -> PanelConvStep | None:
    """The :class:`PanelConvStep` of ``node`` writing ``plane`` (``windows``: its strides,
    dilations and padding below as 2-D pairs), or None when the convolution does not
    qualify (see :data:`PANEL_COLUMNS`)."""
    op = node.op
    assert isinstance(op, Convolution)
    filters = node.inputs[1].node.op
    n, o, oh, ow = shape4
    columns = n * oh * ow
    if (
        builder.symbolic
        or not isinstance(filters, Constant)
        or op.groups != 1
        or plane.element_type is not et.f32
        or columns > PANEL_COLUMNS
        or o < PANEL_CHANNELS
        or int(np.prod(filters.shape[1:])) < PANEL_INNER
    ):
        return None
    shape = filters.value.shape
    kh, kw = (1, shape[2]) if len(shape) == 3 else shape[2:]
    k = int(np.prod(shape[1:]))
    value = filters.value
    if builder.features.panel_halves:  # the AVX2 tile's layout (TargetFeatures)
        key = ("conv half panels", PANEL)
        packed = derived(value, key, lambda: halve_panels(packed_filters(value)))
    else:
        packed = derived(value, ("conv panels", PANEL), lambda: packed_filters(value))
    buffer = builder.new_buffer(BufferKind.CONST, et.f32, packed.shape, len(builder.constants()),
                                node.inputs[1], packed)  # fmt: skip
    w = View(buffer.id, et.f32, (k, o), (PANEL, k * PANEL), 0)
    scratch = builder.scratch(et.f32, (columns * (k + o),))
    return PanelConvStep(
        builder.describe(node), (node,), data, w, plane, (int(kh), int(kw)), *windows, 1, 1,
        scratch, True, (n, oh, ow),
    )  # fmt: skip


def packed_filters(filters: np.ndarray, width: int = PANEL) -> np.ndarray:
    """[o, ...] filters as ``Wᵀ`` (K x O) in ``width``-column panels: (O/width, K, width),
    the filters zero-padded up to whole panels; a view (of ``filters`` itself where no
    padding is needed) that :func:`~opgraph.backends.fused.derived.derived` writes into its
    place once."""
    weights = np.asarray(filters, np.float32)
    o = weights.shape[0]
    k = int(np.prod(weights.shape[1:]))
    panels = -(-o // width)
    rows = weights.reshape(o, k)
    if o % width:  # zero filters up to whole panels
        rows = np.concatenate([rows, np.zeros((panels * width - o, k), np.float32)])
    return rows.reshape(panels, width, k).transpose(0, 2, 1)
