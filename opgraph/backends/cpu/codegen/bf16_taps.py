"""bf16 panel convolutions by filter taps, without the padding's zeros
(:class:`Bf16TapConvStep`).

A :class:`PanelConvStep` in bf16 mode (``codegen/conv_panels.py``) builds every output
pixel's patch, zeros of the padding included, and multiplies the whole patch matrix by the
filters: at ResNet-18's last stage (3x3, 7x7 pixels) 18 % of its products are by those
zeros (361 of 441 pixel-tap pairs are inside the image). Here the filters' inner dimension
is ordered (filter row, filter column, channel), and the input is first rounded to bf16 in
an (image, row, column, channel) layout (``<name>_xt``, in the patches' scratch). The
product of one tap, for one output row, is then a micro-kernel tile whose left operand is
the input row itself (pixels ``stride`` apart, channels contiguous) and whose columns are
only those the tap reads inside the image: no patches are built and no zero is multiplied.
The tile of a row is its run of valid output columns (7 at 7x7, rows of the shared 12x32
``vdpbf16ps`` micro-kernels of ``codegen/bf16.py``); a tap valid everywhere (the centre
one) runs first and stores, the others accumulate. ``Yᵀ``, its transposition into the
output and the epilogue are the panel convolution's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen import bf16, conv_panels
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.conv_panels import (
    PARALLEL_PATCHES,
    Bf16PanelConvEmitter,
    Bf16PanelConvStep,
)
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.fused.lowering.conv_panels import PANEL, PanelConvStep
from opgraph.backends.fused.program import Buffer, BufferKind, Step
from opgraph.backends.fused.views import View, static_all
from opgraph.core import element_type as et

#: Channels per inner block of a tap (the panel slice, ``DEPTH`` x 32 bf16: 32 KiB at 512).
DEPTH = 512


@dataclasses.dataclass(eq=False)
class Bf16TapConvStep(Bf16PanelConvStep):
    """A :class:`Bf16PanelConvStep` whose pair panels order the inner dimension (filter row,
    filter column, channel): run tap by tap on the input rounded to bf16 (module docstring)."""


Tap = tuple[int, int, int, int, int, int]


def taps(step: PanelConvStep) -> list[Tap]:
    """(filter row, filter column, first and end output row, first and end output column)
    of each tap reading some pixel inside the image, in the order they run: a tap valid at
    every output pixel first (when there is one)."""
    assert step.x is not None
    h, w = static_all(step.x.shape[2:])
    _, oh, ow = step.images
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = step.kernel, step.strides, step.dilations, step.padding

    def span(size: int, outs: int, stride: int, pad: int, at: int) -> tuple[int, int]:
        inside = [i for i in range(outs) if 0 <= i * stride - pad + at < size]
        return (inside[0], inside[-1] + 1) if inside else (0, 0)

    result = []
    for a in range(kh):
        i0, i1 = span(h, oh, sh, pt, a * dh)
        for b in range(kw):
            j0, j1 = span(w, ow, sw, pl, b * dw)
            if i1 > i0 and j1 > j0:
                result.append((a, b, i0, i1, j0, j1))
    full = [t for t in result if (t[2], t[3], t[4], t[5]) == (0, oh, 0, ow)]
    return full[:1] + [t for t in result if t not in full[:1]]


def applies(step: PanelConvStep) -> bool:
    """Whether ``step`` can run by taps: 2-D, an even channel count (each tap's block starts
    on a pair), and the input in bf16 no larger than the f32 patches it replaces."""
    if step.x is None or len(step.x.shape) != 4 or len(step.kernel) != 2:
        return False
    n, c, h, w = static_all(step.x.shape)
    k, _ = static_all(step.w.shape) if step.w is not None else (0, 0)
    columns = static_all((step.images[0],))[0] * step.images[1] * step.images[2]
    return c % 2 == 0 and 2 * n * c * h * w <= 4 * columns * k and bool(taps(step))


def _to_bf16(step: PanelConvStep, buffers: list[Buffer]) -> Step:
    """``step`` as a :class:`Bf16TapConvStep` when it :func:`applies`, else the plain bf16
    panel convolution (``conv_panels._to_bf16``)."""
    assert step.w is not None and step.x is not None
    buffer = buffers[step.w.buffer]
    if not applies(step) or buffer.kind is not BufferKind.CONST or buffer.data is None:
        return conv_panels._to_bf16(step, buffers)
    k, o = static_all(step.w.shape)
    c = static_all(step.x.shape)[1]
    kh, kw = step.kernel
    packed = np.asarray(buffer.data, np.float32).reshape(-1, k, PANEL)
    matrix = packed.transpose(1, 0, 2).reshape(k, -1)[:, :o]  # Wᵀ, inner (channel, row, col)
    if not np.isfinite(matrix).all():
        return step
    matrix = matrix.reshape(c, kh, kw, o).transpose(1, 2, 0, 3).reshape(k, o)
    data = bf16._pair_panels(matrix, PANEL)
    label = f"{buffer.label} (bf16 pairs by tap)"
    w = View(bf16._add_constant(buffers, data, label), et.bf16, (k, o), (0, 0), 0)
    return Bf16TapConvStep(**{**bf16._fields(step), "w": w})


class Bf16TapConvEmitter(Bf16PanelConvEmitter):
    """``<name>_xt`` (the input in bf16, channels last) instead of the patches, and a unit's
    product tap by tap and row by row (module docstring)."""

    def patches(self, k: int, columns: int) -> list[str]:
        _, c, h, w = static_all(self.x.shape)
        xs = self.x.strides
        return [
            f"static int {self.name}_xt(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.scratch, "scratch", False),
            "  uint32_t* xt = (uint32_t*)scratch;",
            "  for (long u = lo; u < hi; ++u) {",
            f"    const float* x = x0 + (u / {h}L) * {xs[0]}L + (u % {h}L) * {xs[2]}L;",
            f"    uint32_t* d = xt + u * {w * c // 2}L;",
            f"    for (long ch = 0; ch < {c}L; ch += 2) {{",
            f"      const float* lo_ = x + ch * {xs[1]}L;",
            f"      const float* hi_ = lo_ + {xs[1]}L;",
            f"      for (long j = 0; j < {w}L; ++j)",
            f"        d[j * {c // 2}L + ch / 2] = og_bf16_bits(lo_[j * {xs[3]}L]) |",
            f"            og_bf16_bits(hi_[j * {xs[3]}L]) << 16;",
            "    }",
            "  }",
            "  return 0;",
            "}",
        ]

    def patch_phase(self, k: int, columns: int) -> str:
        n, c, h, w = static_all(self.x.shape)
        return self.phase(f"{self.name}_xt", n * h, n * c * h * w >= PARALLEL_PATCHES)

    def product(self, k: int, o: int, columns: int) -> list[str]:
        s = self.step
        n, c, h, w = static_all(self.x.shape)
        _, oh, ow = s.images
        (_, kw), (sh, sw), (dh, dw), (pt, pl) = s.kernel, s.strides, s.dilations, s.padding
        order = taps(s)
        full = (order[0][2], order[0][3], order[0][4], order[0][5]) == (0, oh, 0, ow)
        rows = ", ".join("{" + ", ".join(str(v) for v in t) + "}" for t in order)
        cases = " ".join(
            f"case {r}: og_bf16_mkp{r}(ar + r0 * {sw * c}L, {sw * c}L, bp, kp, cr + r0 * {o}L, "
            f"{o}L, valid, acc, pf, lines); break;"
            for r in range(bf16.ROWS, 0, -1)
        )
        zero = [] if full else [
            f"    for (long q = 0; q < {columns}L; ++q)",
            f"      __builtin_memset(yt + q * {o}L + n0, 0, (unsigned long)(n1 - n0) * 4);",
        ]  # fmt: skip
        return [
            f"    static const short taps[{len(order)}][6] = {{{rows}}};",
            "    const uint32_t* panels = (const uint32_t*)w0;",
            "    const uint16_t* xt = (const uint16_t*)scratch;",
            *zero,
            "    for (long nb = n0 / 32; nb < (n1 + 31) / 32; ++nb) {",
            "      long valid = n1 - nb * 32 < 32 ? n1 - nb * 32 : 32;",
            f"      for (long t = 0; t < {len(order)}L; ++t) {{",
            "        const short* p = taps[t];",
            f"        for (long c0 = 0; c0 < {c}L; c0 += {DEPTH}L) {{",
            f"          long kp = ((c0 + {DEPTH}L < {c}L ? c0 + {DEPTH}L : {c}L) - c0) / 2;",
            f"          const uint32_t* bp = panels + (nb * {-(-k // 2)}L"
            f" + ((p[0] * {kw}L + p[1]) * {c}L + c0) / 2) * 32;",
            f"          int acc = {'t > 0 || c0 > 0' if full else '1'};",
            "          long m = p[5] - p[4], tile = og_bf16_tile(m);",
            *_next_panel(k, o, c, len(order), n),
            f"          for (long img = 0; img < {n}L; ++img)",
            "          for (long i = p[2]; i < p[3]; ++i) {",
            "            long at = (first + (img * (p[3] - p[2]) + i - p[2]) * each) * 64;",
            "            long lines = !more || at >= end ? 0 : (end - at) / 64;",
            "            if (lines > each) lines = each;",
            f"            long ih = i * {sh}L - {pt}L + p[0] * {dh}L;",
            f"            long iw = p[4] * {sw}L - {pl}L + p[1] * {dw}L;",
            f"            const uint16_t* ar = xt + ((img * {h}L + ih) * {w}L + iw) * {c}L + c0;",
            f"            float* cr = yt + (img * {oh * ow}L + i * {ow}L + p[4]) * {o}L + nb * 32;",
            "            for (long r0 = 0; r0 < m; r0 += tile, at += kp * 64, lines -= kp) {",
            "              const char* pf = ahead + (lines > 0 ? at : 0);",
            "              int r = m - r0 < tile ? (int)(m - r0) : (int)tile;",
            f"              switch (r) {{ {cases} default: break; }}",
            "            }",
            "          }",
            "        }",
            "      }",
            "    }",
        ]


def ahead_share(k: int, c: int, count: int) -> tuple[int, int]:
    """(bytes of one 32-column pair panel of a ``k``-deep filter matrix, cache lines of the
    next panel each of the ``count`` taps' channel blocks prefetches): their shares cover
    the panel."""
    size = -(-k // 2) * 32 * 4
    return size, -(-size // (64 * count * -(-c // DEPTH)))


def _next_panel(k: int, o: int, c: int, count: int, n: int) -> list[str]:
    """Lines that set the prefetch of the next 32-column pair panel (``ahead``, ``end`` its
    bytes; ``more``: whether there is one): each (tap, channel block) of this panel fetches
    its share (:func:`ahead_share`), ``each`` cache lines a row from line ``first``, by the
    micro-kernels (``og_bf16_mkp``: one line a step, not a burst) while its rows run on the
    current panel. The weights of the late stages are not in L2 when their step starts."""
    size, share = ahead_share(k, c, count)
    return [
        f"          int more = nb + 1 < {-(-o // 32)}L;",
        f"          const char* ahead = (const char*)(panels + (nb + more) * {size // 4}L);",
        f"          long end = {size}L, rows = {n}L * (p[3] - p[2]);",
        f"          long each = ({share}L + rows - 1) / rows;",
        f"          long first = (t * {-(-c // DEPTH)}L + c0 / {DEPTH}L) * {share}L;",
    ]


bf16.CONVERSIONS[PanelConvStep] = _to_bf16


def _emit(
    step: Bf16TapConvStep, i: int, module: ModuleContext
) -> tuple[str, str, tuple[Check, ...]]:
    checks: list[Check] = []
    text = Bf16TapConvEmitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


#: The C generator of :class:`Bf16TapConvStep` (``codegen/module.py`` STEP_EMITTERS).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], tuple[str, str, tuple[Check, ...]]]] = {
    Bf16TapConvStep: _emit,
}
