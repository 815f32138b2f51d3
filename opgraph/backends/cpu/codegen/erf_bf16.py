"""bf16 mode: ``erf`` in the epilogues of bf16 products as a rational approximation.

In ``precision="bf16"`` a GELU epilogue (``0.5·x·(1 + erf(x/√2))`` after FFN 1 of a
transformer) feeds a product that rounds its result to bf16 (8 significant bits, relative
2^-9). libmvec's ``erff`` is accurate to about an ulp of f32 and took 0.28 ms for BERT's
128 x 3072 GELU on one core (a C loop alone); :class:`FastErf`, an odd degree-13 over even
degree-8 rational function of ``x`` clamped to [-4, 4] (the approximation Eigen and XLA use
for f32 ``erf``), took 0.14 ms. Its error is at most 3.8e-7 absolute (measured against
``erf`` in f64 on a grid of 1.2e7 points over [-6, 6]; largest near |x| = 4, where erf
rounds to ±1), 2000 times below a bf16 rounding; NaN stays NaN and ±inf give ±1.

:func:`to_bf16`'s conversion of a product step gives its epilogue ``FastErf`` in place of
every f32 ``Erf`` (registered here in ``bf16.EPILOGUE_OPS``). f32 compiles never see it.
"""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.cpu.codegen import bf16, dialect
from opgraph.backends.fused.lowering.registry import SCALAR_OPS, ScalarContext
from opgraph.ops import elementwise as ew


class FastErf(ew.Erf):
    """``erf`` to 3.8e-7 absolute (module doc): an internal op of the CPU's bf16 mode, only
    placed in bf16 product epilogues (``bf16.EPILOGUE_OPS``); never in user graphs."""

    __slots__ = ()


@dialect.helper("erf_fast")
def _helper() -> str:
    return """/* erf(a) within 3.8e-7 absolute: p(x)/q(x) on x = a clamped to [-4, 4] (NaN stays) */
static inline float og_erf_fast(float a) {
  const float x = a < -4.0f ? -4.0f : (a > 4.0f ? 4.0f : a);
  const float x2 = x * x;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  p = x * p;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return p / q;
}"""


@SCALAR_OPS.register(FastErf)
def _render(op: FastErf, args: Sequence[str], ctx: ScalarContext) -> str:
    ctx.helper("erf_fast")
    return f"og_erf_fast({args[0]})"


bf16.EPILOGUE_OPS[ew.Erf] = FastErf

__all__ = ["FastErf"]
