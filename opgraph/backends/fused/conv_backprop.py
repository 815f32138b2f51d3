"""Steps of a convolution's two gradients: the data gradient (``ConvolutionBackpropData``,
the transposed convolution) and the filter gradient (``ConvolutionBackpropFilters``).

Both are GEMMs over im2col patches, like the forward ``ConvStep``:

* data gradient: ``cols = Wᵀ · ct`` (the filter matrix ``(O, K)`` transposed, ``K = C/groups ·
  kh · kw``, times the cotangent's ``(O, pixels)``), then *col2im*: every patch row
  ``(channel, ki, kj)`` is added into the data gradient at the positions it was read from;
* filter gradient: ``dW = ct · patchesᵀ``, the patches built from the forward data.

Both run over *chunks* of images: one image when its output plane is large (the cotangent is
read in place, rows of ``OH·OW`` pixels), or ``chunk`` images at once when it is small (the
cotangent is then a transposed copy laid out ``(O, N, OH, OW)``, so the pixels of consecutive
images are one row and one GEMM covers them all). A data-gradient unit is (chunk, group,
block of input channels): its col2im writes only its own channels of its own images. A
filter-gradient unit is (group, block of patch rows): it owns those columns of ``dW`` and
accumulates every chunk into them, so no unit's writes overlap another's.
"""

from __future__ import annotations

from dataclasses import dataclass

from opgraph.backends.fused.program import Step
from opgraph.backends.fused.views import View, static, static_all


@dataclass(eq=False)
class ConvGradientStep(Step):
    """What both gradient steps share (2-D; 1-D is 2-D of height 1).

    Attributes:
        ct: the output cotangent as a logical ``(N, O, OH, OW)`` view whose pixel rows are
            contiguous (``strides[2] == OW``, ``strides[3] == 1``); with ``chunk > 1`` its
            images are adjacent too (``strides[0] == OH·OW``: the transposed layout).
        out: the dense result.
        kernel, strides, dilations, padding: the forward convolution's, ``padding`` the top
            and left padding (the bottom and right follow from the shapes).
        groups: channel groups.
        data: ``(N, C, H, W)``: the forward data's shape.
        chunk: images per chunk (see the module doc).
        block: rows of a unit's block: input channels (data gradient) or patch rows
            (filter gradient).
        scratch: ``(threads, block rows · kh·kw or block, chunk · OH·OW)``: each thread's
            patch or column block (for a transposed filter gradient, followed by its
            ``block · O/groups`` accumulator).
    """

    ct: View | None = None
    out: View | None = None
    kernel: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    groups: int = 1
    data: tuple[int, ...] = (1, 1, 1, 1)
    chunk: int = 1
    block: int = 1
    scratch: View | None = None

    @property
    def images(self) -> tuple[int, int, int]:
        """``(N, OH, OW)``."""
        assert self.ct is not None
        n, _, oh, ow = static_all(self.ct.shape)  # the steps exist in static Programs only
        return n, oh, ow

    @property
    def out_channels(self) -> int:
        """``O``: the forward convolution's output channels (the cotangent's)."""
        assert self.ct is not None
        return static(self.ct.shape[1])

    @property
    def patch_rows(self) -> int:
        """``K = C/groups · kh · kw``."""
        return self.data[1] // self.groups * self.kernel[0] * self.kernel[1]

    @property
    def macs(self) -> int:
        """Multiply-adds of the GEMMs."""
        n, oh, ow = self.images
        return n * oh * ow * self.out_channels * self.patch_rows

    def writes(self) -> list[View]:
        assert self.out is not None and self.scratch is not None
        return [self.out, self.scratch]


@dataclass(eq=False)
class ConvDataGradientStep(ConvGradientStep):
    """``out`` (N, C, H, W) dense = the data gradient of ``ct`` through filters ``w``, the
    dense ``(O, C/groups, kh, kw)`` filters (read as the ``(O, K)`` matrix)."""

    w: View | None = None

    def reads(self) -> list[View]:
        assert self.ct is not None and self.w is not None
        return [self.ct, self.w]


@dataclass(eq=False)
class ConvFilterGradientStep(ConvGradientStep):
    """``out``, the dense ``(O, K)`` matrix of the ``(O, C/groups, kh, kw)`` filter gradient
    of ``ct`` for data ``x``
    (N, C, H, W), read through its strides."""

    x: View | None = None
    #: Accumulate ``dWᵀ`` (patch rows by output channels) in the unit's scratch and write it
    #: transposed at the end: BLAS's faster operand order when the output channels are few.
    transposed: bool = False

    def reads(self) -> list[View]:
        assert self.ct is not None and self.x is not None
        return [self.ct, self.x]


@dataclass(eq=False)
class WinogradFilterGradientStep(Step):
    """``out``, the dense ``(O, C·9)`` matrix of the ``(O, C, 3, 3)`` filter gradient of a 3x3
    stride-1 convolution of ``x`` (N, C, H, W; unit stride along W) with cotangent ``ct``
    (N, O, OH, OW; OH and OW even), by Winograd F(3x3, 2x2) (``codegen/winograd_filters.py``).

    ``parts`` units each take a contiguous range of images and accumulate the 16 products
    ``M[α] (O, C) = Σ_tiles D[α] · V[α]ᵀ`` of their tiles' transforms in their own slice of
    ``scratch``; a second pass sums the slices and writes the taps ``Gᵀ M G``.

    Attributes:
        padding: the forward convolution's top and left padding.
        block_rows: tile rows transformed (and multiplied) at a time.
        parts: units of images, each with its own accumulator.
        scratch: ``(parts, 16·O·C + 16·(C + O)·block tiles + 4·padded row)``: each part's
            accumulator, then its transformed data and cotangent tiles and 4 zero-padded
            input rows.
    """

    x: View | None = None
    ct: View | None = None
    out: View | None = None
    padding: tuple[int, int] = (1, 1)
    block_rows: int = 1
    parts: int = 1
    scratch: View | None = None

    def reads(self) -> list[View]:
        assert self.x is not None and self.ct is not None
        return [self.x, self.ct]

    def writes(self) -> list[View]:
        assert self.out is not None and self.scratch is not None
        return [self.out, self.scratch]
