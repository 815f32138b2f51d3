"""The C dialect: element types as C types, literals, and the helper functions that the
scalar renderers (``lowering/``) ask for by name.

Values are computed in a *compute type* (f16 and bf16 in ``float``, booleans as ``uint8_t``
0/1) and stored in a *storage type*. A 16-bit float result is rounded back to its type after
every op (round-to-nearest-even), which is what computing op by op in that type gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType

_STORAGE = {
    et.boolean: "uint8_t",
    et.f16: "_Float16",
    et.bf16: "uint16_t",
    et.f32: "float",
    et.f64: "double",
    et.i8: "int8_t",
    et.i16: "int16_t",
    et.i32: "int32_t",
    et.i64: "int64_t",
    et.u8: "uint8_t",
    et.u16: "uint16_t",
    et.u32: "uint32_t",
    et.u64: "uint64_t",
}

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


def storage_type(t: ElementType) -> str:
    """The C type of one stored element."""
    return _STORAGE[t]


def compute_type(t: ElementType) -> str:
    """The C type values of ``t`` are computed in."""
    if t in (et.f16, et.bf16):
        return "float"
    return _STORAGE[t]


def is_wide_float(t: ElementType) -> bool:
    return t is et.f64


def load(t: ElementType, expr: str) -> str:
    """A stored element (``expr``) as a compute value."""
    if t is et.f16:
        return f"(float)({expr})"
    if t is et.bf16:
        return f"og_bf16_to_f32({expr})"
    return expr


def store(t: ElementType, expr: str) -> str:
    """A compute value as a stored element."""
    if t is et.f16:
        return f"(_Float16)({expr})"
    if t is et.bf16:
        return f"og_f32_to_bf16({expr})"
    return expr


def round_to(t: ElementType, expr: str) -> str:
    """A compute value rounded to the precision of ``t`` (16-bit floats), else unchanged."""
    if t is et.f16:
        return f"(float)(_Float16)({expr})"
    if t is et.bf16:
        return f"og_round_bf16({expr})"
    return expr


def math_call(name: str, t: ElementType, *args: str) -> str:
    """``name(args)`` in the precision of ``t`` (``expf`` for f32/f16/bf16, ``exp`` for f64).
    Functions libmvec lacks are GCC builtins (``fabs``, ``sqrt``: single instructions)."""
    suffix = "" if is_wide_float(t) else "f"
    prefix = "" if name in VECTOR_MATH else "__builtin_"
    return f"{prefix}{name}{suffix}({', '.join(args)})"


def literal(value: bool | int | float, t: ElementType) -> str:
    """An exact C literal of ``value`` in the compute type of ``t``."""
    if t.is_boolean:
        return "1" if value else "0"
    if t.is_integral:
        return _int_literal(int(value), t)
    return _float_literal(float(value), wide=is_wide_float(t))


def _int_literal(v: int, t: ElementType) -> str:
    c = compute_type(t)
    info = np.iinfo(t.dtype)
    if v == info.min and t.is_signed:
        return f"(({c})({v + 1}LL - 1))"
    suffix = "ULL" if not t.is_signed else "LL"
    return f"(({c}){v}{suffix})"


def _float_literal(v: float, wide: bool) -> str:
    if math.isnan(v):
        return '__builtin_nan("")' if wide else '__builtin_nanf("")'
    if math.isinf(v):
        text = "__builtin_inf()" if wide else "__builtin_inff()"
        return text if v > 0 else f"(-{text})"
    text = float.hex(v)
    return f"({text})" if wide else f"({text}f)"


def lowest(t: ElementType) -> str:
    """The smallest value of ``t`` (-inf for floats), as a compute-type literal."""
    if t.is_real:
        return literal(-math.inf, t)
    if t.is_boolean:
        return "0"
    return literal(int(np.iinfo(t.dtype).min), t)


def highest(t: ElementType) -> str:
    """The largest value of ``t`` (+inf for floats), as a compute-type literal."""
    if t.is_real:
        return literal(math.inf, t)
    if t.is_boolean:
        return "1"
    return literal(int(np.iinfo(t.dtype).max), t)


# ----------------------------------------------------------------------------- helpers
#: Helper definitions by name; a renderer asks for one with ``ScalarContext.helper``.
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


def _int_names() -> list[ElementType]:
    return [et.i8, et.i16, et.i32, et.i64, et.u8, et.u16, et.u32, et.u64]


def _unsigned_of(t: ElementType) -> str:
    return {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}[t.itemsize]


def _make_divisions(t: ElementType) -> str:
    c, u, n = storage_type(t), _unsigned_of(t), t.name
    if not t.is_signed:
        return f"""static inline {c} og_floordiv_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a / b; }}
static inline {c} og_truncdiv_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a / b; }}"""
    return f"""static inline {c} og_truncdiv_{n}({c} a, {c} b) {{
  if (b == 0) return 0;
  if (b == -1) return ({c})(({u})0 - ({u})a); /* wraps at the minimum, as numpy does */
  return ({c})(a / b);
}}
static inline {c} og_floordiv_{n}({c} a, {c} b) {{
  if (b == 0) return 0;
  if (b == -1) return ({c})(({u})0 - ({u})a);
  {c} q = ({c})(a / b);
  if (({c})(a % b) != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;
}}"""


def _make_ipow(t: ElementType) -> str:
    c, u, n = storage_type(t), _unsigned_of(t), t.name
    return f"""static inline {c} og_ipow_{n}({c} a, {c} b) {{ /* repeated squaring, wrapping */
  {u} base = ({u})a, result = 1; uint64_t e = (uint64_t)b;
  if (b < 0) return 0;
  while (e) {{ if (e & 1u) result = ({u})(result * base); base = ({u})(base * base); e >>= 1; }}
  return ({c})result;
}}"""


def _bind(make: Callable[[ElementType], str], t: ElementType) -> Callable[[], str]:
    return lambda: make(t)


for _t in _int_names():
    HELPERS[f"div_{_t.name}"] = _bind(_make_divisions, _t)
    HELPERS[f"ipow_{_t.name}"] = _bind(_make_ipow, _t)


def _make_int_mod(t: ElementType) -> str:
    c, n = storage_type(t), t.name
    if not t.is_signed:
        return f"""static inline {c} og_fmod_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a % b; }}
static inline {c} og_floormod_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a % b; }}"""
    return f"""static inline {c} og_fmod_{n}({c} a, {c} b) {{ /* sign of a; no trap at -1 */
  return (b == 0 || b == -1) ? 0 : ({c})(a % b);
}}
static inline {c} og_floormod_{n}({c} a, {c} b) {{ /* sign of b, as Python's % */
  if (b == 0 || b == -1) return 0;
  {c} r = ({c})(a % b);
  return (r != 0 && ((r < 0) != (b < 0))) ? ({c})(r + b) : r;
}}"""


def _make_float_mod(c: str, suffix: str) -> str:
    n = "f64" if c == "double" else "f32"
    fmod = f"__builtin_fmod{suffix}"
    return f"""static inline {c} og_fmod_{n}({c} a, {c} b) {{ return {fmod}(a, b); }}
static inline {c} og_floormod_{n}({c} a, {c} b) {{ /* numpy.remainder: the sign of b */
  {c} r = {fmod}(a, b);
  if (r != 0) {{ if ((r < 0) != (b < 0)) r += b; }}
  else r = __builtin_copysign{suffix}(0, b);
  return r;
}}"""


HELPERS["pool_count"] = lambda: (
    "static inline long og_count(long start, long taps, long low, long high) {\n"
    "  /* taps start, start+1, ... (padded coordinates) inside [low, high) */\n"
    "  long a = start > low ? start : low, b = start + taps < high ? start + taps : high;\n"
    "  return b > a ? b - a : 0;\n"
    "}"
)
#: The panel GEMV per instruction set: (macro test, floats per vector, accumulators over k).
#: A 16-column panel row is 16 / floats vectors; accumulators x vectors registers hold the
#: sums (AVX-512 4 zmm, AVX2 8 ymm, SSE 8 xmm). Vectors are the ISA's own width: GCC lowers a
#: wider generic vector through the stack.
GEMV_BLOCKING = (
    ("defined(__AVX512F__)", 16, 4),
    ("defined(__AVX__)", 8, 4),
    ("1", 4, 2),
)


def _gemv_panels(lanes: int, unroll: int) -> str:
    """The panel GEMV for vectors of ``lanes`` floats, ``unroll`` k-steps at a time."""
    parts = 16 // lanes
    acc = [f"a{u}_{v}" for u in range(unroll) for v in range(parts)]
    steps = []
    for u in range(unroll):
        steps.append(f"      const float s{u} = x[(k + {u}) * incx];")
        for v in range(parts):
            steps.append(
                f"      __builtin_memcpy(&q, p + (k + {u}) * 16 + {v * lanes}, {4 * lanes});"
            )
            steps.append(f"      a{u}_{v} += s{u} * q;")
    tail = []
    for v in range(parts):
        tail.append(f"      __builtin_memcpy(&q, p + k * 16 + {v * lanes}, {4 * lanes});")
        tail.append(f"      a0_{v} += x[k * incx] * q;")
    sums = []
    for v in range(parts):
        terms = [f"a{u}_{v}" for u in range(unroll)]
        while len(terms) > 1:  # pairwise: (a0 + a1) + (a2 + a3)
            terms = [f"({a} + {b})" for a, b in zip(terms[::2], terms[1::2], strict=True)]
        sums.append(f"    q = {terms[0]}; __builtin_memcpy(t + {v * lanes}, &q, {4 * lanes});")
    return "\n".join(
        [
            f"typedef float og_vg __attribute__((vector_size({4 * lanes})));",
            "/* y[first:last] = x (1 x K) times a matrix stored as 16-column panels (K x 16",
            f"   each): {unroll} accumulators over k of {parts} vector(s) each, streaming each",
            "   panel once. */",
            "static void og_gemv_panels(const float* restrict x, long incx,",
            "                           const float* restrict P, float* restrict y, long K,",
            "                           long first, long last) {",
            "  for (long c = first; c < last; c += 16) {",
            "    const float* p = P + (c / 16) * K * 16;",
            f"    og_vg q, {', '.join(f'{a} = {{0}}' for a in acc)};",
            "    float t[16];",
            "    long k = 0;",
            f"    for (; k + {unroll} <= K; k += {unroll}) {{",
            *steps,
            "    }",
            "    for (; k < K; ++k) {",
            *tail,
            "    }",
            *sums,
            "    long n = last - c < 16 ? last - c : 16;",
            "    for (long j = 0; j < n; ++j) y[c + j] = t[j];",
            "  }",
            "}",
        ]
    )


def _gemv_panels_per_isa() -> str:
    branches = []
    for i, (test, lanes, unroll) in enumerate(GEMV_BLOCKING):
        keyword = "#if" if i == 0 else "#elif"
        branches.append(f"{keyword} {test}\n{_gemv_panels(lanes, unroll)}")
    return "\n".join(branches) + "\n#endif"


HELPERS["gemv_panels"] = _gemv_panels_per_isa
HELPERS["stream_f32"] = lambda: (
    """typedef float og_v16sf __attribute__((vector_size(64)));
typedef float og_v8sf __attribute__((vector_size(32)));
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
#elif defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    og_v8sf v;
    __builtin_memcpy(&v, src + i, 32);
    __builtin_ia32_movntps256(dst + i, v);
  }
#endif
  for (; i < n; ++i) dst[i] = src[i];
}"""
)
#: Register blocking of the panel GEMM per instruction set, chosen by the compiler's target
#: macros: (macro test, floats per vector, rows, inner block). Each tile is ``rows`` x two
#: vectors of accumulators, with two vectors of the panel and one broadcast of ``a`` beside
#: them: AVX-512 12 x 32 (24 of 32 zmm registers), AVX2 6 x 16 (12 of 16 ymm: the classic
#: Haswell blocking; 12 x 32 would need 48 ymm and spill), SSE 6 x 8. The inner block keeps
#: a tile's rows and panel slice in L1 (32 KiB).
GEMM_BLOCKING = (
    ("defined(__AVX512F__)", 16, 12, 384),
    ("defined(__AVX__)", 8, 6, 256),
    ("1", 4, 6, 256),
)


def _gemm_panels(lanes: int, rows: int, depth: int) -> str:
    """The panel GEMM for vectors of ``lanes`` floats and tiles of ``rows`` rows."""
    width = 2 * lanes  # columns per tile: two vectors
    cases = " ".join(f"case {n}: OG_MK({n}); break;" for n in range(rows, 0, -1))
    return f"""typedef float og_vf __attribute__((vector_size({4 * lanes})));
/* c[R x nvalid] (+)= a[R x (k0..k1)] times p (rows of a 32-column panel, {width} columns read):
   2R accumulator vectors. */
static inline __attribute__((always_inline)) void og_mk(
    const int R, const float* restrict a, long lda, const float* restrict p, long k0, long k1,
    float* restrict c, long ldc, long nvalid) {{
  og_vf c0[{rows}], c1[{rows}];
  float t[{width}];
  for (int r = 0; r < R; ++r) {{
    if (k0 == 0) {{ c0[r] = (og_vf){{0}}; c1[r] = (og_vf){{0}}; continue; }}
    for (long j = 0; j < {width}; ++j) t[j] = j < nvalid ? c[r * ldc + j] : 0.0f;
    __builtin_memcpy(&c0[r], t, {4 * lanes});
    __builtin_memcpy(&c1[r], t + {lanes}, {4 * lanes});
  }}
  for (long k = k0; k < k1; ++k) {{
    og_vf b0, b1;
    __builtin_memcpy(&b0, p + k * 32, {4 * lanes});
    __builtin_memcpy(&b1, p + k * 32 + {lanes}, {4 * lanes});
    for (int r = 0; r < R; ++r) {{
      const float s = a[r * lda + k];
      c0[r] += s * b0;
      c1[r] += s * b1;
    }}
  }}
  for (int r = 0; r < R; ++r) {{
    if (nvalid == {width}) {{
      __builtin_memcpy(c + r * ldc, &c0[r], {4 * lanes});
      __builtin_memcpy(c + r * ldc + {lanes}, &c1[r], {4 * lanes});
      continue;
    }}
    __builtin_memcpy(t, &c0[r], {4 * lanes});
    __builtin_memcpy(t + {lanes}, &c1[r], {4 * lanes});
    for (long j = 0; j < nvalid; ++j) c[r * ldc + j] = t[j];
  }}
}}
/* C[:, n0:n1] = A (M x K, rows contiguous) times P (K x N as 32-column panels); n0 is a
   multiple of 32. Tiles of {rows} rows x {width} columns; the inner dimension is blocked by
   {depth} so a tile's rows stay in L1; the larger operand is streamed once (panels outer when
   P is larger, rows outer when A is). */
static void og_gemm_panels(const float* restrict A, long lda, const float* restrict P,
                           float* restrict C, long ldc, long M, long K, long n0, long n1) {{
  long first = n0 / 32, panels = (n1 + 31) / 32 - first;
  int rows_outer = M > 32 * panels;
  for (long k0 = 0; k0 < K; k0 += {depth}) {{
    long k1 = k0 + {depth} < K ? k0 + {depth} : K;
    long tiles = (M + {rows - 1}) / {rows};
    for (long outer = 0; outer < (rows_outer ? tiles : panels); ++outer)
      for (long inner = 0; inner < (rows_outer ? panels : tiles); ++inner) {{
        long nb = first + (rows_outer ? inner : outer);
        long m = {rows} * (rows_outer ? outer : inner);
        long valid = n1 - nb * 32 < 32 ? n1 - nb * 32 : 32;
        for (long j0 = 0; j0 < valid; j0 += {width}) {{
          long nvalid = valid - j0 < {width} ? valid - j0 : {width};
          const float* p = P + nb * K * 32 + j0;
          float* c = C + nb * 32 + j0;
#define OG_MK(R) og_mk(R, A + m * lda, lda, p, k0, k1, c + m * ldc, ldc, nvalid)
          switch (M - m < {rows} ? M - m : {rows}) {{ {cases} default: break; }}
#undef OG_MK
        }}
      }}
  }}
}}"""


def _gemm_panels_per_isa() -> str:
    branches = []
    for i, (test, lanes, rows, depth) in enumerate(GEMM_BLOCKING):
        keyword = "#if" if i == 0 else "#elif"
        branches.append(f"{keyword} {test}\n{_gemm_panels(lanes, rows, depth)}")
    return "\n".join(branches) + "\n#endif"


HELPERS["gemm_panels"] = _gemm_panels_per_isa
HELPERS["mod_f32"] = lambda: _make_float_mod("float", "f")
HELPERS["mod_f64"] = lambda: _make_float_mod("double", "")


def _make_float_to_int(t: ElementType) -> str:
    c, n = storage_type(t), t.name
    info = np.iinfo(t.dtype)
    high, low = _int_literal(int(info.max), t), _int_literal(int(info.min), t)
    return f"""static inline {c} og_f2i_{n}(double x) {{ /* truncate, saturate, NaN -> 0 */
  if (x != x) return 0;
  double t = __builtin_trunc(x);
  if (t >= (double){high}) return {high};
  if (t <= (double){low}) return {low};
  return ({c})t;
}}"""


for _t in _int_names():
    HELPERS[f"f2i_{_t.name}"] = _bind(_make_float_to_int, _t)
    HELPERS[f"mod_{_t.name}"] = _bind(_make_int_mod, _t)


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
