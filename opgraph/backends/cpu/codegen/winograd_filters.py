"""Generate the C of a :class:`WinogradFilterGradientStep`: the filter gradient of a 3x3
stride-1 convolution by Winograd F(3x3, 2x2), the transpose of the forward's F(2x2, 3x3).

``dW[o, c, i, j] = Σ_{n, p, q} x̂[n, c, p + i, q + j] · dy[n, o, p, q]`` is, per 2x2 tile of
cotangent pixels, a correlation of the 4x4 data tile under it with the 2x2 cotangent tile:
``dW = Gᵀ [Σ_tiles (A g Aᵀ) ⊙ (Bᵀ d B)] G`` (the forward's matrices in transposed roles).

Pass 1, one unit per part (a range of images): for each block of tile rows of an image,

1. the data transform ``V[α][c][tile] = (Bᵀ d B)[α]`` from zero-padded copies of the four
   input rows of each tile row (vectorized across tiles, as the forward's padded transform);
2. the cotangent transform ``D[α][o][tile] = (A g Aᵀ)[α]``;
3. 16 GEMMs ``M[α] (O x C) (+)= D[α] · V[α]ᵀ`` into the part's accumulator.

Pass 2, one unit per output channel: the parts' accumulators summed and the taps
``Gᵀ M G`` written into ``dW``. The transforms are generated from the matrices below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.fused.conv_backprop import WinogradFilterGradientStep
from opgraph.backends.fused.lowering.winograd_tiles import padded_row
from opgraph.backends.fused.views import static_all

Emitted = tuple[str, str, tuple[Check, ...]]

#: The data transform ``Bᵀ`` (4x4), the cotangent transform ``A`` (4x2) and the taps'
#: ``Gᵀ`` (3x4) of F(3x3, 2x2).
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
A = np.array([[1, 0], [1, 1], [1, -1], [0, -1]], np.float64)
GT = np.array([[1, 0.5, 0.5, 0], [0, 0.5, -0.5, 0], [0, 0.5, 0.5, 1]], np.float64)


def _combine(row: Sequence[float], terms: Sequence[str]) -> str:
    """``Σ row[k] · terms[k]`` as a C expression, zero terms left out."""
    parts = []
    for k, name in zip(row, terms, strict=True):
        if k == 0:
            continue
        scaled = name if abs(k) == 1 else f"{float(abs(k))!r}f * {name}"
        parts.append(("- " if k < 0 else "+ ") + scaled)
    if not parts:
        return "0.0f"
    text = " ".join(parts)
    return text[2:] if text[0] == "+" else "-" + text[2:]


def transform_2d(k: np.ndarray, src: str, dst: str, tmp: str) -> list[str]:
    """``dst{a}{b} = Σ_ij k[a, i] k[b, j] src{i}{j}`` as straight-line C (``k`` r x s: the
    source is s x s, the result r x r)."""
    rows, cols = k.shape
    lines = [
        f"const float {tmp}{a}{j} = {_combine(k[a], [f'{src}{i}{j}' for i in range(cols)])};"
        for a in range(rows)
        for j in range(cols)
    ]
    lines += [
        f"const float {dst}{a}{b} = {_combine(k[b], [f'{tmp}{a}{j}' for j in range(cols)])};"
        for a in range(rows)
        for b in range(rows)
    ]
    return lines


class WinogradFilterEmitter:
    """``g<i>`` (pass 1 over parts), ``g<i>_out`` (pass 2 over output channels), ``g<i>_run``."""

    def __init__(self, step: WinogradFilterGradientStep, name: str, module: ModuleContext) -> None:
        assert step.x is not None and step.ct is not None
        assert step.out is not None and step.scratch is not None
        self.step, self.name, self.module = step, name, module
        self.x, self.ct, self.out, self.scratch = step.x, step.ct, step.out, step.scratch
        self.n, self.c, self.h, self.w = static_all(self.x.shape)
        self.o, oh, ow = static_all(self.ct.shape[1:])
        self.th, self.tw = oh // 2, ow // 2
        self.tb = step.block_rows * self.tw
        self.row = padded_row(self.w, step.padding[1], ow, 2)
        self.per_part = static_all(self.scratch.shape)[1]

    def emit(self) -> str:
        self.module.uses_blas = True
        label = self.step.label.replace("*/", "* /")
        return "\n".join(
            [
                f"/* {self.name}: Winograd F(3x3,2x2) filter gradient: {label} */",
                *self.products(),
                *self.taps(),
                f"static int {self.name}_run(void* const* T, char* A) {{",
                f"  int e = {self.dispatch(self.name, self.step.parts)};",
                "  if (e) return e;",
                f"  return {self.dispatch(self.name + '_out', self.o)};",
                "}",
            ]
        )

    def dispatch(self, fn: str, units: int) -> str:
        threads = self.module.num_threads
        if units > 1 and threads > 1:
            self.module.uses_pool = True
            return f"og_parallel({fn}, T, A, {units}L, 1L, {threads})"
        return f"{fn}(T, A, 0, {units}L)"

    def products(self) -> list[str]:
        s, n, c, o = self.step, self.n, self.c, self.o
        tb, per = self.tb, self.per_part
        gemm = (
            f"      scipy_cblas_sgemm(101, 111, 112, {o}, {c}, (int)tb, 1, D + xi * {o}L * tb, "
            f"(int)tb, V + xi * {c}L * tb, (int)tb, first ? 0.0f : 1.0f, M + xi * {o * c}L, {c});"
        )
        return [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.ct, "ct0", True),
            _pointer(self.module, self.scratch, "scratch", False),
            "  for (long part = lo; part < hi; ++part) {",
            f"    float* M = scratch + part * {per}L;",
            f"    float* V = M + {16 * o * c}L;",
            f"    float* D = V + {16 * c * tb}L;",
            f"    float* P = D + {16 * o * tb}L;",
            f"    long n0 = {n}L * part / {s.parts}L, n1 = {n}L * (part + 1) / {s.parts}L;",
            "    int first = 1;",
            f"    __builtin_memset(P, 0, {4 * 4 * self.row});  /* padding columns stay zero */",
            f"    for (long r0 = n0 * {self.th}L; r0 < n1 * {self.th}L; r0 += {s.block_rows}L) {{",
            f"      long r1 = r0 + {s.block_rows}L < n1 * {self.th}L ? r0 + {s.block_rows}L "
            f": n1 * {self.th}L;",
            f"      long tb = (r1 - r0) * {self.tw}L;",
            *self.data_transform(),
            *self.cotangent_transform(),
            "      for (int xi = 0; xi < 16; ++xi)",
            gemm,
            "      first = 0;",
            "    }",
            f"    if (first) __builtin_memset(M, 0, {4 * 16 * o * c});  /* no images */",
            "  }",
            "  return 0;",
            "}",
        ]

    def data_transform(self) -> list[str]:
        xs = self.x.strides
        pt, pl = self.step.padding
        row, c, w = self.row, self.c, self.w
        loads = [f"const float d{a}{b} = p{a}[2 * tc + {b}];" for a in range(4) for b in range(4)]
        stores = [f"V[({a * 4 + b} * {c}L + ch) * tb + col] = v{a}{b};"
                  for a in range(4) for b in range(4)]  # fmt: skip
        copies = [
            f"long ih{a} = 2 * tr - {pt}L + {a};\n"
            f"          float* restrict p{a} = P + {a * row}L;\n"
            f"          if (ih{a} >= 0 && ih{a} < {self.h}L) "
            f"__builtin_memcpy(p{a} + {pl}L, xc + ih{a} * {xs[2]}L, {4 * w});\n"
            f"          else __builtin_memset(p{a} + {pl}L, 0, {4 * w});"
            for a in range(4)
        ]
        body = loads + transform_2d(BT, "d", "v", "t") + stores
        image = f"const float* xc = x0 + (r / {self.th}L) * {xs[0]}L + ch * {xs[1]}L;"
        return self.tile_loop("ch", c, [image, *copies], body)

    def cotangent_transform(self) -> list[str]:
        cs = self.ct.strides
        o = self.o
        loads = [f"const float e{i}{j} = q{i}[(2 * tc + {j}) * {cs[3]}L];"
                 for i in range(2) for j in range(2)]  # fmt: skip
        stores = [f"D[({a * 4 + b} * {o}L + oc) * tb + col] = u{a}{b};"
                  for a in range(4) for b in range(4)]  # fmt: skip
        body = loads + transform_2d(A, "e", "u", "s") + stores
        rows = [
            f"const float* gc = ct0 + (r / {self.th}L) * {cs[0]}L + oc * {cs[1]}L;",
            *[f"const float* q{i} = gc + (2 * tr + {i}) * {cs[2]}L;" for i in range(2)],
        ]
        return self.tile_loop("oc", o, rows, body)

    def tile_loop(self, index: str, count: int, rows: list[str], body: list[str]) -> list[str]:
        """For each of ``count`` channels (``index``) and each tile row ``r`` of the part:
        ``rows`` ready the channel's input rows, and ``body`` transforms the tile in column
        ``tc`` (vectorized across the row's tiles) into column ``col`` of the blocks."""
        return [
            f"      for (long {index} = 0; {index} < {count}L; ++{index}) {{",
            "        for (long r = r0; r < r1; ++r) {",
            f"          long tr = r % {self.th}L, base = (r - r0) * {self.tw}L;",
            *[f"          {line}" for line in rows],
            "            #pragma omp simd",
            f"            for (long tc = 0; tc < {self.tw}L; ++tc) {{",
            "              long col = base + tc;",
            *[f"              {line}" for line in body],
            "            }",
            "          }",
            "        }",
        ]

    def taps(self) -> list[str]:
        o, c, per = self.o, self.c, self.per_part
        sums = [
            f"float m{a}{b} = S[{(a * 4 + b) * o * c}L];\n"
            f"          for (long part = 1; part < {self.step.parts}L; ++part) "
            f"m{a}{b} += S[part * {per}L + {(a * 4 + b) * o * c}L];"
            for a in range(4)
            for b in range(4)
        ]
        stores = [f"y[ch * 9L + {i * 3 + j}] = w{i}{j};" for i in range(3) for j in range(3)]
        body = sums + transform_2d(GT, "m", "w", "r") + stores
        return [
            f"static int {self.name}_out(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.scratch, "scratch", True),
            "  for (long oc = lo; oc < hi; ++oc) {",
            f"    float* y = y0 + oc * {self.out.strides[0]}L;",
            "    #pragma omp simd",
            f"    for (long ch = 0; ch < {c}L; ++ch) {{",
            f"      const float* S = scratch + oc * {c}L + ch;",
            *[f"      {line}" for line in body],
            "    }",
            "  }",
            "  return 0;",
            "}",
        ]


def _emit(step: WinogradFilterGradientStep, i: int, module: ModuleContext) -> Emitted:
    text = WinogradFilterEmitter(step, f"g{i}", module).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", ()


#: The C generator of the step (``codegen/module.py`` merges it in).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], Emitted]] = {
    WinogradFilterGradientStep: _emit
}
