"""Inline vector math for the instruction sets where libmvec's own variant is slow.

glibc's libmvec picks its AVX2 ``tanhf`` (``_ZGVdN8v_tanhf``) for code compiled for AVX2: a
table lookup whose eight indexes are moved to general registers and loaded 128 bits at a
time, with a polynomial in double precision, 1.7x the time per value of its AVX-512 variant
(``_ZGVeN16v_tanhf``, in-register permutes). W2 (``tanh(x*0.5+1)*sigmoid(x)-x/3``) spent
more than half its time there under ``isa="avx2"``. For f32 ``tanh`` in AVX2 builds without
AVX-512, a module defines :data:`AVX2_TANHF` instead of declaring libmvec's, and calls it by
the same name (``#define tanhf og_tanhf``): a branch-free function GCC inlines and vectorizes
in the kernels' ``omp simd`` loops (C harness, AVX2, one thread, 4096 values in L1: 0.62x
libmvec's time per value; W2's expression 0.76x; the second version below, 0.91x the
first's W2 time). AVX-512 builds (``-march=native`` on an
AVX-512 CPU, ``isa="avx512"``) and builds without FMA keep libmvec: the choice is the
preprocessor's, on the target macros, so one generated source serves every instruction set
(docs/design.md §10).

f32 ``erf`` in every build with FMA (AVX2 and AVX-512) is :data:`FMA_ERFF`, a rational
function half the time per value of libmvec's AVX-512 ``erff`` in BERT's GELU, within 5.7 ulp
(libmvec's measured 4.0).

Accuracy of the tanh, every f32 input against ``tanh`` in double rounded once (exhaustive,
2^32 values; both versions): at most 2.43 ulp (near |x| = 0.016, where ``E + 2`` rounds),
libmvec's AVX2 variant 1.03 ulp; glibc documents its vector functions as within 4 ulp.
Signed zeros, infinities (±1), NaN (passed through) and subnormals (returned exactly) keep
their meaning.
"""

from __future__ import annotations

#: The macro test of the builds that use :data:`AVX2_TANHF`.
AVX2_ONLY = "defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)"

#: ``tanh|x| = E / (E + 2)`` with ``E = expm1(2c) = 2^n expm1(2r) + (2^n - 1)`` (one
#: rounding), ``c = min(|x|, 10)`` (``tanh`` is 1 in f32 from 9.01), ``n = rint(2c / ln2)``
#: and ``r = c - n ln2/2`` in ``[-ln2/4, ln2/4]``. ``n`` comes from the shifter ``1.5 * 2^23``
#: (``k = 2c/ln2 + 1.5*2^23`` holds ``n`` in its low bits: no round, no conversion), the
#: reduction takes one ``ln2/2`` (``n <= 29``: its f32 rounding moves ``E`` by at most 3e-8
#: relative, where ``tanh`` is within 1e-7 of 1), ``h = expm1(2r)/2 = r + r^2 q(r)`` with a
#: degree-5 ``q`` fitted for relative error 1e-9 on the interval (Estrin's scheme), and the
#: factor 2 rides in the scale: ``E = 2^(n+1) h + (2^(n+1)/2 - 1)``. 22 vector operations
#: and a division per 8 lanes, against 26 in the first version (Taylor to ``r^7`` of
#: ``2|x|``, ``rint`` and a conversion for ``n``, a two-part ``ln2``): W2's AVX2 loop 0.91x
#: the time per element (docs/performance.md, H93). Selections are on the bit patterns as
#: integer masks: a float conditional (``a > 10 ? 10 : a``) may trap under GCC's default
#: -ftrapping-math, where GCC kept a branch and did not vectorize the loop; the integer form
#: vectorizes with either flag.
AVX2_TANHF = """/* tanh for AVX2 builds (codegen/vector_math.py): E / (E + 2), E = expm1(2|x|) */
static inline float og_tanhf(float x) {
  int xb, ab;
  __builtin_memcpy(&xb, &x, 4);
  ab = xb & 0x7fffffff;
  int cb = ab < 0x41200000 ? ab : 0x41200000; /* min(|x|, 10) on the bits; NaN -> 10 */
  float c;
  __builtin_memcpy(&c, &cb, 4);
  float k = __builtin_fmaf(c, 0x1.715476p+1f, 0x1.8p+23f); /* n = rint(2c/ln2) in its bits */
  float n = k - 0x1.8p+23f;
  float r = __builtin_fmaf(n, -0x1.62e430p-2f, c); /* (2c - n ln2) / 2 */
  float r2 = r * r;
  float a = __builtin_fmaf(r, 0x1.555554p-1f, 1.0f);
  float b = __builtin_fmaf(r, 0x1.1111ccp-3f, 0x1.5554f2p-2f);
  float d = __builtin_fmaf(r, 0x1.9fbdcap-7f, 0x1.6d4104p-5f);
  float q = __builtin_fmaf(r2, __builtin_fmaf(r2, d, b), a);
  float h = __builtin_fmaf(r2, q, r); /* expm1(2r) / 2 */
  unsigned kb;
  __builtin_memcpy(&kb, &k, 4);
  unsigned bits = (kb + 128u) << 23; /* 2^(n+1): k's low bits are n */
  float s;
  __builtin_memcpy(&s, &bits, 4);
  float e = __builtin_fmaf(s, h, __builtin_fmaf(s, 0.5f, -1.0f)); /* expm1(2c) */
  float t = e / (e + 2.0f);
  int tb, nan = -(ab > 0x7f800000);
  __builtin_memcpy(&tb, &t, 4);
  tb |= xb & (int)0x80000000u; /* the sign of x, -0 included */
  tb = (xb & nan) | (tb & ~nan);
  __builtin_memcpy(&t, &tb, 4);
  return t;
}"""

#: The macro test of the builds that use :data:`FMA_ERFF` (AVX2 and AVX-512 alike).
FMA = "defined(__FMA__)"

#: ``erf`` as ``x P(x^2) / Q(x^2)`` on ``|x|`` clamped to 4 (``erf`` is 1 in f32 from 3.92),
#: the quotient clamped to 1,
#: ``P`` of degree 7 and ``Q`` of degree 4 (``Q(0) = 1``), fitted by linear programming
#: (differential correction) to the relative error below ``erf = 0.5`` and half the absolute
#: error above. GELU (``0.5 x (1 + erf(x/sqrt 2))``, BERT's FFN 1) over 128 x 3072 values,
#: bias add included, one thread: 0.149 ms against libmvec's 0.280 (AVX-512) and 0.192
#: against 0.260 (AVX2); 0.042 without the ``erf``. Every f32 input against ``erf`` in
#: double: at most 5.68 ulp (3.4e-7 absolute, near |x| = 3.8, from the f32 rounding of ``P``
#: and ``Q``), libmvec's AVX-512 variant 4.00 ulp (near |x| = 3.65) on the same test. Signs,
#: ±1 at the infinities, NaN (passed through) and subnormals (``1.128 x``) as ``erff``.
FMA_ERFF = """/* erf for FMA builds (codegen/vector_math.py): x P(x^2) / Q(x^2), |x| <= 4 */
static inline float og_erff(float x) {
  int xb, ab;
  __builtin_memcpy(&xb, &x, 4);
  ab = xb & 0x7fffffff;
  int cb = ab < 0x40800000 ? ab : 0x40800000; /* min(|x|, 4) on the bits; NaN -> 4 */
  float a;
  __builtin_memcpy(&a, &cb, 4);
  float t = a * a;
  float p = __builtin_fmaf(t, -0x1.daaf00p-31f, 0x1.65b656p-24f);
  p = __builtin_fmaf(t, p, -0x1.f53ab8p-19f);
  p = __builtin_fmaf(t, p, 0x1.168fe6p-13f);
  p = __builtin_fmaf(t, p, 0x1.6f21f4p-10f);
  p = __builtin_fmaf(t, p, 0x1.660d76p-5f);
  p = __builtin_fmaf(t, p, 0x1.177870p-3f);
  p = __builtin_fmaf(t, p, 0x1.20dd76p+0f);
  float q = __builtin_fmaf(t, 0x1.0e5218p-11f, 0x1.3d095ap-7f);
  q = __builtin_fmaf(t, q, 0x1.714938p-4f);
  q = __builtin_fmaf(t, q, 0x1.d12ba4p-2f);
  q = __builtin_fmaf(t, q, 1.0f);
  float y = a * p / q;
  int yb, nan = -(ab > 0x7f800000);
  __builtin_memcpy(&yb, &y, 4);
  yb = yb < 0x3f800000 ? yb : 0x3f800000; /* at most 1 (near 4 the quotient rounds above) */
  yb |= xb & (int)0x80000000u; /* the sign of x, -0 included */
  yb = (xb & nan) | (yb & ~nan);
  __builtin_memcpy(&y, &yb, 4);
  return y;
}"""

#: The f32 libmvec functions with an inline replacement, by C name: (macro test, definition).
INLINE_F32 = {"tanhf": (AVX2_ONLY, AVX2_TANHF), "erff": (FMA, FMA_ERFF)}


def declaration(function: str, libmvec: str) -> str:
    """The declaration of the f32 function ``function``: libmvec's (``libmvec``), or, where
    :data:`INLINE_F32` has one, its inline replacement for the builds its test selects."""
    if function not in INLINE_F32:
        return libmvec
    test, definition = INLINE_F32[function]
    return "\n".join(
        [
            f"#if {test}",
            definition,
            f"#define {function} og_{function}",
            "#else",
            libmvec,
            "#endif",
        ]
    )
