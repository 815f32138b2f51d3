"""8-bit integer products on the CPU: the C of :class:`QGemmStep` and :class:`QConvStep`
(``fused/lowering/quantized.py``), exact i32 sums of u8 x s8 products.

One micro-kernel family serves both: ``R`` rows (up to 12) of an operand ``A`` read as
*quads* (four consecutive inner-dimension bytes, broadcast to every lane) times a 32-column
panel of ``B`` stored as quads (128 bytes per quad row), into 2 x ``R`` vectors of 16 i32
accumulators. With AVX512-VNNI each step is one ``vpdpbusd`` per accumulator (u8 quad times s8
quad, summed into an i32 lane: no intermediate saturation, unlike AVX2's ``vpmaddubsw``):

* ``u`` kernels (matrix products): ``A`` is the u8 activations (i8 ones read with their sign
  bit flipped, the zero point moved by 128), ``B`` the constant s8 weights packed at compile
  time; the sums start from a per-column constant (``-a_zero · Σ_k w``).
* ``s`` kernels (convolutions): ``A`` is the constant s8 filter matrix (rows padded to whole
  quads), ``B`` the u8 patches of a block of output pixels, built as quads per thread (padding
  reads the zero point); the sums start from a per-row constant.

Without AVX512-VNNI but with AVX2 (AVX2-only CPUs, or ``CpuConfig(isa="avx2"/"avx512")``,
whose x86-64-v3/v4 targets do not include VNNI), the same layouts run through an AVX2 tile:
bytes widened to 16 bits and multiplied by ``vpmaddwd`` (two exact 16-bit products per i32
lane; ``vpmaddubsw`` would saturate u8 x s8 pairs), 2 rows x 16 columns of pair
accumulators: about 3x slower than ``vpdpbusd`` per thread, 2.2-2.4x faster than the
portable C that remains for other targets. The choice is made by the compiler's predefined
``__AVX512VNNI__`` / ``__AVX2__`` for the target flags of ``CpuConfig.isa``, like the f32
GEMM's blocking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.int8_patches import patch_quads
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.fused.lowering.quantized import (
    PANEL,
    QUAD,
    ROWS,
    QConvStep,
    QGemmStep,
    shared_blocks,
)
from opgraph.backends.fused.views import View, static, static_all

#: Quads of the inner dimension per block (a panel slice: 128 x 128 bytes, L1).
DEPTH = 128
#: Rows of ``A`` per chunk of the matrix-product driver (each panel slice serves them all).
CHUNK = 8 * ROWS

Emitted = tuple[str, str, tuple[Check, ...]]


def _pointer(module: ModuleContext, view: View, name: str, ctype: str) -> str:
    return f"  {ctype}* {name} = ({ctype}*)({module.base(view.buffer)}) + {view.offset}L;"


# ------------------------------------------------------------------------------ C kernels
def _micro_kernel(role: str, rows: int) -> str:
    """``og_q8<role>_mk<rows>``: c[rows x nvalid] = init (+)= a (rows lda apart, ``kq`` whole
    quads and ``tail`` bytes) times b (quad rows ldb apart). ``role`` "u": a is u8 (xor
    ``flip``), b s8; "s": a is s8, b u8."""
    rs = range(rows)
    init = [f"  og_qv x{r}_0, x{r}_1;" for r in rs]
    init.append("  if (accumulate) {")
    init += [f"    og_q_load(&x{r}_0, &x{r}_1, c + {r} * ldc, nvalid);" for r in rs]
    init.append("  } else if (col) {")
    init += [f"    og_q_load(&x{r}_0, &x{r}_1, col, nvalid);" for r in rs]
    init.append("  } else {")
    init += [f"    x{r}_0 = (og_qv){{}} + row[{r}]; x{r}_1 = x{r}_0;" for r in rs]
    init.append("  }")
    if role == "u":  # the activations' quad broadcast from memory, its sign bits flipped
        whole = "og_qv q = og_bcast({at}) ^ vflip;"
        part = "og_qv q = (og_qv){{}} + (int32_t)(og_part({at}, tail) ^ flip);"
        dots = "x{r}_0 = og_dot(x{r}_0, q, b0); x{r}_1 = og_dot(x{r}_1, q, b1);"
        whole, part = f"{whole} {dots}", f"{part} {dots}"
    else:  # the filters' quad (og_dot_m: broadcast by the instruction or into a register)
        whole = "x{r}_0 = og_dot_m(x{r}_0, b0, {at}); x{r}_1 = og_dot_m(x{r}_1, b1, {at});"
        part = (
            "x{r}_0 = og_dot_p(x{r}_0, b0, {at}, tail); x{r}_1 = og_dot_p(x{r}_1, b1, {at}, tail);"
        )
    # one row at a time: 2 x rows accumulators, two B vectors and one broadcast live (the
    # broadcasts of every row first spilled accumulators)
    step: list[str] = []
    tail: list[str] = []
    for r in rs:
        at = f"a + {r} * lda + 4 * k"
        step.append("    { " + whole.format(r=r, at=at) + " }")
        tail.append("    { " + part.format(r=r, at=at) + " }")
    store = [f"  og_q_store(x{r}_0, x{r}_1, c + {r} * ldc, nvalid);" for r in rs]
    return "\n".join(
        [
            f"static inline __attribute__((always_inline)) void og_q8{role}_mk{rows}(",
            "    const uint8_t* restrict a, long lda, const uint8_t* restrict b, long ldb,",
            "    long kq, long tail, int32_t* restrict c, long ldc, long nvalid,",
            "    const int32_t* col, const int32_t* row, int accumulate, uint32_t flip) {",
            *init,
            "  const og_qv vflip = (og_qv){} + (int32_t)flip;",
            "  long k = 0;",
            "  for (; k < kq; ++k) {",
            "    og_qv b0, b1;",
            "    __builtin_memcpy(&b0, b + k * ldb, 64);",
            "    __builtin_memcpy(&b1, b + k * ldb + 64, 64);",
            *_prefetch(role),
            *step,
            "  }",
            "  if (tail) {",
            "    og_qv b0, b1;",
            "    __builtin_memcpy(&b0, b + k * ldb, 64);",
            "    __builtin_memcpy(&b1, b + k * ldb + 64, 64);",
            *tail,
            "  }",
            *store,
            "}",
        ]
    )


def _prefetch(role: str) -> list[str]:
    """The "u" kernels' prefetch of the weight panel they stream (both lines of its quad row
    ``dialect.PANEL_PREFETCH_ROWS`` rows ahead, as the f32 AVX-512 kernels): the first row
    tile over each panel slice reads it from L3 or memory."""
    return dialect.panel_prefetch("b", "ldb", 64).splitlines() if role == "u" else []


_COMMON_TEMPLATE = """typedef int32_t og_qv __attribute__((vector_size(64)));
typedef uint32_t og_qu32 __attribute__((aligned(1), may_alias));
static inline __attribute__((always_inline)) uint32_t og_quad(const uint8_t* p) {
  return *(const og_qu32*)p;
}
/* the first n (< 4) bytes of a quad, the rest zero (never read past a row's end) */
static inline __attribute__((always_inline)) uint32_t og_part(const uint8_t* p, long n) {
  uint32_t v = 0;
  for (long t = 0; t < n; ++t) v |= (uint32_t)p[t] << (8 * t);
  return v;
}
static inline __attribute__((always_inline)) void og_q_load(og_qv* lo, og_qv* hi,
                                                            const int32_t* c, long nvalid) {
  int32_t t[32];
  for (long j = 0; j < 32; ++j) t[j] = j < nvalid ? c[j] : 0;
  __builtin_memcpy(lo, t, 64);
  __builtin_memcpy(hi, t + 16, 64);
}
static inline __attribute__((always_inline)) void og_q_store(og_qv lo, og_qv hi, int32_t* c,
                                                             long nvalid) {
  if (nvalid == 32) {
    __builtin_memcpy(c, &lo, 64);
    __builtin_memcpy(c + 16, &hi, 64);
    return;
  }
  int32_t t[32];
  __builtin_memcpy(t, &lo, 64);
  __builtin_memcpy(t + 16, &hi, 64);
  for (long j = 0; j < nvalid; ++j) c[j] = t[j];
}
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
/* acc += per 32-bit lane, the four u8 bytes of u times the four s8 bytes of s */
static inline __attribute__((always_inline)) og_qv og_dot(og_qv acc, og_qv u, og_qv s) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
  return acc;
}
/* acc += u times the s8 quad at p broadcast to every lane: an embedded broadcast where
   dialect.BROADCAST_TARGETS takes them (Zen 4), a vpbroadcastd into a register elsewhere */
#if %(broadcast)s
static inline __attribute__((always_inline)) og_qv og_dot_m(og_qv acc, og_qv u,
                                                            const uint8_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const og_qu32*)p));
  return acc;
}
#else
static inline __attribute__((always_inline)) og_qv og_dot_m(og_qv acc, og_qv u,
                                                            const uint8_t* p) {
  return og_dot(acc, u, (og_qv){} + (int32_t)og_quad(p));
}
#endif
/* the quad at p in every lane, broadcast from memory (GCC turns a quad xor-ed after its
   broadcast back into a scalar load, xor and broadcast from a general register: slower) */
static inline __attribute__((always_inline)) og_qv og_bcast(const uint8_t* p) {
  og_qv q;
  __asm__("vpbroadcastd %1, %0" : "=v"(q) : "m"(*(const og_qu32*)p));
  return q;
}
/* a partial quad (n < 4 bytes, the rest zero) broadcast */
static inline __attribute__((always_inline)) og_qv og_dot_p(og_qv acc, og_qv u,
                                                            const uint8_t* p, long n) {
  return og_dot(acc, u, (og_qv){} + (int32_t)og_part(p, n));
}
#elif defined(__AVX2__)
/* AVX2 without VNNI: bytes widened to 16 bits (vpmovzxbw / vpmovsxbw) and multiplied by
   vpmaddwd, which sums two 16-bit products into each 32-bit lane exactly (vpmaddubsw would
   saturate u8 x s8 pairs at 32767). A lane holds column j's products of quad bytes (0, 1) or
   (2, 3); the pairs are added when the tile is stored. Tiles of up to 2 rows x 16 columns:
   8 ymm accumulators, 4 widened B vectors, one broadcast A quad and a product (3 rows
   needed 17 of the 16 ymm registers and spilled two accumulators). */
typedef short og_h16 __attribute__((vector_size(32)));
typedef int og_i32x8 __attribute__((vector_size(32)));
typedef long long og_q64 __attribute__((vector_size(32)));
typedef char og_s8x16 __attribute__((vector_size(16)));
static inline __attribute__((always_inline)) og_h16 og_widen(const uint8_t* p, int is_signed) {
  og_s8x16 v;
  __builtin_memcpy(&v, p, 16);
  if (is_signed) return (og_h16)__builtin_ia32_pmovsxbw256(v);
  return (og_h16)__builtin_ia32_pmovzxbw256(v);
}
/* the quad's four bytes as 16-bit values, repeated in every 64-bit lane: the quad
   broadcast to 16 bytes (vpbroadcastd), then widened (vpmovzxbw / vpmovsxbw) */
static inline __attribute__((always_inline)) og_h16 og_quad16(uint32_t v, int is_signed) {
  typedef uint32_t og_u32x4 __attribute__((vector_size(16)));
  og_u32x4 q = (og_u32x4){} + v;
  if (is_signed) return (og_h16)__builtin_ia32_pmovsxbw256((og_s8x16)q);
  return (og_h16)__builtin_ia32_pmovzxbw256((og_s8x16)q);
}
/* c[r][j] = start + the lane pair (2j, 2j + 1) of the row's four accumulators */
static inline __attribute__((always_inline)) void og_q8_pairs(
    og_i32x8 x0, og_i32x8 x1, og_i32x8 x2, og_i32x8 x3, int32_t* c, long n,
    const int32_t* col, int32_t row, int accumulate) {
  int32_t t[32];
  __builtin_memcpy(t, &x0, 32);
  __builtin_memcpy(t + 8, &x1, 32);
  __builtin_memcpy(t + 16, &x2, 32);
  __builtin_memcpy(t + 24, &x3, 32);
  for (long j = 0; j < n; ++j) {
    int32_t start = accumulate ? c[j] : col ? col[j] : row;
    c[j] = start + t[2 * j] + t[2 * j + 1];
  }
}
%(blocks)s
/* rows x 32 columns (two halves of 16), rows in blocks of 2 */
static void og_q8_tile(const uint8_t* restrict a, long lda, const uint8_t* restrict b,
                       long ldb, long kq, long tail, int32_t* restrict c, long ldc,
                       long nvalid, const int32_t* col, const int32_t* row, int accumulate,
                       uint32_t flip, int rows, int a_signed) {
  for (long h = 0; h < 2 && 16 * h < nvalid; ++h) {
    const uint8_t* bh = b + 64 * h;
    int32_t* ch = c + 16 * h;
    const int32_t* colh = col ? col + 16 * h : col;
    long valid = nvalid - 16 * h;
    for (int r0 = 0; r0 < rows; r0 += 2) {
      const uint8_t* ar = a + r0 * lda;
      int32_t* cr = ch + r0 * ldc;
      const int32_t* rowr = row ? row + r0 : row;
      int rr = rows - r0 < 2 ? rows - r0 : 2;
#define OG_Q8X(N) og_q8x_mk##N(ar, lda, bh, ldb, kq, tail, cr, ldc, valid < 16 ? valid : 16, \
                               colh, rowr, accumulate, flip, a_signed)
      if (rr == 2) OG_Q8X(2); else OG_Q8X(1);
#undef OG_Q8X
    }
  }
}
#else
/* Without VNNI: one generic tile (rows x 32 columns of i32 sums), the byte products widened
   by the compiler's vectorizer. Exact; kept out of line and unspecialized so that building
   the library stays quick. */
static void og_q8_tile(const uint8_t* restrict a, long lda, const uint8_t* restrict b,
                       long ldb, long kq, long tail, int32_t* restrict c, long ldc,
                       long nvalid, const int32_t* col, const int32_t* row, int accumulate,
                       uint32_t flip, int rows, int a_signed) {
  int32_t acc[12][32];
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < 32; ++j)
      acc[r][j] = accumulate ? (j < nvalid ? c[r * ldc + j] : 0)
                             : col ? (j < nvalid ? col[j] : 0) : row[r];
  for (long k = 0; k < kq + (tail ? 1 : 0); ++k) {
    const uint8_t* q = b + k * ldb;
    int32_t w[4][32];
    for (int t = 0; t < 4; ++t)
      for (int j = 0; j < 32; ++j)
        w[t][j] = a_signed ? (int32_t)q[4 * j + t] : (int32_t)(int8_t)q[4 * j + t];
    for (int r = 0; r < rows; ++r) {
      uint32_t v = (k < kq ? og_quad(a + r * lda + 4 * k) : og_part(a + r * lda + 4 * k, tail));
      v ^= flip;
      int32_t x[4];
      for (int t = 0; t < 4; ++t) {
        uint8_t byte = (uint8_t)(v >> (8 * t));
        x[t] = a_signed ? (int32_t)(int8_t)byte : (int32_t)byte;
      }
      for (int j = 0; j < 32; ++j)
        acc[r][j] += x[0] * w[0][j] + x[1] * w[1][j] + x[2] * w[2][j] + x[3] * w[3][j];
    }
  }
  for (int r = 0; r < rows; ++r)
    for (long j = 0; j < nvalid; ++j) c[r * ldc + j] = acc[r][j];
}
#endif"""


def _avx2_block(rows: int) -> str:
    """``og_q8x_mk<rows>``: ``rows`` x 16 columns on AVX2 (4 ymm accumulators per row, each
    lane a pair of 16-bit products; see ``_COMMON_TEMPLATE``)."""
    rs = range(rows)
    accs = [f"  og_i32x8 x{r}_{g} = {{}};" for r in rs for g in range(4)]

    def step(read: str) -> list[str]:
        lines = []
        for r in rs:
            at = f"a + {r} * lda + 4 * k"
            lines.append(f"    {{ og_h16 h = og_quad16({read.format(at=at)} ^ flip, a_signed);")
            lines += [
                f"      x{r}_{g} += (og_i32x8)__builtin_ia32_pmaddwd256(h, w{g});" for g in range(4)
            ]
            lines.append("    }")
        return lines

    widen = [
        "    const uint8_t* q = b + k * ldb;",
        *(f"    og_h16 w{g} = og_widen(q + {16 * g}, !a_signed);" for g in range(4)),
    ]
    stores = [
        f"  og_q8_pairs(x{r}_0, x{r}_1, x{r}_2, x{r}_3, c + {r} * ldc, n, col, "
        f"row ? row[{r}] : 0, accumulate);"
        for r in rs
    ]
    return "\n".join(
        [
            f"static inline __attribute__((always_inline)) void og_q8x_mk{rows}(",
            "    const uint8_t* restrict a, long lda, const uint8_t* restrict b, long ldb,",
            "    long kq, long tail, int32_t* restrict c, long ldc, long n, const int32_t* col,",
            "    const int32_t* row, int accumulate, uint32_t flip, int a_signed) {",
            *accs,
            "  long k = 0;",
            "  for (; k < kq; ++k) {",
            *widen,
            *step("og_quad({at})"),
            "  }",
            "  if (tail) {",
            *widen,
            *step("og_part({at}, tail)"),
            "  }",
            *stores,
            "}",
        ]
    )


_COMMON = _COMMON_TEMPLATE.replace("%(blocks)s", "\n".join(_avx2_block(r) for r in (1, 2))).replace(
    "%(broadcast)s", dialect.BROADCAST_TARGETS
)


def _kernels(role: str) -> str:
    """The shared definitions (once per source) and the ``role`` micro-kernels."""
    kernels = "\n".join(_micro_kernel(role, r) for r in range(1, ROWS + 1))
    return f"""#ifndef OG_Q8_COMMON
#define OG_Q8_COMMON
{_COMMON}
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define OG_QMK(R, N) og_q8##R##_mk##N(OG_A, OG_LDA, OG_B, OG_LDB, kq, tail, OG_C, ldc, \\
                                    valid, OG_COL, OG_ROW, k0 > 0, flip)
#else
#define OG_QMK(R, N) og_q8_tile(OG_A, OG_LDA, OG_B, OG_LDB, kq, tail, OG_C, ldc, valid, \\
                                OG_COL, OG_ROW, k0 > 0, flip, N, #R[0] == 's')
#endif
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
{kernels}
#endif"""


@dialect.helper("q8_gemm")
def _q8_gemm() -> str:
    cases = " ".join(f"case {n}: OG_QMK(u, {n}); break;" for n in range(ROWS, 0, -1))
    return f"""{_kernels("u")}
/* C[:, n0:n1] = A (M rows of K u8, lda apart; flip xors each quad) times P (K x N s8 as quad
   panels of 32 columns, ceil(K/4) quad rows each) plus col[n]; n0 is a multiple of 32.
   Blocked by {DEPTH} quads of the inner dimension and chunks of {CHUNK} rows: each panel slice
   (L1) serves every tile of the chunk. */
static inline __attribute__((always_inline)) void og_q8_gemm_body(
    const uint8_t* restrict A, long lda, const int8_t* restrict P, int32_t* restrict C,
    long ldc, long M, long K, long n0, long n1, const int32_t* restrict col, uint32_t flip) {{
  long quads = (K + 3) / 4, whole = K / 4, first = n0 / 32, last = (n1 + 31) / 32;
  for (long k0 = 0; k0 < quads; k0 += {DEPTH}) {{
    long k1 = k0 + {DEPTH} < quads ? k0 + {DEPTH} : quads;
    long kq = (k1 < whole ? k1 : whole) - k0, tail = k1 > whole ? K % 4 : 0;
    for (long m0 = 0; m0 < M; m0 += {CHUNK}) {{
      long m1 = m0 + {CHUNK} < M ? m0 + {CHUNK} : M;
      for (long nb = first; nb < last; ++nb) {{
        long valid = n1 - nb * 32 < 32 ? n1 - nb * 32 : 32;
        for (long m = m0; m < m1; m += {ROWS}) {{
          int rows = m1 - m < {ROWS} ? (int)(m1 - m) : {ROWS};
#define OG_A (A + m * lda + 4 * k0)
#define OG_LDA lda
#define OG_B ((const uint8_t*)P + (nb * quads + k0) * 128)
#define OG_LDB 128
#define OG_C (C + m * ldc + nb * 32)
#define OG_COL (col + nb * 32)
#define OG_ROW ((const int32_t*)0)
          switch (rows) {{ {cases} default: break; }}
#undef OG_A
#undef OG_LDA
#undef OG_B
#undef OG_LDB
#undef OG_C
#undef OG_COL
#undef OG_ROW
        }}
      }}
    }}
  }}
}}
/* u8 activations (flip 0) take a copy of the body without the xor: with it, every quad
   broadcast costs a vpxord on the ports of the vpdpbusd (12 per 24 on Intel) */
static void og_q8_gemm(const uint8_t* restrict A, long lda, const int8_t* restrict P,
                       int32_t* restrict C, long ldc, long M, long K, long n0, long n1,
                       const int32_t* restrict col, uint32_t flip) {{
  if (flip)
    og_q8_gemm_body(A, lda, P, C, ldc, M, K, n0, n1, col, flip);
  else
    og_q8_gemm_body(A, lda, P, C, ldc, M, K, n0, n1, col, 0u);
}}"""


@dialect.helper("q8_conv_gemm")
def _q8_conv_gemm() -> str:
    cases = " ".join(f"case {n}: OG_QMK(s, {n}); break;" for n in range(ROWS, 0, -1))
    return f"""{_kernels("s")}
/* Y[O x cols] (rows ldy apart) = W (O rows of quads*4 s8 bytes) times B (u8 quads: quads rows
   of pitch*4 bytes, pitch a multiple of 32) plus row[o]. Blocked by {DEPTH} quads; each
   32-column panel slice of B (L1) serves every row tile. */
static void og_q8_conv_gemm(const int8_t* restrict W, const uint8_t* restrict B, long pitch,
                            int32_t* restrict Y, long ldy, long O, long quads, long cols,
                            const int32_t* restrict row) {{
  const uint32_t flip = 0;
  const long ldc = ldy, tail = 0;
  for (long k0 = 0; k0 < quads; k0 += {DEPTH}) {{
    long kq = k0 + {DEPTH} < quads ? {DEPTH} : quads - k0;
    for (long nb = 0; nb * 32 < cols; ++nb) {{
      long valid = cols - nb * 32 < 32 ? cols - nb * 32 : 32;
      for (long m = 0; m < O; m += {ROWS}) {{
        int rows = O - m < {ROWS} ? (int)(O - m) : {ROWS};
#define OG_A ((const uint8_t*)W + m * quads * 4 + 4 * k0)
#define OG_LDA (quads * 4)
#define OG_B (B + (k0 * pitch + nb * 32) * 4)
#define OG_LDB (pitch * 4)
#define OG_C (Y + m * ldy + nb * 32)
#define OG_COL ((const int32_t*)0)
#define OG_ROW (row + m)
        switch (rows) {{ {cases} default: break; }}
#undef OG_A
#undef OG_LDA
#undef OG_B
#undef OG_LDB
#undef OG_C
#undef OG_COL
#undef OG_ROW
      }}
    }}
  }}
}}"""


# ------------------------------------------------------------------------------ emitters
def _epilogue(step: Any, name: str, module: ModuleContext, checks: list[Check]) -> list[str]:
    if step.epilogue is None:
        return []
    emitter = CLoopEmitter(step.epilogue, f"{name}_ep", module, "epilogue of " + name, checks)
    return [emitter.emit()]


def _runner(name: str, units: int, parallel: bool, module: ModuleContext) -> list[str]:
    threads = module.num_threads
    if parallel and units > 1 and threads > 1:
        module.uses_pool = True
        call = f"og_parallel({name}, T, A, {units}L, 1L, {threads})"
    else:
        call = f"{name}(T, A, 0, {units}L)"
    return [f"static int {name}_run(void* const* T, char* A) {{", f"  return {call};", "}"]


def emit_gemm(step: QGemmStep, name: str, module: ModuleContext, checks: list[Check]) -> str:
    """Units: blocks of whole 32-column panels, each followed by its epilogue rows."""
    assert step.a is not None and step.b is not None and step.out is not None
    assert step.offsets is not None
    module.helper("q8_gemm")
    rows, inner = static_all(step.a.shape)
    cols = static(step.b.shape[1])
    lda = step.a.strides[0] if rows > 1 else inner
    panels = -(-cols // PANEL)
    parallel = rows * cols * inner >= PARALLEL_MACS
    blocks = min(panels, 4 * module.num_threads) if parallel else 1
    flip = "0x80808080u" if step.flip else "0u"
    ep = []
    if step.epilogue is not None:
        ep = [
            f"    for (long r_ = 0; r_ < {rows}L; ++r_)",
            f"      err |= {name}_ep(T, A, r_ * {cols}L + n0, r_ * {cols}L + n1);",
        ]
    lines = [
        f"/* {name}: {step.label.replace('*/', '* /')} */",
        *_epilogue(step, name, module, checks),
        f"static int {name}(void* const* T, char* A, long lo, long hi) {{",
        "  int err = 0;",
        _pointer(module, step.a, "a", "const uint8_t"),
        _pointer(module, step.b, "b", "const int8_t"),
        _pointer(module, step.out, "c", "int32_t"),
        _pointer(module, step.offsets, "col", "const int32_t"),
        "  for (long u_ = lo; u_ < hi; ++u_) {",
        f"    long n0 = {panels}L * u_ / {blocks}L * 32;",
        f"    long n1 = {panels}L * (u_ + 1) / {blocks}L * 32;",
        f"    if (n1 > {cols}L) n1 = {cols}L;",
        "    if (n0 >= n1) continue;",
        f"    og_q8_gemm(a, {lda}L, b, c, {cols}L, {rows}L, {inner}L, n0, n1, col, {flip});",
        *ep,
        "  }",
        "  return err;",
        "}",
        *_runner(name, blocks, parallel, module),
    ]
    return "\n".join(lines)


class QConvEmitter:
    """Units: (image, group, block of output rows); the block's patches as u8 quads in this
    thread's scratch, then ``og_q8_conv_gemm`` straight into the output, then the epilogue."""

    def __init__(self, step: QConvStep, name: str, module: ModuleContext, checks: list[Check]):
        assert step.x is not None and step.w is not None and step.out is not None
        self.step, self.name, self.module, self.checks = step, name, module, checks
        self.x, self.w, self.out = step.x, step.w, step.out

    def emit(self) -> str:
        s = self.step
        assert s.scratch is not None and s.offsets is not None
        self.module.helper("q8_conv_gemm")
        n, c = static_all(self.x.shape[:2])
        o, k = static_all(self.w.shape)
        _, oh, ow = s.images
        self.g, self.cg, self.og = s.groups, c // s.groups, o // s.groups
        self.quads = -(-k // QUAD)
        self.parallel = n * o * oh * ow * k >= PARALLEL_MACS
        head = [
            f"/* {self.name}: {s.label.replace('*/', '* /')} */",
            *_epilogue(s, self.name, self.module, self.checks),
        ]
        if s.batched:
            body = self.emit_batched()
        else:
            body = self.emit_shared() if s.shared else self.emit_rows()
        return "\n".join(head + body)

    def pointers(self) -> list[str]:
        s = self.step
        assert s.scratch is not None and s.offsets is not None
        return [
            _pointer(self.module, self.x, "x0", "const uint8_t"),
            _pointer(self.module, self.w, "w0", "const int8_t"),
            _pointer(self.module, self.out, "y0", "int32_t"),
            _pointer(self.module, s.offsets, "row0", "const int32_t"),
            _pointer(self.module, s.scratch, "scratch", "uint8_t"),
        ]

    def gemm(self, first: str, count: str) -> list[str]:
        """Output channels ``first`` .. ``first + count`` of group ``grp``, image ``img``,
        rows ``oh0`` .. ``oh1``, from the patches at ``col``; then their epilogue."""
        _, o, oh, ow = static_all(self.out.shape)
        lines = [
            f"    og_q8_conv_gemm(w0 + (grp * {self.og}L + {first}) * {self.quads * QUAD}L, col, "
            f"pitch, y0 + img * {o * oh * ow}L + (grp * {self.og}L + {first}) * {oh * ow}L"
            f" + oh0 * {ow}L, {oh * ow}L, {count}, {self.quads}L, cols, "
            f"row0 + grp * {self.og}L + {first});",
        ]
        if self.step.epilogue is not None:
            lines += [
                f"    for (long q_ = {first}; q_ < {first} + {count}; ++q_) {{",
                f"      long at_ = img * {o * oh * ow}L + (grp * {self.og}L + q_) * {oh * ow}L",
                f"                 + oh0 * {ow}L;",
                f"      err |= {self.name}_ep(T, A, at_, at_ + cols);",
                "    }",
            ]
        return lines

    def emit_rows(self) -> list[str]:
        """Units: (image, group, block of output rows), patches in this thread's scratch."""
        s = self.step
        n, _, h, w = static_all(self.x.shape)
        k = static(self.w.shape[1])
        _, oh, ow = s.images
        g, xs = self.g, self.x.strides
        blocks = -(-oh // s.block_rows)
        pitch_max = -(-(s.block_rows * ow) // PANEL) * PANEL
        per_thread = self.quads * QUAD * pitch_max
        return [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            *self.pointers(),
            f"  uint8_t* col = scratch + (long)og_worker_index() * {per_thread}L;",
            f"  uint8_t lanes[4][{pitch_max}];",
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {g * blocks}L, grp = (u / {blocks}L) % {g}L, blk = u % {blocks}L;",
            f"    long oh0 = blk * {s.block_rows}L;",
            f"    long oh1 = oh0 + {s.block_rows}L < {oh}L ? oh0 + {s.block_rows}L : {oh}L;",
            f"    long cols = (oh1 - oh0) * {ow}L, pitch = (cols + 31) / 32 * 32, span = pitch;",
            f"    const uint8_t* x = x0 + img * {xs[0]}L + grp * {self.cg * xs[1]}L;",
            *patch_quads(self.step, self.x, self.cg, k, self.quads, (h, w), ow),
            *self.gemm("0L", f"{self.og}L"),
            "  }",
            "  return err;",
            "}",
            *_runner(self.name, n * g * blocks, self.parallel, self.module),
        ]

    def emit_shared(self) -> list[str]:
        """Phase 1, units (image, group): all the plane's patches into the unit's own slice
        of scratch. Phase 2, units (group, block of output channels), each over every image:
        the block's filters stay in L2 while the images' patches stream past them (a unit per
        image re-read all the filters from memory for every image)."""
        s = self.step
        n, _, h, w = static_all(self.x.shape)
        k = static(self.w.shape[1])
        _, oh, ow = s.images
        g, xs = self.g, self.x.strides
        pitch = -(-(oh * ow) // PANEL) * PANEL
        per_unit = self.quads * QUAD * pitch
        blocks, rows = shared_blocks(self.og, g, self.module.num_threads)
        sizes = [
            f"    long cols = {oh * ow}L, pitch = {pitch}L, span = pitch, oh0 = 0, oh1 = {oh}L;"
        ]
        patches = self.name + "_patches"
        return [
            f"static int {patches}(void* const* T, char* A, long lo, long hi) {{",
            *self.pointers(),
            f"  uint8_t lanes[4][{pitch}];",
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {g}L, grp = u % {g}L;",
            *sizes,
            f"    uint8_t* col = scratch + u * {per_unit}L;",
            f"    const uint8_t* x = x0 + img * {xs[0]}L + grp * {self.cg * xs[1]}L;",
            *patch_quads(self.step, self.x, self.cg, k, self.quads, (h, w), ow),
            "  }",
            "  return 0;",
            "}",
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            *self.pointers(),
            "  for (long v = lo; v < hi; ++v) {",
            f"    long grp = v / {blocks}L, first = v % {blocks}L * {rows}L;",
            f"    long count = first + {rows}L < {self.og}L ? {rows}L : {self.og}L - first;",
            *sizes,
            f"    for (long img = 0; img < {n}L; ++img) {{",
            f"    uint8_t* col = scratch + (img * {g}L + grp) * {per_unit}L;",
            *self.gemm("first", "count"),
            "    }",
            "  }",
            "  return err;",
            "}",
            *self.two_phases(patches, n * g, g * blocks),
        ]

    def two_phases(self, patches: str, units: int, products: int) -> list[str]:
        """The runners of the patch phase (``units`` units of ``patches``) and the product
        phase (``products`` units of this step's function), and ``<name>_run`` calling both."""
        return [
            *_runner(patches, units, self.parallel, self.module),
            f"static int {self.name}_phase(void* const* T, char* A) {{",
            *_runner(self.name, products, self.parallel, self.module)[1:2],
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            f"  int err = {patches}_run(T, A);",
            f"  return err ? err : {self.name}_phase(T, A);",
            "}",
        ]

    def emit_batched(self) -> list[str]:
        """Phase 1, units (image, group): the image's patches as columns ``img · P`` ..
        of its group's matrix (the last image also zeroes the padding columns). Phase 2,
        units (group, block of output channels): one product over every image's columns
        into this thread's i32 slice of ``scratch``, then each (channel, image) row copied
        to the output and its epilogue run."""
        s = self.step
        n, _, h, w = static_all(self.x.shape)
        k = static(self.w.shape[1])
        _, oh, ow = s.images
        o = static(self.out.shape[1])
        g, xs, plane = self.g, self.x.strides, oh * ow
        pitch = -(-(n * plane) // PANEL) * PANEL
        per_group = self.quads * QUAD * pitch
        blocks, rows = shared_blocks(self.og, g, self.module.num_threads)
        last = pitch - (n - 1) * plane
        patches = self.name + "_patches"
        epilogue = []
        if s.epilogue is not None:
            epilogue = [f"        err |= {self.name}_ep(T, A, at_, at_ + {plane}L);"]
        return [
            f"static int {patches}(void* const* T, char* A, long lo, long hi) {{",
            *self.pointers(),
            f"  uint8_t lanes[4][{max(plane, last)}];",
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {g}L, grp = u % {g}L;",
            f"    long cols = {plane}L, pitch = {pitch}L, oh0 = 0, oh1 = {oh}L;",
            f"    long span = img == {n - 1}L ? {last}L : {plane}L;",
            f"    uint8_t* col = scratch + grp * {per_group}L + img * {plane * QUAD}L;",
            f"    const uint8_t* x = x0 + img * {xs[0]}L + grp * {self.cg * xs[1]}L;",
            *patch_quads(self.step, self.x, self.cg, k, self.quads, (h, w), ow),
            "  }",
            "  return 0;",
            "}",
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            *self.pointers(),
            f"  int32_t* tmp = (int32_t*)(scratch + {g * per_group}L) + "
            f"(long)og_worker_index() * {rows * pitch}L;",
            "  for (long v = lo; v < hi; ++v) {",
            f"    long grp = v / {blocks}L, first = v % {blocks}L * {rows}L;",
            f"    long count = first + {rows}L < {self.og}L ? {rows}L : {self.og}L - first;",
            f"    long channel = grp * {self.og}L + first;",
            f"    og_q8_conv_gemm(w0 + channel * {self.quads * QUAD}L, "
            f"scratch + grp * {per_group}L, {pitch}L, tmp, {pitch}L, count, {self.quads}L, "
            f"{n * plane}L, row0 + channel);",
            "    for (long q_ = 0; q_ < count; ++q_) {",
            f"      for (long img = 0; img < {n}L; ++img) {{",
            f"        long at_ = img * {o * plane}L + (channel + q_) * {plane}L;",
            f"        __builtin_memcpy(y0 + at_, tmp + q_ * {pitch}L + img * {plane}L, "
            f"{plane * 4});",
            *epilogue,
            "      }",
            "    }",
            "  }",
            "  return err;",
            "}",
            *self.two_phases(patches, n * g, g * blocks),
        ]


def _gemm(step: QGemmStep, i: int, module: ModuleContext) -> Emitted:
    checks: list[Check] = []
    text = emit_gemm(step, f"g{i}", module, checks)
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


def _conv(step: QConvStep, i: int, module: ModuleContext) -> Emitted:
    checks: list[Check] = []
    text = QConvEmitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


#: The C generator of each 8-bit step (``module.STEP_EMITTERS`` takes them in).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], Emitted]] = {
    QGemmStep: _gemm,
    QConvStep: _conv,
}
