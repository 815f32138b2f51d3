"""Fused attention in bf16 mode (``precision="bf16"``): its two products with bf16 operands.

:class:`Bf16AttentionStep` is the :class:`AttentionStep` that :func:`bf16.to_bf16` makes of
every fused attention: each thread packs its entry's ``k`` (d x m) and ``v`` (m x e) as bf16
*pair* panels (two inner-dimension neighbours of a column side by side, the layout of the
bf16 GEMM's constant weights) instead of f32 panels, and both products go through
``og_gemm_bf16_panels``, which rounds ``q``'s rows and the probabilities to bf16 as it reads
them and accumulates in f32 (``vdpbf16ps``). The softmax itself (scale, mask, maximum,
``exp``, sum, quotient) stays in f32 on the f32 scores.

Error: the scores are sums of ``d`` products of bf16-rounded ``q`` and ``k`` (each rounding
relative 2^-9), so a score is off by at most about ``2^-8 · Σ|q_i k_i|`` (times the scale);
a probability's relative error is about that score error (``exp`` turns an absolute error
into a relative one); the context adds the rounding of ``p`` and ``v`` (2^-8 relative per
product). On the BERT-base layer (`bench/precision.py`) the whole layer in bf16 stays within
the bf16 mode's documented bound (docs/cpu.md, "Reduced precision").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from opgraph.backends.cpu.codegen import bf16
from opgraph.backends.cpu.codegen.attention import AttentionEmitter, _panels
from opgraph.backends.cpu.codegen.context import ModuleContext
from opgraph.backends.fused.lowering.attention import AttentionStep
from opgraph.backends.fused.program import Buffer, Step
from opgraph.backends.fused.views import static_all
from opgraph.core.dim import Dim


@dataclasses.dataclass(eq=False)
class Bf16AttentionStep(AttentionStep):
    """An :class:`AttentionStep` whose two products run on bf16 operands (module doc)."""


def _to_bf16(step: AttentionStep, buffers: list[Buffer]) -> Step:
    return Bf16AttentionStep(**bf16._fields(step))


class Bf16AttentionEmitter(AttentionEmitter):
    """``og_gemm_bf16_panels`` over k and v packed as bf16 pair panels (in the same scratch
    slices as the f32 panels, which they fill to half)."""

    def helpers(self) -> None:
        self.module.helper("gemm_bf16")

    @property
    def deferred(self) -> bool:
        """No: the product by ``v`` reads the probabilities rounded to bf16 (an oracle with
        those roundings is the bf16 mode's contract), not the unnormalized scores."""
        return False

    def product(self, a: str, lda: Dim, panels: str, c: str, ldc: Dim, k: int, n: int) -> str:
        return (
            f"og_gemm_bf16_panels({a}, {lda}L, (const uint16_t*){panels}, {c}, {ldc}L, rows, "
            f"{k}L, 0, {n}L);"
        )

    def pack(self) -> list[str]:
        """k (d x m) and v (m x e) as pair panels: per 32 columns, ``ceil(rows / 2)`` rows of
        32 (even, odd) bf16 pairs, zero-padded. When a head's values are contiguous (k's
        inner dimension for each key, v's columns for each key: a transformer's heads, which
        are column slices of the projections' output), they are rounded 32 at a time by
        ``og_bf16_row`` (``vcvtne2ps2bf16``) first."""
        (k_rows, k_cols), (v_rows, v_cols) = static_all(self.k.strides), static_all(self.v.strides)
        d, m, e = self.d, self.m, self.e
        return [
            *(
                self._key_rows(d, m, k_cols)
                if k_rows == 1
                else self._pairs("kp", "k0", "off[1]", d, m, k_rows, k_cols)
            ),
            *(
                self._value_rows(m, e, v_rows)
                if v_cols == 1
                else self._pairs("vp", "v0", "off[2]", m, e, v_rows, v_cols)
            ),
        ]

    @staticmethod
    def _key_rows(d: int, m: int, stride: int) -> list[str]:
        """k's pair panels from each key's ``d`` contiguous values: rounded in order, they
        are the key's ``ceil(d/2)`` pairs, stored 32 apart (the key's column of each panel);
        the columns past ``m`` are zero."""
        pairs, width = -(-d // 2), _panels(m)
        return [
            "    {",
            f"      uint16_t row16[{2 * pairs}L];",
            "      const og_u32u* row = (const og_u32u*)row16;",
            "      uint32_t* t = (uint32_t*)kp;",
            f"      for (long j = 0; j < {width}L; ++j) {{",
            f"        if (j < {m}L) og_bf16_row(k0 + off[1] + j * {stride}L, row16, {d}L);",
            "        else __builtin_memset(row16, 0, sizeof row16);",
            *([f"        row16[{d}L] = 0;"] if d % 2 else []),
            f"        uint32_t* c = t + (j / 32L) * {pairs * 32}L + j % 32L;",
            f"        for (long q = 0; q < {pairs}L; ++q) c[q * 32L] = row[q];",
            "      }",
            "    }",
        ]

    @staticmethod
    def _value_rows(m: int, e: int, stride: int) -> list[str]:
        """v's pair panels from pairs of keys' ``e`` contiguous values: both rows rounded
        (the second zero past ``m``), then interleaved into each panel's pair row."""
        pairs, width = -(-m // 2), _panels(e)
        return [
            "    {",
            f"      uint16_t lo[{width}L], hi[{width}L];",
            "      uint32_t* t = (uint32_t*)vp;",
            f"      __builtin_memset(lo + {e}L, 0, {2 * (width - e)}L);",
            f"      __builtin_memset(hi + {e}L, 0, {2 * (width - e)}L);",
            f"      for (long q = 0; q < {pairs}L; ++q) {{",
            f"        const float* x = v0 + off[2] + 2 * q * {stride}L;",
            f"        og_bf16_row(x, lo, {e}L);",
            f"        if (2 * q + 1 < {m}L) og_bf16_row(x + {stride}L, hi, {e}L);",
            f"        else __builtin_memset(hi, 0, {2 * e}L);",
            f"        for (long p = 0; p < {width // 32}L; ++p) {{",
            f"          uint32_t* c = t + (p * {pairs}L + q) * 32L;",
            "          #pragma omp simd",
            "          for (long jj = 0; jj < 32L; ++jj)",
            "            c[jj] = (uint32_t)lo[p * 32L + jj] | (uint32_t)hi[p * 32L + jj] << 16;",
            "        }",
            "      }",
            "    }",
        ]

    @staticmethod
    def _pairs(
        target: str, source: str, offset: str, inner: int, cols: int, rs: int, cs: int
    ) -> list[str]:
        pairs = -(-inner // 2)
        odd = inner % 2 == 1
        high = (
            f"(2 * q + 1 < {inner}L ? og_bf16_bits(x[{rs}L + j * {cs}L]) : 0u)"
            if odd
            else f"og_bf16_bits(x[{rs}L + j * {cs}L])"
        )
        return [
            f"    for (long p = 0; p < {_panels(cols) // 32}L; ++p)",
            f"      for (long q = 0; q < {pairs}L; ++q) {{",
            f"        const float* x = {source} + {offset} + 2 * q * {rs}L;",
            f"        uint32_t* t = (uint32_t*){target} + (p * {pairs}L + q) * 32L;",
            "        for (long jj = 0; jj < 32L; ++jj) {",
            "          const long j = p * 32L + jj;",
            f"          t[jj] = j < {cols}L ? og_bf16_bits(x[j * {cs}L]) | {high} << 16 : 0u;",
            "        }",
            "      }",
        ]


def _emit(step: Bf16AttentionStep, i: int, module: ModuleContext) -> tuple[str, str, tuple[()]]:
    return Bf16AttentionEmitter(step, f"a{i}", module).emit(), f"a{i}_run(T, A);", ()


bf16.CONVERSIONS[AttentionStep] = _to_bf16

#: The C generator of the bf16 attention step (``module.STEP_EMITTERS`` takes it in).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], tuple[str, str, tuple[Any, ...]]]] = {
    Bf16AttentionStep: _emit
}
