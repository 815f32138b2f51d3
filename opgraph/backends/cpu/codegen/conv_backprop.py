"""Generate the C of a convolution's gradient steps (:mod:`opgraph.backends.fused.conv_backprop`).

Data gradient unit (chunk of images, group, block of input channels): zero its channels, one
GEMM ``cols = W[:, block]ᵀ · ct`` into this thread's scratch, then col2im: each patch row
``(channel, ki, kj)`` added into the data gradient, one output row at a time, with the
out-of-bounds columns cut off by arithmetic (as the forward's patch rows are built).

Filter gradient unit (group, block of patch rows): per chunk of images, the block's patch rows
into this thread's scratch, then one GEMM ``dW[:, block] (+)= ct · patchesᵀ``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.windows import _driver, _pointer, patch_row, window_columns
from opgraph.backends.fused.conv_backprop import (
    ConvDataGradientStep,
    ConvFilterGradientStep,
    ConvGradientStep,
)
from opgraph.core import element_type as et

Emitted = tuple[str, str, tuple[Check, ...]]


class _GradientEmitter:
    def __init__(self, step: ConvGradientStep, name: str, module: ModuleContext) -> None:
        assert step.ct is not None and step.out is not None and step.scratch is not None
        self.step, self.name, self.module = step, name, module
        self.ct, self.out, self.scratch = step.ct, step.out, step.scratch
        self.ctype = dialect.storage_type(step.out.element_type)
        f32 = step.out.element_type is et.f32
        self.gemm = "scipy_cblas_sgemm" if f32 else "scipy_cblas_dgemm"
        module.uses_blas = True

    def head(self) -> list[str]:
        per_thread = self.scratch.shape[1]
        return [
            f"/* {self.name}: {self.step.label.replace('*/', '* /')} */",
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.ct, "ct0", True),
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.scratch, "scratch", False),
            f"  {self.ctype}* col = scratch + (long)og_worker_index() * {per_thread}L;",
        ]

    def tail(self, units: int) -> list[str]:
        parallel = self.step.macs >= PARALLEL_MACS
        threads = self.module.num_threads
        return [
            "  }",
            "  return 0;",
            "}",
            _driver(self.name, units, parallel, threads, self.module),
        ]

    def cotangent(self, first: str) -> str:
        """The GEMM operand of the cotangent rows of this group, images from ``first``."""
        s0, s1 = self.ct.strides[:2]
        og = self.step.out_channels // self.step.groups
        return f"ct0 + {first} * {s0}L + grp * {og * s1}L"


class DataGradientEmitter(_GradientEmitter):
    """A :class:`ConvDataGradientStep`."""

    def emit(self) -> str:
        s = self.step
        assert isinstance(s, ConvDataGradientStep) and s.w is not None
        n, c, h, w = s.data
        _, oh, ow = s.images
        g, cg, og, k = s.groups, c // s.groups, s.out_channels // s.groups, s.patch_rows
        taps, pixels, plane = s.kernel[0] * s.kernel[1], oh * ow, h * w
        blocks, chunks = -(-cg // s.block), -(-n // s.chunk)
        ct = self.ctype
        last_image = f"i0 + {s.chunk}L < {n}L ? i0 + {s.chunk}L : {n}L"
        last_channel = f"c0 + {s.block}L < {cg}L ? c0 + {s.block}L : {cg}L"
        lines = [
            *self.head(),
            _pointer(self.module, s.w, "w0", True),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long chk = u / {g * blocks}L, grp = (u / {blocks}L) % {g}L, blk = u % {blocks}L;",
            f"    long i0 = chk * {s.chunk}L, i1 = {last_image};",
            f"    long c0 = blk * {s.block}L, c1 = {last_channel};",
            f"    long r0 = c0 * {taps}L, r1 = c1 * {taps}L, cols = (i1 - i0) * {pixels}L;",
            "    for (long img = i0; img < i1; ++img) {",
            f"      {ct}* y = y0 + img * {c * plane}L + (grp * {cg}L + c0) * {plane}L;",
            f"      for (long q = 0; q < (c1 - c0) * {plane}L; ++q) y[q] = 0;",
            "    }",
            f"    {self.gemm}(101, 112, 111, (int)(r1 - r0), (int)cols, {og}, 1, "
            f"w0 + grp * {og * k}L + r0, {k}, {self.cotangent('i0')}, {self.ct.strides[1]}, 0, "
            "col, (int)cols);",
            *self.col2im(),
            *self.tail(chunks * g * blocks),
        ]
        return "\n".join(lines)

    def col2im(self) -> list[str]:
        """Add the unit's column block (patch rows r0 .. r1 of images i0 .. i1) into the data
        gradient, one output row at a time."""
        s = self.step
        _, c, h, w = s.data
        _, oh, ow = s.images
        cg, pixels, plane, ct = c // s.groups, oh * ow, h * w, self.ctype
        (sh, sw), (dh, _), (pt, _) = s.strides, s.dilations, s.padding
        columns = window_columns(s.kernel, s.strides, s.dilations, s.padding, w, ow)
        return [
            "    for (long r = r0; r < r1; ++r) {",
            *[f"    {line}" for line in columns],
            "      for (long img = i0; img < i1; ++img) {",
            f"        {ct}* yc = y0 + img * {c * plane}L + (grp * {cg}L + ch) * {plane}L;",
            f"        const {ct}* src0 = col + (r - r0) * cols + (img - i0) * {pixels}L;",
            f"        for (long oh = 0; oh < {oh}L; ++oh) {{",
            f"          long ih = oh * {sh}L - {pt}L + ki * {dh}L;",
            f"          if (ih < 0 || ih >= {h}L) continue;",
            f"          {ct}* dst = yc + ih * {w}L + shift;",
            f"          const {ct}* src = src0 + oh * {ow}L;",
            "          #pragma omp simd",
            f"          for (long j = lo_; j < hi_; ++j) dst[j * {sw}L] += src[j];",
            "        }",
            "      }",
            "    }",
        ]


class FilterGradientEmitter(_GradientEmitter):
    """A :class:`ConvFilterGradientStep`."""

    def emit(self) -> str:
        s = self.step
        assert isinstance(s, ConvFilterGradientStep) and s.x is not None
        n, c = s.data[:2]
        _, oh, ow = s.images
        g, cg, og, k = s.groups, c // s.groups, s.out_channels // s.groups, s.patch_rows
        pixels, xs = oh * ow, s.x.strides
        blocks = -(-k // s.block)
        ct = self.ctype
        patches = patch_row(s.x, s.kernel, s.strides, s.dilations, s.padding, ow)
        last_row = f"r0 + {s.block}L < {k}L ? r0 + {s.block}L : {k}L"
        accumulator = f"  {ct}* acc = col + {s.block * s.chunk * pixels}L;"
        lines = [
            *self.head(),
            _pointer(self.module, s.x, "x0", True),
            *([accumulator] if s.transposed else []),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long grp = u / {blocks}L, blk = u % {blocks}L;",
            f"    long r0 = blk * {s.block}L, r1 = {last_row};",
            f"    for (long i0 = 0; i0 < {n}L; i0 += {s.chunk}L) {{",
            f"      long i1 = i0 + {s.chunk}L < {n}L ? i0 + {s.chunk}L : {n}L;",
            f"      long cols = (i1 - i0) * {pixels}L;",
            "      for (long r = r0; r < r1; ++r) {",
            "        for (long img = i0; img < i1; ++img) {",
            f"          const {ct}* x = x0 + img * {xs[0]}L + grp * {cg * xs[1]}L;",
            f"          {ct}* row = col + (r - r0) * cols + (img - i0) * {pixels}L;",
            f"          long oh0 = 0, oh1 = {oh}L;",
            *[f"        {line}" for line in patches],
            "        }",
            "      }",
            *self.product(og, k),
            "    }",
            *self.write_transposed(og, k),
            *self.tail(g * blocks),
        ]
        return "\n".join(lines)

    def product(self, og: int, k: int) -> list[str]:
        """``dW[:, r0:r1] (+)= ct · patchesᵀ``, or its transpose into the accumulator."""
        s = self.step
        assert isinstance(s, ConvFilterGradientStep)
        first = "i0 == 0 ? 0 : 1"
        ct, ld = self.cotangent("i0"), self.ct.strides[1]
        if not s.transposed:
            return [
                f"      {self.gemm}(101, 111, 112, {og}, (int)(r1 - r0), (int)cols, 1, "
                f"{ct}, {ld}, col, (int)cols, {first}, y0 + grp * {og * k}L + r0, {k});"
            ]
        return [
            f"      {self.gemm}(101, 111, 112, (int)(r1 - r0), {og}, (int)cols, 1, "
            f"col, (int)cols, {ct}, {ld}, {first}, acc, {og});"
        ]

    def write_transposed(self, og: int, k: int) -> list[str]:
        """The accumulated ``dWᵀ`` block written into ``dW``'s columns ``r0 .. r1``."""
        s = self.step
        assert isinstance(s, ConvFilterGradientStep)
        if not s.transposed:
            return []
        return [
            f"    for (long o = 0; o < {og}L; ++o) {{",
            f"      {self.ctype}* dst = y0 + grp * {og * k}L + o * {k}L;",
            f"      for (long r = r0; r < r1; ++r) dst[r] = acc[(r - r0) * {og}L + o];",
            "    }",
        ]


def _emit(emitter: type[DataGradientEmitter | FilterGradientEmitter]) -> Callable[..., Emitted]:
    def emit(step: Any, i: int, module: ModuleContext) -> Emitted:
        text = emitter(step, f"g{i}", module).emit()
        return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", ()

    return emit


#: The C generators of the gradient steps (``codegen/module.py`` merges them in).
EMITTERS: dict[type, Callable[..., Emitted]] = {
    ConvDataGradientStep: _emit(DataGradientEmitter),
    ConvFilterGradientStep: _emit(FilterGradientEmitter),
}
