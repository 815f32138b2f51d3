"""The filter gradient of a 3x3 stride-1 convolution by Winograd F(3x3, 2x2), as graph ops (a
CPU rewrite, :mod:`opgraph.backends.cpu.rewrites`).

``dW[o, c, i, j] = Σ_{n, p, q} x̂[n, c, p + i, q + j] · dy[n, o, p, q]`` (``x̂`` the padded
data) is, per 2x2 tile of output pixels, a correlation of a 4x4 data tile with a 2x2
cotangent tile giving the 3x3 taps: Winograd's F(3x3, 2x2), the transpose of the forward's
F(2x2, 3x3), with the same data transform ``Bᵀ d B``, the cotangent transformed by the
forward's output matrix (``A g Aᵀ``, 4x2) and the taps recovered by the forward's filter
matrix (``Gᵀ M G``). Summed over all tiles of all images, the 16 products per tile become 16
matrix products ``M[α] = D[α] · V[α]ᵀ`` over ``N · tiles`` (one batched ``MatMul``), against 36
for the im2col GEMM (2.25x fewer multiplications).

The transforms are elementwise sums of strided slices of the (transposed, padded) data and
cotangent, so the rewrite adds no op and no kernel. Only small planes qualify (at most
``MAX_PIXELS`` output pixels; the tiles' transforms cost memory passes that the 32x32 planes'
products do not pay back: one thread, batch 32, 64 channels at 32x32 measured 0.99x the im2col
step, 128 at 16x16 0.81x, 256 at 8x8 0.60x, 512 at 4x4 0.78x), with at least
``MIN_CHANNELS`` channels each side, even output sizes and unit strides and dilations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.literals import constant
from opgraph.core.node import Node, Output
from opgraph.core.shape import is_static
from opgraph.ops.convolution import ConvolutionBackpropFilters

#: Output pixels per image up to which the rewrite applies (16x16 planes).
MAX_PIXELS = 256
#: Channels the data and the cotangent need at least (the batched products' sides).
MIN_CHANNELS = 64

# F(2x2, 3x3)'s matrices (docs: Lavin & Gray); F(3x3, 2x2) is its transpose.
_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
_A = np.array([[1, 0], [1, 1], [1, -1], [0, -1]], np.float64)
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)


def _qualifies(op: ConvolutionBackpropFilters, x: Output, ct: Output, out: Output) -> bool:
    if not (
        out.element_type is et.f32
        and out.rank == 4
        and is_static(x.shape)
        and is_static(ct.shape)
        and op.groups == 1
        and tuple(op.filter_shape) == (3, 3)
    ):
        return False
    ones = (*(op.strides or ()), *(op.dilations or ()), *(op.data_dilations or ()))
    padding = (*(op.padding_below or (0, 0)), *(op.padding_above or (0, 0)))
    _, o, oh, ow = (int(d) for d in ct.shape)
    return (
        all(v == 1 for v in ones)
        and all(0 <= p <= 2 for p in padding)
        and oh % 2 == 0
        and ow % 2 == 0
        and oh * ow <= MAX_PIXELS
        and min(o, int(x.shape[1])) >= MIN_CHANNELS
    )


def _tiles(source: Output, coefficients: np.ndarray, taps: int, size: tuple[int, int]) -> Output:
    """``(16, channels, N·tiles)``: for each ``(a, b)``, ``Σ_ij K[a, i] K[b, j] s[.., i::2,
    j::2]`` of ``source (channels, N, H, W)``, ``size`` tiles down and across."""
    ch, n = int(source.shape[0]), int(source.shape[1])
    th, tw = size
    taps_of = {
        (i, j): ops.slice(
            source, [0, 0, i, j], [ch, n, i + 2 * th - 1, j + 2 * tw - 1], [1, 1, 2, 2]
        )
        for i in range(taps)
        for j in range(taps)
    }
    parts = []
    for a in range(4):
        for b in range(4):
            total: Output | None = None
            for (i, j), tap in taps_of.items():
                factor = coefficients[a, i] * coefficients[b, j]
                if factor == 0:
                    continue
                if total is None:
                    total = tap if factor == 1 else ops.negative(tap)
                else:
                    total = ops.add(total, tap) if factor == 1 else ops.subtract(total, tap)
            assert total is not None
            parts.append(ops.reshape(total, (1, ch, n * th * tw)))
    return ops.concat(parts, 0)


def winograd_filter_gradient(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    """``ConvolutionBackpropFilters`` rebuilt on ``inputs`` as Winograd F(3x3, 2x2) graph ops,
    or None when the shapes do not qualify."""
    op = node.op
    assert isinstance(op, ConvolutionBackpropFilters)
    x, ct = inputs
    if not _qualifies(op, x, ct, node.outputs[0]):
        return None
    c, o = int(x.shape[1]), int(ct.shape[1])
    th, tw = int(ct.shape[2]) // 2, int(ct.shape[3]) // 2
    below = (0, 0, *(op.padding_below or (0, 0)))
    above = (0, 0, *(op.padding_above or (0, 0)))
    # stride 1: the padded data is exactly the tiles' extent, 2 * tiles + 2 per axis
    data = ops.transpose(ops.pad(x, below, above), (1, 0, 2, 3))  # (C, N, H', W')
    v = _tiles(data, _BT, 4, (th, tw))  # (16, C, N·T)
    d = _tiles(ops.transpose(ct, (1, 0, 2, 3)), _A, 2, (th, tw))  # (16, O, N·T)
    m = ops.matmul(d, ops.transpose(v, (0, 2, 1)))  # (16, O, C)
    taps = np.einsum("ai,bj->ijab", _G, _G).reshape(9, 16).astype(np.float32)
    dw = ops.dot(constant(taps, et.f32), ops.reshape(m, (16, o * c)), 1)  # (9, O·C)
    return [ops.transpose(ops.reshape(dw, (3, 3, o, c)), (2, 3, 0, 1))]
