"""Generate the C of a :class:`PointwiseConvStep` (a 1x1 convolution by filters packed at
compile time; see ``fused/lowering/pointwise.py``).

The products run in two register-blocked micro-kernels (``og_pw_px`` along the pixels,
``og_pw_ch`` along 32-channel panels: ``codegen/pointwise_kernels.py``); this module writes
the units around them.

Units are (image, block of output channels, block of pixels), sized so that a unit's input
block and output stay in L2; each unit runs the fused epilogue on its outputs right after
computing them, but for a per-channel bias (then a residual or not, then ReLU or not), which
``og_pw_pxb`` (``og_pw_pxr``) in the ``pixels`` layout and ``og_pw_chb`` (``og_pw_chr``) in
the ``channels`` layout add to the accumulators before they store them, as ``og_pw_pxh`` and
``og_pw_chh`` add a bias and apply hard-swish (``channel_bias``).
With at most :data:`PANEL_OUTER_CHANNELS` input channels a unit runs its panels of 8
output channels one after the other, each over all of its pixels and followed by its
epilogue; otherwise every panel is run on one block of 48 pixels before the next block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen import bf16, dialect
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.pointwise_kernels import RB_MAX
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.cpu.config import l2_cache_bytes
from opgraph.backends.fused.lowering.pointwise import (
    BLOCK_STEP,
    PANEL,
    ROWS,
    TAIL,
    UNIT_FLOATS,
    PointwiseConvStep,
    channel_bias,
    pixel_blocks,
)
from opgraph.backends.fused.program import Buffer, BufferKind, ConvStep, Step
from opgraph.backends.fused.views import View, static_all
from opgraph.core import element_type as et


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


#: Input channels up to which the ``pixels`` layout runs a unit panel by panel (each
#: panel's 8 output rows over all of the unit's pixels, then its epilogue on them while
#: they are in L1) instead of block of pixels by block of pixels (every panel on one
#: 48-pixel block, the epilogue over the whole unit at the end). With few input channels
#: the output is most of the traffic: EfficientNet-B0's 16 -> 96 and MobileNetV3's
#: 16 -> 64 at 112x112 took 0.85-0.60x the time in their models (docs/performance.md,
#: H78); from 24 channels on, reading the unit's input once per panel lost (24 -> 144 at
#: 56x56: 1.03-1.16x, 40 -> 240 at 28x28: 1.05-1.25x).
PANEL_OUTER_CHANNELS = 16
#: The same for convolutions whose patches each unit builds in its block (``unit_patches``),
#: up to this many patch rows (channels x taps): the 3x3 stems of EfficientNet-B0 and
#: MobileNetV3 (27 rows; 0.90x and 0.96x of the step's time in the models). The block is
#: read once per panel from L2, so wider patches (ResNet-50's 7x7 stem: 147 rows) keep
#: the order by pixel blocks.
PATCH_PANEL_OUTER = 32
#: Whether a ``pixels`` unit (more than :data:`PANEL_OUTER_CHANNELS` input channels)
#: prefetches the next block's input rows while it runs this block's panels, each panel's
#: tile after an equal share of the rows (``BLOCK_STEP`` pixels: three lines a row). The
#: rows lie one plane apart (a line run of each of ``c`` rows: more streams than the
#: hardware prefetchers follow) and come from L3 when the input is larger than L2: ResNet-50's
#: 256 -> 64 and 256 -> 128 at 56x56 (3.2 MB), one thread on the Intel guest (2 MiB L2),
#: per-step minima 0.87 -> 0.71 and 1.32 -> 1.20 ms (docs/performance.md, h148). Only where
#: an image's input is more than half the L2 (``config.l2_cache_bytes``): below, the rows
#: stay in L2 and the prefetches cost (MobileNetV3, its inputs at most 0.9 MB: 1.03x).
NEXT_BLOCK_PREFETCH = True
#: Filter values (``o x c``) from which a step is split across the threads whatever its
#: multiply-adds (``PARALLEL_MACS``): a step on one pixel (MobileNetV3's squeeze-excite
#: products, ``c x o`` of 480 x 120 and 672 x 168: 58-113 K multiply-adds, under the
#: 131 K) reads each filter value once, from L3, and is bound by that read, not by its
#: arithmetic (~2 µs of it): two threads read the 230-450 KB in 7-16 µs against one's
#: 10-24 (the Intel guest, two threads, per-step minima in the model, docs/performance.md
#: h156). 128 KiB of filters.
PARALLEL_WEIGHTS = 1 << 15
#: Output columns up to which a ``unit_patches`` step's stride-2 rows are copied by AVX-512
#: masked loads and even-lane shuffles (``PointwiseConvEmitter.vector_row``): ResNet's 3x3
#: stride-2 steps at 28 columns.
ROW_VECTOR_COLUMNS = 32


class PointwiseConvEmitter:
    """``<name>`` (the units), ``<name>_compact`` (strided or non-dense inputs) and
    ``<name>_run`` of a :class:`PointwiseConvStep`."""

    def __init__(
        self, step: PointwiseConvStep, name: str, module: ModuleContext, checks: list[Check]
    ) -> None:
        assert step.x is not None and step.w is not None and step.out is not None
        assert step.scratch is not None
        self.step, self.name, self.module, self.checks = step, name, module, checks
        self.x, self.w, self.out, self.scratch = step.x, step.w, step.out, step.scratch
        self.c, self.o = static_all(step.w.shape)
        self.n = int(step.images[0])  # type: ignore[call-overload]  # static (see lowering)
        self.pixels = step.images[1] * step.images[2]
        self.threads = module.num_threads
        macs = self.n * self.o * self.c * self.pixels
        self.parallel = macs >= PARALLEL_MACS or self.o * self.c >= PARALLEL_WEIGHTS
        self.per = BLOCK_STEP
        # the kernels add a bias (then a residual, then ReLU; or hard-swish) in registers:
        # no epilogue pass
        self.bias = channel_bias(step)

    def emit(self) -> str:
        for helper in ("pw_tile", "pw_px", "pw_ch"):
            self.module.helper(helper)
        if self.bias is not None:  # after pw_px: its vector type
            self.module.helper("pw_hswish" if self.bias.hard_swish is not None else "pw_bias")
        self.module.helper(f"pw_{self.variant()}")  # (pw_px and pw_ch: requested above)
        s = self.step
        head = [f"/* {self.name}: pointwise convolution: {s.label.replace('*/', '* /')} */"]
        if s.epilogue is not None and self.bias is None:
            label = "epilogue of " + self.name
            ep = CLoopEmitter(s.epilogue, f"{self.name}_ep", self.module, label, self.checks)
            # no streaming stores: the epilogue runs on a unit's outputs while they are in
            # cache, and a streamed epilogue ends every call with a fence
            stream, self.module.stream_bytes = self.module.stream_bytes, 0
            try:
                head.append(ep.emit())
            finally:
                self.module.stream_bytes = stream
        if s.compact:
            head += self.compact()
        if s.plane_rows:
            head += self.planes()
        elif s.unit_patches:
            head += self.row_copies()
        if s.from_planes:
            head.append(self.offsets())
        blocks = self.channel_layout() if s.channels_first else self.pixel_layout()
        units = self.n * blocks[0] * blocks[1]
        run = [
            f"static int {self.name}_run(void* const* T, char* A) {{",
            "  int err = 0;",
        ]
        if s.compact:
            run.append(self.phase(f"{self.name}_compact", self.n * self.c))
        if s.plane_rows:
            channels = static_all(self.x.shape)[1]
            run.append(self.phase(f"{self.name}_planes", self.n * channels * s.plane_rows))
        run += [self.phase(self.name, units), "  return err;", "}"]
        return "\n".join(head + self.units(blocks) + run)

    def phase(self, fn: str, units: int) -> str:
        if self.parallel and units > 1 and self.threads > 1:
            self.module.uses_pool = True
            return f"  err |= og_parallel({fn}, T, A, {units}L, 1L, {self.threads});"
        return f"  err |= {fn}(T, A, 0, {units}L);"

    def pixel_layout(self) -> tuple[int, int]:
        """(channel blocks, pixel blocks) of the ``pixels`` layout."""
        blocks, self.per = pixel_blocks(self.pixels, self.c, self.o, self.step.unit_floats)
        panels = -(-self.o // ROWS)
        want = 2 * self.threads if self.parallel else 1
        channel_blocks = min(panels, max(1, -(-want // (self.n * blocks))))
        # (the lowering builds patches per unit only where n·blocks >= 2·threads)
        assert channel_blocks == 1 or not self.step.unit_patches
        return channel_blocks, blocks

    def channel_layout(self) -> tuple[int, int]:
        """(channel blocks, pixel blocks) of the ``channels`` layout."""
        per = max(RB_MAX, UNIT_FLOATS // (self.c + PANEL))
        pixel_blocks = -(-self.pixels // per)
        panels = -(-self.o // PANEL)
        want = 4 * self.threads if self.parallel else 1
        channel_blocks = min(panels, max(1, -(-want // (self.n * pixel_blocks))))
        return channel_blocks, self.even_blocks(channel_blocks, pixel_blocks)

    def even_blocks(self, channel_blocks: int, pixel_blocks: int) -> int:
        """``pixel_blocks``, or where the layout has fewer than four units per thread, the
        least multiple of it up to ``threads`` times (blocks of whole ``RB_MAX`` runs) that
        makes the units a multiple of the threads: 160 channels
        at 7x7 (five panels, one pixel block) ran as five units on two threads, three on
        one (MobileNetV3's 672 -> 160 and 960 -> 160: 0.6 of their one-thread time, 0.52
        as ten units; docs/performance.md h126). With more units the imbalance is smaller
        than the cost of reading each panel once more (EfficientNet-B0's 9 units of 672 ->
        112 at 14x14 as 18 measured no faster). Each output's sum is the same either way:
        blocks split at whole tiles."""
        units = self.n * channel_blocks * pixel_blocks
        if not self.parallel or self.threads < 2 or units >= 4 * self.threads:
            return pixel_blocks
        steps = _ceil(self.pixels, RB_MAX)
        for k in range(1, self.threads + 1):
            blocks = pixel_blocks * k
            if blocks > steps:
                break
            if self.n * channel_blocks * blocks % self.threads == 0:
                return blocks
        return pixel_blocks

    def source(self) -> list[str]:
        """C declaring ``x`` (this image's input), ``ldx`` and ``y`` (its output)."""
        c, p = self.c, self.pixels
        xs = self.x.strides
        lines = [
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, self.scratch, "scratch", False),
        ]
        if self.bias is not None:
            lines.append(_pointer(self.module, self.bias.bias, "b0", True))
        if self.bias is not None and self.bias.residual is not None:
            lines.append(_pointer(self.module, self.bias.residual, "r0", True))
        if self.step.compact:
            at = self.module.num_threads * c * TAIL
            lines.append(f"  const float* xd = scratch + {at}L;")
            image, ldx = f"xd + img * {c * p}L", f"{p}L"
        else:
            lines.append(_pointer(self.module, self.x, "x0", True))
            image, ldx = f"x0 + img * {xs[0]}L", f"{xs[1]}L"
        return [*lines, f"  const long ldx = {ldx};", f"#define OG_IMAGE(img) ({image})"]

    def units(self, blocks: tuple[int, int]) -> list[str]:
        channel_blocks, pixel_blocks = blocks
        s = self.step
        o, p = self.o, self.pixels
        width = PANEL if s.channels_first else ROWS
        panels = -(-o // width)
        worker = "(long)og_worker_index()" if self.threads > 1 and self.parallel else "0L"
        lines = [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            *self.source(),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {channel_blocks * pixel_blocks}L;",
            f"    long cb = (u / {pixel_blocks}L) % {channel_blocks}L, pb = u % {pixel_blocks}L;",
            f"    long q0 = {panels}L * cb / {channel_blocks}L;",
            f"    long q1 = {panels}L * (cb + 1) / {channel_blocks}L;",
            "    const float* x = OG_IMAGE(img);",
            f"    float* y = y0 + img * {o * p}L;",
        ]
        if self.bias is not None and self.bias.residual is not None:
            lines.append(f"    const float* res = r0 + img * {o * p}L;  /* y's layout */")
        if s.channels_first:
            lines += self.channel_body(pixel_blocks)
        elif s.unit_patches:
            lines += self.patch_body(pixel_blocks, worker)
        else:
            lines += self.pixel_body(pixel_blocks, worker)
        return [*lines, "  }", "#undef OG_IMAGE", "  return err;", "}"]

    def epilogue(self, first: str, last: str, p0: str, p1: str) -> list[str]:
        if self.step.epilogue is None or self.bias is not None:
            return []
        o, p = self.o, self.pixels
        return [
            f"    for (long oc = {first}; oc < {last}; ++oc) {{",
            f"      long at = img * {o * p}L + oc * {p}L;",
            f"      err |= {self.name}_ep(T, A, at + {p0}, at + {p1});",
            "    }",
        ]

    def variant(self) -> str:
        """The kernel's name after ``og_``'s ``pw_``: ``px`` / ``pl`` / ``ch`` (the layout;
        ``pl``: the products from the phase planes), then ``b`` (bias, then ReLU or not),
        ``r`` (and a residual) or ``h`` (hard-swish) where the epilogue is in registers
        (``channel_bias``)."""
        s = self.step
        layout = "ch" if s.channels_first else "pl" if s.from_planes else "px"
        if self.bias is None:
            return layout
        if self.bias.hard_swish is not None:
            return f"{layout}h"
        return f"{layout}{'b' if self.bias.residual is None else 'r'}"

    def call(self, head: str, bias: str, residual: str) -> str:
        """The kernel's call on ``head`` (:meth:`variant`), then the epilogue's arguments:
        ``bias``, the residual at ``residual`` and the ReLU flag, or hard-swish's line."""
        name = f"og_pw_{self.variant()}"
        if self.bias is None:
            return f"{name}({head});"
        swish = self.bias.hard_swish
        if swish is not None:
            line = ", ".join(dialect.C.literal(c, et.f32) for c in (swish.alpha, swish.beta))
            return f"{name}({head}, {bias}, {line});"
        relu = int(self.bias.relu)
        if self.bias.residual is None:
            return f"{name}({head}, {bias}, {relu});"
        return f"{name}({head}, {bias}, {residual}, {relu});"

    def px_call(self, args: str, at: str, cols: str = "cols") -> str:
        """The ``pixels`` kernel's call on ``args`` for panel ``q``, storing at ``yq + at``
        (:meth:`call`: the panel's rows' bias, the residual at the same place)."""
        head = f"{args}, yq + {at}, {self.pixels}L, rows, {cols}"
        return self.call(head, f"b0 + q * {ROWS}L", f"res + (yq - y) + {at}")

    def ch_call(self, args: str, at: str) -> str:
        """The ``channels`` kernel's call on ``args`` for pixels ``p0 .. p1`` of panel ``q``,
        storing at ``y + at`` (:meth:`call`: the panel's channels' bias, the residual at the
        same place)."""
        head = f"{args}, y + {at}, {self.pixels}L, p0, p1, valid"
        return self.call(head, f"b0 + q * {PANEL}L", f"res + {at}")

    def pixel_body(self, pixel_blocks: int, worker: str) -> list[str]:
        c, o, p = self.c, self.o, self.pixels
        whole = p - p % TAIL
        # blocks of whole BLOCK_STEP runs, balanced (3136 pixels in 14 blocks: 192 or 240
        # each, not 13 x 240 and 16: each thread's contiguous home of blocks is half)
        steps = _ceil(p, BLOCK_STEP)
        lines = [
            f"    long p0 = {steps}L * pb / {pixel_blocks}L * {BLOCK_STEP}L;",
            f"    long p1 = {steps}L * (pb + 1) / {pixel_blocks}L * {BLOCK_STEP}L;",
            f"    if (p1 > {p}L) p1 = {p}L;",
        ]
        if whole < p:
            lines += [
                f"    float* tail = scratch + {worker} * {c * TAIL}L;",
                f"    if (p1 > {whole}L)",
                f"      for (long k = 0; k < {c}L; ++k)",
                f"        for (long j = 0; j < {TAIL}L; ++j)",
                f"          tail[k * {TAIL}L + j] = "
                f"j < {p - whole}L ? x[k * ldx + {whole}L + j] : 0.0f;",
            ]
        if c <= PANEL_OUTER_CHANNELS:
            return lines + self.panel_outer_loops(whole)
        lines += [
            f"    for (long j = p0; j < p1; j += {BLOCK_STEP}L) {{",
            f"      long je = j + {BLOCK_STEP}L < p1 ? j + {BLOCK_STEP}L : p1;",
            f"      long full = je < {whole}L ? je : {whole}L;",
            "      for (long q = q0; q < q1; ++q) {",
            *self.next_block_prefetch(),
            *self.panel_tiles("j", "full", "je", whole),
            "      }",
            "    }",
        ]
        last = f"(q1 * {ROWS}L < {o}L ? q1 * {ROWS}L : {o}L)"
        return lines + self.epilogue(f"q0 * {ROWS}L", last, "p0", "p1")

    def next_block_prefetch(self) -> list[str]:
        """Panel ``q``'s share of the next block's input rows (:data:`NEXT_BLOCK_PREFETCH`),
        prefetched before its tile, where the next block is this unit's and whole vectors."""
        c, whole = self.c, self.pixels - self.pixels % TAIL
        if not NEXT_BLOCK_PREFETCH or c * self.pixels * 4 <= l2_cache_bytes() // 2:
            return []
        return [
            f"        if (je + {BLOCK_STEP}L <= {whole}L && je < p1) {{",
            f"          long k0 = {c}L * (q - q0) / (q1 - q0), "
            f"k1 = {c}L * (q - q0 + 1) / (q1 - q0);",
            "          for (long k = k0; k < k1; ++k)",
            f"            for (long v = 0; v < {BLOCK_STEP}L; v += 16)",
            "              __builtin_prefetch(x + k * ldx + je + v, 0, 3);",
            "        }",
        ]

    def panel_tiles(self, j: str, full: str, je: str, whole: int) -> list[str]:
        """The tiles of panel ``q`` over pixels ``j .. je`` (``full``: the end of the
        whole-vector pixels), the tail from the zero-padded copy."""
        c, o, p = self.c, self.o, self.pixels
        lines = [
            f"        const float* wp = w0 + q * {c * ROWS}L;",
            f"        long rows = {o}L - q * {ROWS}L < {ROWS}L ? {o}L - q * {ROWS}L : {ROWS}L;",
            f"        float* yq = y + q * {ROWS * p}L;",
            f"        for (long jj = {j}; jj < {full}; jj += OG_PW_TILE) {{",
            f"          long cols = {full} - jj < OG_PW_TILE ? {full} - jj : OG_PW_TILE;",
            "          " + self.px_call(f"wp, x + jj, ldx, {c}L", "jj"),
            "        }",
        ]
        if whole < p:
            lines += [
                f"        if ({je} > {whole}L)",
                "          "
                + self.px_call(f"wp, tail, {TAIL}L, {c}L", f"{whole}L", f"{p - whole}L"),
            ]
        return lines

    def panel_outer_loops(self, whole: int) -> list[str]:
        """Panels outer (:data:`PANEL_OUTER_CHANNELS`): each panel's rows over the unit's
        pixels in one run, its epilogue right after them while they are in L1."""
        o = self.o
        last = f"(q * {ROWS}L + {ROWS}L < {o}L ? q * {ROWS}L + {ROWS}L : {o}L)"
        return [
            f"    long full = p1 < {whole}L ? p1 : {whole}L;",
            "    for (long q = q0; q < q1; ++q) {",
            *self.panel_tiles("p0", "full", "p1", whole),
            *self.epilogue(f"q * {ROWS}L", last, "p0", "p1"),
            "    }",
        ]

    def patch_body(self, pixel_blocks: int, worker: str) -> list[str]:
        """A unit of a ``unit_patches`` step: the patches of its pixels into the thread's
        block ``xb`` (``per`` columns a row, zeros up to whole vectors), then the products
        from it (no tail copy: every row is readable for whole vectors); with
        ``from_planes``, the products from the image's phase planes (``og_pw_pl``, the
        patch rows' offsets in ``<name>_off``: :meth:`offsets`)."""
        s, c, p, per = self.step, self.c, self.pixels, self.per
        steps = _ceil(p, BLOCK_STEP)
        lines = [
            f"    long p0 = {steps}L * pb / {pixel_blocks}L * {BLOCK_STEP}L;",
            f"    long p1 = {steps}L * (pb + 1) / {pixel_blocks}L * {BLOCK_STEP}L;",
            f"    if (p1 > {p}L) p1 = {p}L;",
        ]
        if s.from_planes:
            image = static_all(self.x.shape)[1] * s.strides[1] * s.plane_rows * s.plane_cols
            ldr = s.strides[0] * s.plane_cols
            return [
                *lines,
                f"    const float* pl = scratch + {s.planes_at}L + img * {image}L;",
                *self.patch_products(f"wp, pl, {self.name}_off, jj, {s.images[2]}L, {ldr}L, {c}L"),
            ]  # fmt: skip
        return [
            *lines,
            f"    float* xb = scratch + {worker} * {c * per}L;",
            "    long padded = (p1 - p0 + 15) / 16 * 16;  /* whole vectors (per: 48k) */",
            *self.patch_block(),
            *self.patch_products(f"wp, xb + (jj - p0), {per}L, {c}L"),
        ]

    def offsets(self) -> str:
        """``<name>_off``: where patch row ``r`` (channel, kernel row ``ki``, kernel column
        ``kj``) of an output pixel lies in the image's phase planes (``phase_planes``),
        from the plane place of the pixel (``og_pw_pl``)."""
        s = self.step
        (kh, kw), (sw, (dh, dw)) = s.kernel, (s.strides[1], s.dilations)
        rows, cols = s.plane_rows, s.plane_cols
        off = [
            ((r // (kh * kw) * sw + r % kw * dw % sw) * rows + r // kw % kh * dh) * cols
            + r % kw * dw // sw
            for r in range(self.c)
        ]
        return f"static const long {self.name}_off[{self.c}] = {{{', '.join(map(str, off))}}};"

    def patch_products(self, args: str) -> list[str]:
        """The products and epilogue of a ``unit_patches`` unit, ``args`` the kernel's
        arguments up to its inner dimension (its block ``xb``, or the planes)."""
        c, o, p = self.c, self.o, self.pixels
        last = f"(q1 * {ROWS}L < {o}L ? q1 * {ROWS}L : {o}L)"
        patch_call = self.px_call(args, "jj")
        if c <= PATCH_PANEL_OUTER:
            q_last = f"(q * {ROWS}L + {ROWS}L < {o}L ? q * {ROWS}L + {ROWS}L : {o}L)"
            return [
                "    for (long q = q0; q < q1; ++q) {",
                f"      const float* wp = w0 + q * {c * ROWS}L;",
                f"      long rows = {o}L - q * {ROWS}L < {ROWS}L ? {o}L - q * {ROWS}L : {ROWS}L;",
                f"      float* yq = y + q * {ROWS * p}L;",
                "      for (long jj = p0; jj < p1; jj += OG_PW_TILE) {",
                "        long cols = p1 - jj < OG_PW_TILE ? p1 - jj : OG_PW_TILE;",
                "        " + patch_call,
                "      }",
                *self.epilogue(f"q * {ROWS}L", q_last, "p0", "p1"),
                "    }",
            ]
        return [
            f"    for (long j = p0; j < p1; j += {BLOCK_STEP}L) {{",
            f"      long je = j + {BLOCK_STEP}L < p1 ? j + {BLOCK_STEP}L : p1;",
            "      for (long q = q0; q < q1; ++q) {",
            f"        const float* wp = w0 + q * {c * ROWS}L;",
            f"        long rows = {o}L - q * {ROWS}L < {ROWS}L ? {o}L - q * {ROWS}L : {ROWS}L;",
            f"        float* yq = y + q * {ROWS * p}L;",
            "        for (long jj = j; jj < je; jj += OG_PW_TILE) {",
            "          long cols = je - jj < OG_PW_TILE ? je - jj : OG_PW_TILE;",
            "          " + patch_call,
            "        }",
            "      }",
            "    }",
            *self.epilogue(f"q0 * {ROWS}L", last, "p0", "p1"),
        ]  # fmt: skip

    def patch_block(self) -> list[str]:
        """The patches of pixels ``p0 .. p1`` of image ``x`` into ``xb``: per input channel
        and kernel row, output row by output row, each row's kernel columns one after the
        other from the same input row (``<name>_row<kj>``: :meth:`row_copies`), whole
        output rows as constant-length copies; zeros up to whole vectors."""
        s = self.step
        if s.plane_rows:
            return self.plane_rows_block()
        _, _, ow = s.images
        (kh, kw), (sh, _), (dh, _), (ph, _) = s.kernel, s.strides, s.dilations, s.padding
        h = static_all(self.x.shape[2:])[0]
        xs, per, channels = self.x.strides, self.per, static_all(self.x.shape)[1]
        taps = range(kw)
        whole = [f"{self.name}_row{kj}(d + {kj * per}L, xi, 0, {ow}L);" for kj in taps]
        part = [f"{self.name}_row{kj}(d + {kj * per}L, xi, ja, jb);" for kj in taps]
        return [
            f"    long i0 = p0 / {ow}L, i1 = (p1 - 1) / {ow}L;",
            f"    for (long ch = 0; ch < {channels}L; ++ch) {{",
            f"      const float* xc = x + ch * {xs[1]}L;",
            f"      for (long ki = 0; ki < {kh}L; ++ki) {{",
            f"        float* db = xb + (ch * {kh}L + ki) * {kw * per}L;",
            "        for (long i = i0; i <= i1; ++i) {",
            f"          long ja = i == i0 ? p0 - i0 * {ow}L : 0;",
            f"          long jb = i == i1 ? p1 - i1 * {ow}L : {ow}L;",
            f"          long ii = i * {sh}L + ki * {dh}L - {ph}L;",
            f"          const float* xi = ii >= 0 && ii < {h}L ? xc + ii * {xs[2]}L : 0;",
            f"          float* d = db + (i * {ow}L - p0);  /* d[j]: output column j of row i */",
            f"          if (ja == 0 && jb == {ow}L) {{",
            *["            " + line for line in whole],
            "          } else {",
            *["            " + line for line in part],
            "          }",
            "        }",
            f"        for (long kj = 0; kj < {kw}L; ++kj)",
            f"          for (long t = p1 - p0; t < padded; ++t) db[kj * {per}L + t] = 0.0f;",
            "      }",
            "    }",
        ]

    def row_copies(self) -> list[str]:
        """``<name>_row<kj>``: output columns ``ja .. jb`` of one output row of kernel column
        ``kj``'s patch row from input row ``xi`` (0: a padding row), zeros where the window
        reads padding; inlined, so that whole rows (``0 .. ow``) are constant-length loops.
        On AVX-512, stride-2 rows of at most :data:`ROW_VECTOR_COLUMNS` dense columns
        (:meth:`vector_row`)."""
        s = self.step
        (sw, dw, pw), w = (s.strides[1], s.dilations[1], s.padding[1]), static_all(self.x.shape)[3]
        xs3, ow = self.x.strides[3], s.images[2]
        vector = sw == 2 and xs3 == 1 and ow <= ROW_VECTOR_COLUMNS
        lines = [f"typedef int {self.name}_i __attribute__((vector_size(64)));"] if vector else []
        for kj in range(s.kernel[1]):
            off = kj * dw - pw
            # output columns j0 .. j1 read inside the row: j * sw + off in [0, w)
            j0 = 0 if off >= 0 else _ceil(-off, sw)
            j1 = max(j0, 0 if w - off <= 0 else _ceil(w - off, sw))
            scalar = [
                "  if (!xi) {",
                "    for (long j = ja; j < jb; ++j) d[j] = 0.0f;",
                "    return;",
                "  }",
                f"  long lo = ja > {j0}L ? ja : {j0}L, hi = jb < {j1}L ? jb : {j1}L;",
                "  if (hi < lo) hi = lo = jb;",
                "  for (long j = ja; j < lo; ++j) d[j] = 0.0f;",
                f"  for (long j = lo; j < hi; ++j) d[j] = xi[j * {sw * xs3}L + {off * xs3}L];",
                "  for (long j = hi; j < jb; ++j) d[j] = 0.0f;",
            ]
            if vector:
                scalar = ["#if defined(__AVX512F__)", *self.vector_row(off, w), "#else",
                          *scalar, "#endif"]  # fmt: skip
            lines += [
                "static inline __attribute__((always_inline)) void "
                f"{self.name}_row{kj}(float* restrict d, const float* restrict xi, long ja, "
                "long jb) {",
                *scalar,
                "}",
            ]
        return lines

    def vector_row(self, off: int, w: int) -> list[str]:
        """The AVX-512 body of a stride-2 ``<name>_row<kj>`` (input column ``2j + off`` of
        ``w``): per 16 output columns, two masked loads of the input row (zeros outside it)
        and their even lanes, stored under the mask of ``ja .. jb``: no scalar runs."""
        evens = ", ".join(str(2 * lane) for lane in range(16))
        lines = [
            "  typedef float v16 __attribute__((vector_size(64)));",
            "  const v16 z = {0};",
            "  unsigned run = (unsigned)((1ull << jb) - (1ull << ja));  /* columns ja .. jb */",
        ]
        for h in range(_ceil(self.step.images[2], 16)):
            at = 32 * h + off
            lo, hi = (sum(1 << e for e in range(16) if 0 <= b + e < w) for b in (at, at + 16))
            lines += [
                "  {",
                "    v16 v = z;",
                f"    if (xi) v = __builtin_shuffle(__builtin_ia32_loadups512_mask(xi + {at}L, z, "
                f"{lo}), __builtin_ia32_loadups512_mask(xi + {at + 16}L, z, {hi}), "
                f"({self.name}_i){{{evens}}});",
                f"    __builtin_ia32_storeups512_mask(d + {16 * h}L, v, "
                f"(unsigned short)(run >> {16 * h}));",
                "  }",
            ]
        return lines

    def plane_rows_block(self) -> list[str]:
        """:meth:`patch_block` from the padded phase planes (``fused/lowering/pointwise.py``
        ``phase_planes``): each output row's run is a copy of a plane row."""
        s = self.step
        _, _, ow = s.images
        (kh, kw), (sh, sw), (dh, dw), _ = s.kernel, s.strides, s.dilations, s.padding
        rows, cols, channels = s.plane_rows, s.plane_cols, static_all(self.x.shape)[1]
        return [
            f"    for (long r = 0; r < {self.c}L; ++r) {{",
            f"      long ki = r / {kw}L % {kh}L, kj = r % {kw}L;",
            f"      const float* pl = scratch + {s.planes_at}L + ((img * {channels}L + "
            f"r / {kh * kw}L) * {sw}L + kj * {dw}L % {sw}L) * {rows * cols}L "
            f"+ ki * {dh * cols}L + kj * {dw}L / {sw}L;",
            f"      float* d = xb + r * {self.per}L;",
            "      for (long pp = p0; pp < p1;) {",
            f"        long i = pp / {ow}L, ja = pp % {ow}L;",
            f"        long jb = ja + (p1 - pp) < {ow}L ? ja + (p1 - pp) : {ow}L;",
            f"        const float* restrict src = pl + i * {sh * cols}L;",
            "        float* restrict dst = d + pp - p0;",
            "        for (long j = ja; j < jb; ++j) dst[j - ja] = src[j];",
            "        pp += jb - ja;",
            "      }",
            "      for (long t = p1 - p0; t < padded; ++t) d[t] = 0.0f;",
            "    }",
        ]

    def planes(self) -> list[str]:
        """``<name>_planes``: units (image, input channel, plane row), each writing that row
        of every phase plane (zeros where it reads padding)."""
        s = self.step
        (sw, (ph, pw)) = (s.strides[1], s.padding)
        rows, cols = s.plane_rows, s.plane_cols
        _, channels, h, w = static_all(self.x.shape)
        xs = self.x.strides
        return [
            f"static int {self.name}_planes(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.scratch, "scratch", False),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {channels * rows}L, ch = u / {rows}L % {channels}L;",
            f"    long row = u % {rows}L, ii = row - {ph}L;",
            f"    const float* xi = x0 + img * {xs[0]}L + ch * {xs[1]}L + ii * {xs[2]}L;",
            f"    for (long q = 0; q < {sw}L; ++q) {{",
            f"      float* d = scratch + {s.planes_at}L + ((u / {rows}L) * {sw}L + q) * "
            f"{rows * cols}L + row * {cols}L;",
            # plane columns J0 .. J1 read inside the row: J * sw + q - pw in [0, w)
            f"      long j0 = q >= {pw}L ? 0 : ({pw}L - q + {sw - 1}L) / {sw}L;",
            f"      long j1 = ({w + pw}L - q + {sw - 1}L) / {sw}L;",
            f"      if (j1 > {cols}L) j1 = {cols}L;",
            f"      if (ii < 0 || ii >= {h}L || j0 > j1) j0 = j1 = {cols}L;",
            "      for (long j = 0; j < j0; ++j) d[j] = 0.0f;",
            f"      for (long j = j0; j < j1; ++j) d[j] = xi[(j * {sw}L + q - {pw}L) * {xs[3]}L];",
            f"      for (long j = j1; j < {cols}L; ++j) d[j] = 0.0f;",
            "    }",
            "  }",
            "  return 0;",
            "}",
        ]

    def channel_body(self, pixel_blocks: int) -> list[str]:
        c, o, p = self.c, self.o, self.pixels
        # blocks of whole RB_MAX-pixel tiles but the last: a block's rest runs in smaller
        # tiles, each a full pass over the inner dimension (196 pixels in 4 blocks of 49:
        # 20 passes of 12 pixels or fewer; in blocks of 48, 48, 48, 52: 17)
        steps = _ceil(p, RB_MAX)
        return [
            f"    long p0 = {steps}L * pb / {pixel_blocks}L * {RB_MAX}L;",
            f"    long p1 = {steps}L * (pb + 1) / {pixel_blocks}L * {RB_MAX}L;",
            f"    if (p1 > {p}L) p1 = {p}L;",
            "    for (long q = q0; q < q1; ++q) {",
            f"      long valid = {o}L - q * {PANEL}L < {PANEL}L ? {o}L - q * {PANEL}L : {PANEL}L;",
            f"      {self.ch_call(f'w0 + q * {c * PANEL}L, x, ldx, {c}L', f'q * {PANEL * p}L')}",
            *[
                "  " + line
                for line in self.epilogue(f"q * {PANEL}L", f"q * {PANEL}L + valid", "p0", "p1")
            ],
            "    }",
        ]

    def compact(self) -> list[str]:
        """``<name>_compact``: units (image, row of the patch matrix: input channel, kernel
        row, kernel column); the pixels the filters read, dense, zeros where a window reads
        padding (a 1x1 unpadded step: the strided pixels)."""
        s = self.step
        c, p = self.c, self.pixels
        kh, kw = s.kernel
        xs = self.x.strides
        at = self.module.num_threads * c * TAIL
        return [
            f"static int {self.name}_compact(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.scratch, "scratch", False),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long r = u % {c}L, ki = r / {kw}L % {kh}L, kj = r % {kw}L;",
            f"    const float* x = x0 + (u / {c}L) * {xs[0]}L + r / {kh * kw}L * {xs[1]}L;",
            f"    float* d = scratch + {at}L + u * {p}L;",
            *self.patch_row(),
            "  }",
            "  return 0;",
            "}",
        ]

    def patch_row(self) -> list[str]:
        """The loops of one patch row ``d`` (kernel tap ``ki``, ``kj`` of channel ``x``)."""
        s = self.step
        _, oh, ow = s.images
        (kh, kw), (sh, sw), (dh, dw), (ph, pw) = s.kernel, s.strides, s.dilations, s.padding
        h, w = static_all(self.x.shape[2:])
        xs = self.x.strides
        if (kh, kw, ph, pw) == (1, 1, 0, 0):
            return [
                f"    for (long i = 0; i < {oh}L; ++i)",
                f"      for (long j = 0; j < {ow}L; ++j)",
                f"        d[i * {ow}L + j] = x[i * {sh * xs[2]}L + j * {sw * xs[3]}L];",
            ]
        # output columns j0 .. j1 read inside the row: j * sw + kj * dw - pw in [0, w)
        return [
            f"    long off = kj * {dw}L - {pw}L;",
            f"    long j0 = off >= 0 ? 0 : (-off + {sw - 1}L) / {sw}L;",
            f"    long j1 = {w}L - off <= 0 ? 0 : ({w}L - off + {sw - 1}L) / {sw}L;",
            f"    if (j1 > {ow}L) j1 = {ow}L;",
            "    if (j0 > j1) j0 = j1;",
            f"    for (long i = 0; i < {oh}L; ++i) {{",
            f"      float* di = d + i * {ow}L;",
            f"      long ii = i * {sh}L + ki * {dh}L - {ph}L;",
            f"      if (ii < 0 || ii >= {h}L) {{",
            f"        for (long j = 0; j < {ow}L; ++j) di[j] = 0.0f;",
            "        continue;",
            "      }",
            f"      const float* xi = x + ii * {xs[2]}L;",
            "      for (long j = 0; j < j0; ++j) di[j] = 0.0f;",
            f"      for (long j = j0; j < j1; ++j) di[j] = xi[(j * {sw}L + off) * {xs[3]}L];",
            f"      for (long j = j1; j < {ow}L; ++j) di[j] = 0.0f;",
            "    }",
        ]


def _emit(
    step: PointwiseConvStep, i: int, module: ModuleContext
) -> tuple[str, str, tuple[Check, ...]]:
    checks: list[Check] = []
    text = PointwiseConvEmitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


def _to_bf16(step: PointwiseConvStep, buffers: list[Buffer]) -> Step:
    """In bf16 mode: the plain 1x1 :class:`~opgraph.backends.cpu.codegen.bf16.Bf16ConvStep`
    (the image as the right operand of ``og_sgemm_bf16``) when the image is read in place;
    else ``step`` unchanged (f32)."""
    assert step.w is not None
    buffer = buffers[step.w.buffer]
    if step.compact or buffer.kind is not BufferKind.CONST or buffer.data is None:
        return step
    c, o = static_all(step.w.shape)
    width = PANEL if step.channels_first else ROWS
    packed = np.asarray(buffer.data, np.float32).reshape(-1, c, width)
    matrix = packed.transpose(0, 2, 1).reshape(-1, c)[:o]  # W (O x C)
    if not np.isfinite(matrix).all():
        return step
    data = bf16._left_matrix(matrix)
    w = View(bf16._add_constant(buffers, data, f"{buffer.label} (bf16)"), et.bf16, (o, c),
             (c, 1), 0)  # fmt: skip
    fields = {f.name: getattr(step, f.name) for f in dataclasses.fields(ConvStep)}
    rows = max(1, -(-step.images[1] // 4))  # a few row blocks to share out
    return bf16.Bf16ConvStep(**{**fields, "w": w, "block_rows": rows, "scratch": None})


bf16.CONVERSIONS[PointwiseConvStep] = _to_bf16


#: The C generators of :class:`PointwiseConvStep` (``codegen/module.py`` STEP_EMITTERS).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], tuple[str, str, tuple[Check, ...]]]] = {
    PointwiseConvStep: _emit,
}
