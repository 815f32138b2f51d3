"""The C dialect: the fused compiler's :class:`~opgraph.backends.fused.dialect.Dialect` for
GCC-compatible C (``_Float16``, bit-exact bf16 helpers, ``__builtin_`` math and libmvec), and
the helper functions only the CPU's kernels use (GEMV/GEMM panels, streaming stores).

The module-level functions (``storage_type``, ``literal``…) are :data:`C`'s methods, for the
kernel templates of ``codegen/``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

from opgraph.backends.fused.dialect import CStyleDialect
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType

#: glibc's libmvec has vector versions of these (float ``name + "f"`` and double ``name``).
VECTOR_MATH = frozenset(
    {
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan",
        "atanh",
        "cbrt",
        "cos",
        "cosh",
        "erf",
        "erfc",
        "exp",
        "exp10",
        "exp2",
        "expm1",
        "log",
        "log10",
        "log1p",
        "log2",
        "sin",
        "sinh",
        "tan",
        "tanh",
        "atan2",
        "hypot",
        "pow",
    }
)
_ARITY = {"atan2": 2, "hypot": 2, "pow": 2}


class CDialect(CStyleDialect):
    """C as GCC and Clang compile it."""

    narrow_types: ClassVar[dict[ElementType, str]] = {et.f16: "_Float16", et.bf16: "uint16_t"}
    loads: ClassVar[dict[ElementType, str]] = {et.f16: "(float)({})", et.bf16: "og_bf16_to_f32({})"}
    stores: ClassVar[dict[ElementType, str]] = {
        et.f16: "(_Float16)({})",
        et.bf16: "og_f32_to_bf16({})",
    }
    rounds: ClassVar[dict[ElementType, str]] = {
        et.f16: "(float)(_Float16)({})",
        et.bf16: "og_round_bf16({})",
    }

    def narrow(self, t: ElementType, expr: str) -> str:
        assert t is et.f16, f"no one-rounding narrowing to {t}"
        return f"((float)(_Float16)({expr}))"

    def math_call(self, name: str, t: ElementType, *args: str) -> str:
        """Functions libmvec lacks are GCC builtins (``fabs``, ``sqrt``: single
        instructions)."""
        prefix = "" if name in VECTOR_MATH else "__builtin_"
        return prefix + super().math_call(name, t, *args)

    def special(self, value: float, wide: bool) -> str:
        if math.isnan(value):
            return '__builtin_nan("")' if wide else '__builtin_nanf("")'
        text = "__builtin_inf()" if wide else "__builtin_inff()"
        return text if value > 0 else f"(-{text})"

    def flag(self, condition: str, mask: int) -> str:
        return f"err |= {condition} ? {mask} : 0;"

    def own_helper(self, name: str) -> str:
        return HELPERS[name]()


#: The C dialect.
C = CDialect()
storage_type = C.storage_type
compute_type = C.compute_type
load = C.load
store = C.store
round_to = C.round_to
math_call = C.math_call
literal = C.literal
lowest = C.lowest
highest = C.highest


def is_wide_float(t: ElementType) -> bool:
    return t is et.f64


# ----------------------------------------------------------------------------- helpers
#: The CPU kernels' own helpers by name (the scalar renderers' are
#: :data:`~opgraph.backends.fused.dialect.COMMON_HELPERS`).
HELPERS: dict[str, Callable[[], str]] = {}


def helper(name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def register(make: Callable[[], str]) -> Callable[[], str]:
        HELPERS[name] = make
        return make

    return register


@helper("bf16")
def _bf16() -> str:
    return """static inline float og_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline uint16_t og_f32_to_bf16(float f) { /* round to nearest even; NaN stays NaN */
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float og_round_bf16(float f) { return og_bf16_to_f32(og_f32_to_bf16(f)); }"""


HELPERS["gemv_panels"] = lambda: (
    """/* y[first:last] = x (1 x K) times a matrix stored as 16-column panels (K x 16 each):
   four accumulator vectors over k, streaming each panel once. */
static void og_gemv_panels(const float* restrict x, long incx, const float* restrict P,
                           float* restrict y, long K, long first, long last) {
  for (long c = first; c < last; c += 16) {
    const float* p = P + (c / 16) * K * 16;
    float a0[16] = {0}, a1[16] = {0}, a2[16] = {0}, a3[16] = {0};
    long k = 0;
    for (; k + 4 <= K; k += 4) {
      const float x0 = x[k * incx], x1 = x[(k + 1) * incx];
      const float x2 = x[(k + 2) * incx], x3 = x[(k + 3) * incx];
      const float* q = p + k * 16;
      #pragma omp simd
      for (int j = 0; j < 16; ++j) {
        a0[j] += x0 * q[j];
        a1[j] += x1 * q[16 + j];
        a2[j] += x2 * q[32 + j];
        a3[j] += x3 * q[48 + j];
      }
    }
    for (; k < K; ++k) {
      const float x0 = x[k * incx];
      #pragma omp simd
      for (int j = 0; j < 16; ++j) a0[j] += x0 * p[k * 16 + j];
    }
    long n = last - c < 16 ? last - c : 16;
    for (long j = 0; j < n; ++j) y[c + j] = (a0[j] + a1[j]) + (a2[j] + a3[j]);
  }
}"""
)
HELPERS["stream_f32"] = lambda: (
    """typedef float og_v16sf __attribute__((vector_size(64)));
/* Copy n floats from an aligned buffer to dst, streaming the 64-byte-aligned part. */
static inline void og_stream_f32(float* dst, const float* src, long n) {
  long head = ((64 - ((unsigned long)dst & 63)) & 63) / 4;
  if (((unsigned long)dst & 3) || head > n) head = n;
  long i = 0;
  for (; i < head; ++i) dst[i] = src[i];
#ifdef __AVX512F__
  for (; i + 16 <= n; i += 16) {
    og_v16sf v;
    __builtin_memcpy(&v, src + i, 64);
    __builtin_ia32_movntps512((og_v16sf*)(dst + i), v);
  }
#endif
  for (; i < n; ++i) dst[i] = src[i];
}"""
)
HELPERS["gemm_panels"] = lambda: (
    """typedef float og_v16 __attribute__((vector_size(64)));
/* c[R x nvalid] (+)= a[R x (k0..k1)] times panel p (K x 32): 2R accumulator vectors. */
static inline __attribute__((always_inline)) void og_mk(
    const int R, const float* restrict a, long lda, const float* restrict p, long k0, long k1,
    float* restrict c, long ldc, long nvalid) {
  og_v16 c0[12], c1[12];
  float t[32];
  for (int r = 0; r < R; ++r) {
    if (k0 == 0) { c0[r] = (og_v16){0}; c1[r] = (og_v16){0}; continue; }
    for (long j = 0; j < 32; ++j) t[j] = j < nvalid ? c[r * ldc + j] : 0.0f;
    __builtin_memcpy(&c0[r], t, 64);
    __builtin_memcpy(&c1[r], t + 16, 64);
  }
  for (long k = k0; k < k1; ++k) {
    og_v16 b0, b1;
    __builtin_memcpy(&b0, p + k * 32, 64);
    __builtin_memcpy(&b1, p + k * 32 + 16, 64);
    for (int r = 0; r < R; ++r) {
      const float s = a[r * lda + k];
      c0[r] += s * b0;
      c1[r] += s * b1;
    }
  }
  for (int r = 0; r < R; ++r) {
    if (nvalid == 32) {
      __builtin_memcpy(c + r * ldc, &c0[r], 64);
      __builtin_memcpy(c + r * ldc + 16, &c1[r], 64);
      continue;
    }
    __builtin_memcpy(t, &c0[r], 64);
    __builtin_memcpy(t + 16, &c1[r], 64);
    for (long j = 0; j < nvalid; ++j) c[r * ldc + j] = t[j];
  }
}
/* C[:, n0:n1] = A (M x K, rows contiguous) times P (K x N as 32-column panels); n0 is a
   multiple of 32. The inner dimension is blocked by 384 so a's rows stay in L1; the larger
   operand is streamed once (panels outer when P is larger, rows outer when A is). */
static void og_gemm_panels(const float* restrict A, long lda, const float* restrict P,
                           float* restrict C, long ldc, long M, long K, long n0, long n1) {
  long first = n0 / 32, panels = (n1 + 31) / 32 - first;
  int rows_outer = M > 32 * panels;
  for (long k0 = 0; k0 < K; k0 += 384) {
    long k1 = k0 + 384 < K ? k0 + 384 : K;
    long tiles = (M + 11) / 12;
    for (long outer = 0; outer < (rows_outer ? tiles : panels); ++outer)
      for (long inner = 0; inner < (rows_outer ? panels : tiles); ++inner) {
        long nb = first + (rows_outer ? inner : outer);
        long m = 12 * (rows_outer ? outer : inner);
        long nvalid = n1 - nb * 32 < 32 ? n1 - nb * 32 : 32;
        const float* p = P + nb * K * 32;
        float* c = C + nb * 32;
#define OG_MK(R) og_mk(R, A + m * lda, lda, p, k0, k1, c + m * ldc, ldc, nvalid)
        switch (M - m < 12 ? M - m : 12) { case 12: OG_MK(12); break; CASES default: break; }
#undef OG_MK
      }
  }
}"""
).replace("CASES", " ".join(f"case {n}: OG_MK({n}); break;" for n in range(11, 0, -1)))
#: The C prelude: fixed-width types without parsing system headers (compiles are short).
PRELUDE = """typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;"""


def simd_declarations(names: set[tuple[str, ElementType]]) -> str:
    """``__attribute__((simd))`` declarations of the libmvec functions a module uses, so that
    GCC vectorizes loops calling them without -ffast-math."""
    lines = []
    for name, t in sorted(names, key=lambda item: (item[0], item[1].name)):
        if name not in VECTOR_MATH:
            continue
        c = "double" if is_wide_float(t) else "float"
        fn = name if is_wide_float(t) else name + "f"
        params = ", ".join([c] * _ARITY.get(name, 1))
        lines.append(f'__attribute__((simd("notinbranch"))) extern {c} {fn}({params});')
    return "\n".join(lines)
