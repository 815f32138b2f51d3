"""Generate the C of a :class:`PanelConvStep` (a convolution with few output pixels as a
product by filters packed at compile time; see ``fused/lowering/conv_panels.py``).

Two phases over the thread pool: the patches (one unit per output pixel: its row of
C·kh·kw values, zeros for the padding), then the product by blocks of output-channel panels
(``og_gemm_panels`` into ``Yᵀ``), each block transposed into the output plane and its
epilogue run on those rows (in AVX2 builds one ``og_gemm_panels`` call per panel:
:data:`PANEL_BY_PANEL`). In bf16 mode (``codegen/bf16.py``) the panels become bf16 pair
panels read by ``og_gemm_bf16_panels`` (:class:`Bf16PanelConvStep`, registered here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen import bf16
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.vector_math import AVX2_ONLY
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.fused.lowering.conv_panels import PANEL, PanelConvStep
from opgraph.backends.fused.program import Buffer, BufferKind, Step
from opgraph.backends.fused.views import View, static, static_all
from opgraph.core import element_type as et

#: Patch elements from which the patch phase is shared between threads.
PARALLEL_PATCHES = 1 << 15
#: Whether a pixel whose window's columns lie inside the image copies its taps at constant
#: offsets (``PanelConvEmitter.window_copy``) instead of testing each tap's column.
INSIDE_PATCHES = True
#: The preprocessor test of builds whose unit multiplies its block one panel at a time.
#: ``og_gemm_panels`` over several panels runs panels outer, K blocks outermost: it jumps
#: from one panel's K block to the next panel's (4608 x 128 bytes apart in ResNet-18's
#: 7x7x512 layers), and AVX2's 6 x 16 tile, which reads twice AVX-512's bytes of panel per
#: multiply-add, waits on those first reads. One panel per call reads each panel front to
#: back (rows outer). C harness, one thread, 49 x 4608 x 512 in units of 64 columns: 74-84
#: GF/s by two panels, 90-92 by one (AVX-512: 108-112 either way, so it keeps its calls).
PANEL_BY_PANEL = AVX2_ONLY


class PanelConvEmitter:
    """``<name>_patches``, ``<name>_gemm`` and ``<name>_run`` of a :class:`PanelConvStep`."""

    def __init__(
        self, step: PanelConvStep, name: str, module: ModuleContext, checks: list[Check]
    ) -> None:
        assert step.x is not None and step.w is not None and step.out is not None
        assert step.scratch is not None
        self.step, self.name, self.module, self.checks = step, name, module, checks
        self.x, self.w, self.out, self.scratch = step.x, step.w, step.out, step.scratch

    gemm = "og_gemm_panels"

    def emit(self) -> str:
        self.module.gemm_panels()
        s = self.step
        k, o = static_all(self.w.shape)
        n, oh, ow = (static(s.images[0]), s.images[1], s.images[2])
        columns = n * oh * ow
        panels = -(-o // PANEL)
        threads = self.module.num_threads
        blocks = min(panels, max(2, 4 * threads))
        per = -(-panels // blocks)
        units = -(-panels // per)
        head = [f"/* {self.name}: panel convolution: {s.label.replace('*/', '* /')} */"]
        if s.epilogue is not None:
            label = "epilogue of " + self.name
            ep = CLoopEmitter(s.epilogue, f"{self.name}_ep", self.module, label, self.checks)
            head.append(ep.emit())
        body = [
            *self.patches(k, columns),
            f"static int {self.name}_gemm(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.scratch, "scratch", False),
            f"  float* yt = scratch + {columns * k}L;",
            "  for (long u = lo; u < hi; ++u) {",
            f"    long n0 = u * {per * PANEL}L;",
            f"    long n1 = n0 + {per * PANEL}L < {o}L ? n0 + {per * PANEL}L : {o}L;",
            *self.product(k, o, columns),
            *self.transpose(o, columns),
            *self.epilogue(columns),
            "  }",
            "  return err;",
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            "  int err = 0;",
            self.patch_phase(k, columns),
            self.phase(f"{self.name}_gemm", units, columns * k * o >= PARALLEL_MACS),
            "  return err;",
            "}",
        ]
        return "\n".join(head + body)

    panels = "w0"
    #: Whether builds matching :data:`PANEL_BY_PANEL` call the GEMM once per panel.
    by_panel = True

    def product(self, k: int, o: int, columns: int) -> list[str]:
        """The lines of a unit's product: ``Yᵀ[:, n0:n1]`` into ``yt``."""
        whole = f"{self.gemm}(scratch, {k}L, {self.panels}, yt, {o}L, {columns}L, {k}L"
        if not self.by_panel:
            return [f"    {whole}, n0, n1);"]
        return [
            f"#if {PANEL_BY_PANEL}",
            f"    for (long p0 = n0; p0 < n1; p0 += {PANEL})",
            f"      {whole}, p0, p0 + {PANEL} < n1 ? p0 + {PANEL} : n1);",
            "#else",
            f"    {whole}, n0, n1);",
            "#endif",
        ]

    def patch_phase(self, k: int, columns: int) -> str:
        """The line running ``<name>_patches`` (a unit per output pixel)."""
        return self.phase(f"{self.name}_patches", columns, columns * k >= PARALLEL_PATCHES)

    def transpose(self, o: int, columns: int) -> list[str]:
        """``Yᵀ[:, n0:n1]`` into the unit's output rows, a pixel's contiguous channels at a
        time: column by column, ``Yᵀ``'s rows (``o`` floats apart: 1 KiB at 256 channels)
        fall in a few L1 sets and missed on every read (one thread, bf16 128->256 stride 2
        at 28x28: 10 % of the step by ``perf``)."""
        return [
            f"    for (long q = 0; q < {columns}L; ++q)",
            "      for (long oc = n0; oc < n1; ++oc)",
            f"        y0[oc * {self.out.strides[0]}L + q] = yt[q * {o}L + oc];",
        ]

    def epilogue(self, columns: int) -> list[str]:
        if self.step.epilogue is None:
            return []
        at = f"oc * {self.out.strides[0]}L"
        return [
            "    for (long oc = n0; oc < n1; ++oc)",
            f"      err |= {self.name}_ep(T, A, {at}, {at} + {columns}L);",
        ]

    def phase(self, fn: str, units: int, parallel: bool) -> str:
        threads = self.module.num_threads
        if parallel and units > 1 and threads > 1:
            self.module.uses_pool = True
            return f"  err |= og_parallel({fn}, T, A, {units}L, 1L, {threads});"
        return f"  err |= {fn}(T, A, 0, {units}L);"

    def patches(self, k: int, columns: int) -> list[str]:
        """``<name>_patches``: units are output pixels (image-major); each writes its row
        of ``k`` patch values (channel, filter row, filter column) to the scratch. A pixel
        whose window lies inside the image copies it without tests (:data:`INSIDE_PATCHES`),
        one whose columns do tests only its rows; the others test every tap."""
        s = self.step
        c, h, w = static_all(self.x.shape[1:])
        _, oh, ow = s.images
        (kh, kw), (sh, sw), (dh, dw), (pt, pl) = s.kernel, s.strides, s.dilations, s.padding
        xs = self.x.strides
        inside = [
            f"    long ih0 = i * {sh}L - {pt}L, iw0 = j * {sw}L - {pl}L;",
            f"    int rows_in = ih0 >= 0 && ih0 + {(kh - 1) * dh}L < {h}L;",
            f"    if (iw0 >= 0 && iw0 + {(kw - 1) * dw}L < {w}L) {{",
            "      if (rows_in) {",
            *self.window_copy(c, h, False),
            "      } else {",
            *self.window_copy(c, h, True),
            "      }",
            "      continue;",
            "    }",
        ]
        return [
            f"static int {self.name}_patches(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.scratch, "scratch", False),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {oh * ow}L, i = (u / {ow}L) % {oh}L, j = u % {ow}L;",
            f"    const float* x = x0 + img * {xs[0]}L;",
            f"    float* row = scratch + u * {k}L;",
            *(inside if INSIDE_PATCHES else []),
            f"    for (long ch = 0; ch < {c}L; ++ch) {{",
            f"      const float* xc = x + ch * {xs[1]}L;",
            f"      for (long a = 0; a < {kh}L; ++a) {{",
            f"        long ih = i * {sh}L - {pt}L + a * {dh}L;",
            f"        float* d = row + (ch * {kh}L + a) * {kw}L;",
            f"        if (ih < 0 || ih >= {h}L) {{",
            f"          for (long b = 0; b < {kw}L; ++b) d[b] = 0.0f;",
            "          continue;",
            "        }",
            f"        const float* r = xc + ih * {xs[2]}L;",
            f"        for (long b = 0; b < {kw}L; ++b) {{",
            f"          long iw = j * {sw}L - {pl}L + b * {dw}L;",
            f"          d[b] = iw >= 0 && iw < {w}L ? r[iw * {xs[3]}L] : 0.0f;",
            "        }",
            "      }",
            "    }",
            "  }",
            "  return 0;",
            "}",
        ]

    def window_copy(self, c: int, h: int, rows_checked: bool) -> list[str]:
        """The copy of a pixel's window whose columns lie inside the image (``ih0``, ``iw0``:
        its first input row and column), every tap at a constant offset from its row's first;
        ``rows_checked``: rows outside the image (``h`` rows) written as zeros."""
        (kh, kw), (dh, dw), xs = self.step.kernel, self.step.dilations, self.x.strides
        taps = f"for (long b = 0; b < {kw}L; ++b) d[b] = r[b * {dw * xs[3]}L];"
        zeros = f"for (long b = 0; b < {kw}L; ++b) d[b] = 0.0f;"
        check = f"if (ih < 0 || ih >= {h}L) {{ {zeros} continue; }}"
        return [
            f"        for (long ch = 0; ch < {c}L; ++ch)",
            f"          for (long a = 0; a < {kh}L; ++a) {{",
            f"            long ih = ih0 + a * {dh}L;",
            f"            float* d = row + (ch * {kh}L + a) * {kw}L;",
            *([f"            {check}"] if rows_checked else []),
            f"            const float* r = x + ch * {xs[1]}L + ih * {xs[2]}L + iw0 * {xs[3]}L;",
            f"            {taps}",
            "          }",
        ]


@dataclasses.dataclass(eq=False)
class Bf16PanelConvStep(PanelConvStep):
    """A :class:`PanelConvStep` whose ``w`` is a bf16 pair-panel constant (bf16 mode)."""


class Bf16PanelConvEmitter(PanelConvEmitter):
    """``og_gemm_bf16_panels`` (bf16 pairs, f32 accumulation) instead of ``og_gemm_panels``."""

    gemm = "og_gemm_bf16_panels"
    panels = "(const uint16_t*)w0"
    by_panel = False  # bf16 mode generates AVX-512 code only

    def emit(self) -> str:
        self.module.helper("gemm_bf16")
        return super().emit()


def _to_bf16(step: PanelConvStep, buffers: list[Buffer]) -> Step:
    """``step`` with its panels as bf16 pair panels (unchanged when they are not finite)."""
    assert step.w is not None
    buffer = buffers[step.w.buffer]
    if buffer.kind is not BufferKind.CONST or buffer.data is None:
        return step
    k, o = static_all(step.w.shape)
    packed = np.asarray(buffer.data, np.float32).reshape(-1, k, PANEL)
    matrix = packed.transpose(1, 0, 2).reshape(k, -1)[:, :o]  # Wᵀ (K x O)
    if not np.isfinite(matrix).all():
        return step
    data = bf16._pair_panels(matrix, PANEL)
    w = View(bf16._add_constant(buffers, data, f"{buffer.label} (bf16 pairs)"), et.bf16,
             (k, o), (0, 0), 0)  # fmt: skip
    return Bf16PanelConvStep(**{**bf16._fields(step), "w": w})


bf16.CONVERSIONS[PanelConvStep] = _to_bf16


def _emit(step: PanelConvStep, i: int, module: ModuleContext) -> tuple[str, str, tuple[Check, ...]]:
    checks: list[Check] = []
    emitter = Bf16PanelConvEmitter if isinstance(step, Bf16PanelConvStep) else PanelConvEmitter
    text = emitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


#: The C generators of :class:`PanelConvStep` (``codegen/module.py`` STEP_EMITTERS).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], tuple[str, str, tuple[Check, ...]]]] = {
    PanelConvStep: _emit,
    Bf16PanelConvStep: _emit,
}
