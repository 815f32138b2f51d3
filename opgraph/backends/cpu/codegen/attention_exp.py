"""The exponentials of fused attention's softmax: ``og_exp_sum``, one pass over a row of
scores that replaces each by ``exp(score - peak)`` (its row's maximum) and returns their sum.

Vector code in GCC's vector extensions (16 lanes with AVX-512, 8 with AVX, 4 otherwise) with
an inline ``exp``: no call per vector. With libmvec's ``expf`` in an ``omp simd`` loop the
call clobbered every vector register, so the loop spilled and reloaded its values around
each call, and the per-block sums were reduced lane by lane (16 dependent scalar additions
per 256 scores); here each block's partial sums stay in one vector. Whisper-tiny's
attention (6 heads x 1500 x 1500 scores, one thread, thread CPU): docs/performance.md,
2026-11-27, h111.

The ``exp``: ``n = rint(d / ln2)`` from the shifter ``1.5 * 2^23`` (``z = d / ln2 + 1.5 *
2^23`` holds ``n`` in its low bits), ``r = d - n ln2`` with ``ln2`` in two parts (the first
with trailing zero bits, so ``n`` times it is exact), ``exp(r) - 1`` a degree-5 polynomial
without constant term (Estrin's scheme) and ``2^n`` built in the exponent bits. The
polynomial's coefficients were fitted here: the minimax relative error of ``exp(r)`` on
``[-ln2/2, ln2/2]`` by linear programming (``scipy.optimize.linprog``, 3001 points), then
the f32 neighbours of each coefficient (4 ulp either way) searched for the smallest maximum:
9.3e-8 relative before the evaluation's roundings. A simulation of this arithmetic in numpy
(f32 operations, fused multiply-adds rounded once) against ``exp`` in double: at most 2.2 ulp
(mean 0.67) over [-87.3, 0] in steps of 1e-5. It is exact
at 0 (a row's maximum weighs 1). Differences more than :data:`EXP_FLOOR` below the maximum
weigh 0: their lanes of the result are zeroed (``exp`` is under f32's smallest normal there,
and below ``n = -126`` the exponent bits of ``2^n`` wrap; a difference past f32's range makes
the lane's arithmetic infinite or NaN, zeroed the same). A row's sum is at least 1 (its
maximum's term), so the weights dropped cannot change it; a probability below 2^-125.9 / sum
becomes 0. The floor also keeps the step off libmvec's slow lanes, which it called before
(glibc's vector ``expf`` sends every lane past 87.34 through scalar ``expf``, 3-7 ns a value:
GPT-2's causal mask of ``finfo.min``); the inline ``exp`` has no slow range. NaN scores stay
NaN (every step of the arithmetic is NaN for them, and a NaN is not below the floor); a row
whose maximum is NaN or infinite is NaN throughout.

Each lane sums at most :data:`SUM_BLOCK` / lanes scores in order into a block's partial
vector, the blocks' vectors are added in order, and the lanes at the end; the last vector of
a row (``m`` not a multiple of the lanes) is computed on a copy padded with the maximum, its
padding lanes zeroed before they are summed and never stored.
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen import dialect
from opgraph.core import element_type as et

#: The module helper (``ModuleContext.helper``) that defines ``og_exp_sum``.
HELPER = "exp_sum"
#: Scores per partial sum: each lane sums at most this many / lanes values in order.
SUM_BLOCK = 256
#: Scores more than this below their row's maximum weigh 0 (module doc).
EXP_FLOOR = -87.3


@dialect.helper(HELPER)
def _exp_sum() -> str:
    floor = dialect.literal(EXP_FLOOR, et.f32)
    return f"""/* a row's softmax exponentials in place, and their sum (codegen/attention_exp.py) */
#if defined(__AVX512F__)
#define OG_XL 16
#elif defined(__AVX__)
#define OG_XL 8
#else
#define OG_XL 4
#endif
typedef float og_xf __attribute__((vector_size(4 * OG_XL)));
typedef int og_xi __attribute__((vector_size(4 * OG_XL)));
typedef unsigned og_xu __attribute__((vector_size(4 * OG_XL)));
/* exp(d) for d <= 0 (a score minus its row's maximum); 0 below the floor, NaN for NaN */
static inline og_xf og_exp_weights(og_xf d) {{
  const og_xf z = d * 0x1.715476p+0f + 0x1.8p+23f; /* n = rint(d / ln2) in its bits */
  const og_xf n = z - 0x1.8p+23f;
  og_xf r = n * -0x1.62e4p-1f + d;
  r = n * -0x1.7f7d1cp-20f + r;
  const og_xf s = (og_xf)(((og_xu)z << 23) + 0x3f800000u); /* 2^n: z's low bits are n */
  const og_xf r2 = r * r;
  const og_xf p = r * 0x1.0fa8a8p-7f + 0x1.573b42p-5f;
  const og_xf q = p * r2 + (r * 0x1.555a76p-3f + 0x1.fffdc4p-2f);
  const og_xf e = (q * r2 + r * 0x1.fffff6p-1f) * s + s;
  return (og_xf)((og_xi)e & ~(d < {floor})); /* NaN d: every step NaN */
}}
static float og_exp_sum(float* restrict x, long m, float peak) {{
  og_xf total = {{0}};
  for (long j0 = 0; j0 < m; j0 += {SUM_BLOCK}L) {{
    const long j1 = j0 + {SUM_BLOCK}L < m ? j0 + {SUM_BLOCK}L : m;
    og_xf part = {{0}};
    long j = j0;
    for (; j + OG_XL <= j1; j += OG_XL) {{
      og_xf v;
      __builtin_memcpy(&v, x + j, sizeof v);
      const og_xf y = og_exp_weights(v - peak);
      __builtin_memcpy(x + j, &y, sizeof y);
      part += y;
    }}
    if (j < j1) {{ /* the row's last lanes: a copy padded with the maximum */
      float t[OG_XL];
      og_xi lane;
      for (int l = 0; l < OG_XL; ++l) {{
        t[l] = j + l < j1 ? x[j + l] : peak;
        lane[l] = j + l < j1 ? -1 : 0;
      }}
      og_xf v;
      __builtin_memcpy(&v, t, sizeof v);
      const og_xf y = (og_xf)((og_xi)og_exp_weights(v - peak) & lane);
      __builtin_memcpy(t, &y, sizeof y);
      for (long l = 0; l < j1 - j; ++l) x[j + l] = t[l];
      part += y;
    }}
    total += part;
  }}
  float sum = 0.0f;
  for (int l = 0; l < OG_XL; ++l) sum += total[l];
  return sum;
}}
#undef OG_XL"""
