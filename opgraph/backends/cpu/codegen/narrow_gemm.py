"""The narrow panel GEMM: rows of ``a`` times a constant matrix of at most 16 columns, stored
as one zero-padded 16-column panel (``K x 16``, the panel GEMV's layout), for a classifier's
last layer at batch > 1 (the W3 MLP's 256 x 512 @ 512 x 10).

Each tile of rows keeps one row of 16 sums per row of ``a`` (one AVX-512 vector, two AVX2
ones) and walks ``k`` once: a load of the panel row and one broadcast multiply-add per row.
Each sum runs over ``k`` in order in one accumulator (a fused multiply-add where the target
has one), so the result differs from OpenBLAS's, which it replaces, by f32 rounding only.
Rows past the last whole tile run in tiles of a third (latency bound, a tail only) and one.
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen.dialect import helper, isa_branches
from opgraph.backends.fused.lowering.linalg import GEMV_PANEL

#: Columns of the panel: one AVX-512 vector, the panel GEMV's.
WIDTH = GEMV_PANEL

#: Tiles per instruction set: (macro test, floats per vector, rows of a whole tile). A tile
#: holds rows x 16 / floats accumulators beside 16 / floats panel vectors: AVX-512 12 + 1 of
#: 32 zmm, AVX2 12 + 2 of 16 ymm, SSE 8 + 4 of 16 xmm.
NARROW_BLOCKING = (
    ("defined(__AVX512F__)", 16, 12),
    ("defined(__AVX__)", 8, 6),
    ("1", 4, 2),
)


def _tile(lanes: int, rows: int) -> str:
    """``og_narrow_<rows>``: ``rows`` rows of ``c`` (``n`` <= 16 columns) from ``rows`` rows of
    ``a`` and the panel ``p``, for vectors of ``lanes`` floats."""
    parts = WIDTH // lanes
    acc = [f"s{r}_{v}" for r in range(rows) for v in range(parts)]
    body = []
    for v in range(parts):
        body.append(f"    __builtin_memcpy(&q{v}, p + k * {WIDTH} + {v * lanes}, {4 * lanes});")
    for r in range(rows):
        body.append(f"    const float x{r} = a[{r} * lda + k];")
        body += [f"    s{r}_{v} += x{r} * q{v};" for v in range(parts)]
    stores = []
    for r in range(rows):
        stores += [
            f"  __builtin_memcpy(t + {v * lanes}, &s{r}_{v}, {4 * lanes});" for v in range(parts)
        ]
        stores.append(f"  for (long j = 0; j < n; ++j) c[{r} * ldc + j] = t[j];")
    return "\n".join(
        [
            f"static inline void og_narrow_{rows}(const float* restrict a, long lda,",
            "    const float* restrict p, float* restrict c, long ldc, long K, long n) {",
            f"  og_vn {', '.join(f'q{v}' for v in range(parts))};",
            f"  og_vn {', '.join(f'{s} = {{0}}' for s in acc)};",
            f"  float t[{WIDTH}];",
            "  for (long k = 0; k < K; ++k) {",
            *body,
            "  }",
            *stores,
            "}",
        ]
    )


def _narrow(lanes: int, rows: int) -> str:
    """The tiles and ``og_gemm_narrow`` for vectors of ``lanes`` floats."""
    sizes = sorted({rows, max(1, rows // 3), 1}, reverse=True)
    loops = [
        f"  for (; i + {size} <= M; i += {size}) "
        f"og_narrow_{size}(A + i * lda, lda, P, C + i * ldc, ldc, K, N);"
        for size in sizes
    ]
    return "\n".join(
        [
            f"typedef float og_vn __attribute__((vector_size({4 * lanes})));",
            *(_tile(lanes, size) for size in sizes),
            "/* C (M x N, N <= 16, row stride ldc) = A (M x K, row stride lda) times the",
            "   zero-padded K x 16 panel P. */",
            "static void og_gemm_narrow(const float* restrict A, long lda,",
            "    const float* restrict P, float* restrict C, long ldc, long M, long K, long N) {",
            "  long i = 0;",
            *loops,
            "}",
        ]
    )


@helper("gemm_narrow")
def _gemm_narrow_per_isa() -> str:
    return isa_branches(NARROW_BLOCKING, _narrow)


__all__ = ["NARROW_BLOCKING", "WIDTH"]
