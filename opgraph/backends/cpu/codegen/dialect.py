"""The C dialect: the fused compiler's :class:`~opgraph.backends.fused.dialect.Dialect` for
GCC-compatible C (``_Float16``, bit-exact bf16 helpers, ``__builtin_`` math and libmvec), and
the helper functions only the CPU's kernels use (GEMV/GEMM panels, streaming stores).

The module-level functions (``storage_type``, ``literal``…) are :data:`C`'s methods, for the
kernel templates of ``codegen/``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from opgraph.backends.cpu.codegen import vector_math
from opgraph.backends.cpu.config import l2_cache_bytes, l3_held_bytes
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


def isa_branches(blocking: Sequence[tuple[Any, ...]], make: Callable[..., str]) -> str:
    """``#if`` / ``#elif`` over ``blocking``'s (macro test, floats per vector, ...) rows, each
    branch ``make(floats per vector, ...)``: the row's other fields in order (the
    per-instruction-set helpers: ``GEMV_BLOCKING``, ``GEMM_BLOCKING``, ``NARROW_BLOCKING``)."""
    branches = []
    for i, (test, *fields) in enumerate(blocking):
        keyword = "#if" if i == 0 else "#elif"
        branches.append(f"{keyword} {test}\n{make(*fields)}")
    return "\n".join(branches) + "\n#endif"


def _gemv_panels_per_isa() -> str:
    return isa_branches(GEMV_BLOCKING, _gemv_panels)


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
#: Haswell blocking; 12 x 32 would need 48 ymm and spill), SSE 6 x 8. The inner dimension is
#: cut into equal blocks of at most the inner block (a tile's accumulators are reloaded from
#: ``c`` once per block): 1024 measured best on a Zen 4 (1 MiB L2; one thread, C harness
#: over 128x768x768, 128x768x3072, 128x3072x768, 256x784x512, 256x512x512: 384 -> 1024 gave
#: +0.5 to +6 % with AVX-512 and 256 -> 1024 gave +20 % with AVX2). A tile's rows of
#: ``a`` and its panel slice then live in L2, read in order (hardware prefetch).
#: The last field: prefetch the next panel's slice into L2 while the current panel is
#: multiplied (panels outer), a share before each micro-kernel call. AVX2's 6 x 16 tile
#: reads 64 bytes of the panel per 12 multiply-adds, twice AVX-512's rate per flop, so the
#: first tile over a slice not yet in L2 waited on memory: 49x4608x512 (ResNet-18's 7x7x512
#: convolutions) ran at 61-73 GF/s against 103-107 with AVX-512, 77-80 with the prefetch
#: (C harness, one thread, load 9-16; ResNet-18 b1 per core 0.93x).
#: The last field, AVX2 only (0 elsewhere): the floats of ``a``'s inner block (rows x inner
#: block) up to which the panels are the outer loop even when ``a`` has more rows than the
#: panels have columns: that block of ``a`` is then read again from L2 for each panel, while
#: the panel slice being multiplied stays the one in L2 and the next is prefetched (rows outer
#: prefetches nothing and reads each panel's slice again per row tile at 64 bytes per 12
#: multiply-adds). The column blocks of a two-thread split made BERT's 128x3072x768 (3 panels
#: per block) rows outer: 82-91 GF/s against 99-102 panels outer (C harness, one thread, load
#: 3.5); with ``a`` out of L2 (12544x147x64, 7.4 MB) rows outer stays faster (67 against 47).
GEMM_BLOCKING = (
    ("defined(__AVX512F__)", 16, 12, 1024, False, 0),
    ("defined(__AVX__)", 8, 6, 1024, True, 1 << 17),
    ("1", 4, 6, 256, False, 0),
)
#: Panels outer, the AVX-512 kernel walks the panels in groups whose slices (inner block x 32
#: columns) fit in this many bytes, and within a group the row tiles outer: a tile's rows of
#: ``a`` (12 x 1024 floats at most, 48 KiB) are taken up by the group's panels one after the
#: other, which stay in L2 for every tile (panels outer alone took all of ``a`` per panel).
#: Why it gains was not isolated: a panel slice (96-128 KiB) streamed through L1 between two
#: uses of a line of ``a`` likely evicts it, so ``a`` may come from L2 either way. 384 KiB: four
#: slices of 768 rows, three of 1024, with ``a``'s
#: block (128 x 1024 floats, 512 KiB) beside them in a 1 MiB L2. The sums are unchanged (same
#: tiles, same inner blocks in the same order). C harness (``bench/gemm_tiles.py``'s driver,
#: one column block, one thread, thread CPU, Zen 5, load 3.4-4.2), medians of five alternated
#: runs, GF/s, panels outer / groups of 3 / of 4: 128x768x3072 230.8 / 234.2 / 236.6,
#: 128x3072x768 227.2 / 233.2 / 229.4, 128x768x2304 230.7 / 231.7 / 237.7, 128x768x768 231.0 /
#: 236.6 / 238.2 (docs/performance.md, 2026-11-26, H105). AVX2 and SSE keep panels outer
#: (their text unchanged; not measured). Products whose ``a`` block is small walk single panels
#: instead (:data:`NEXT_GROUP_L2_BYTES`).
PANEL_GROUP_BYTES = 384 << 10
#: The panel GEMM of AVX2 builds over half panels (``gemm_half_panels``): each 32-column panel
#: stored as its two 16-column halves, one after the other (K x 16 each), so the 6 x 16 tile
#: streams one contiguous half instead of 64 bytes of every 128-byte panel row. The lowering
#: packs half panels where ``TargetFeatures.panel_halves`` is set (``CpuConfig.panel_halves()``:
#: AVX2 without AVX-512); this unit refuses to compile for any other target. Same blocking
#: as :data:`GEMM_BLOCKING`'s AVX2 branch. C harness (``bench/gemm_tiles.py``, one thread,
#: thread CPU time, two-thread column blocks): +2-9 % on the MLP's products, -1 to +3 % on
#: BERT's (docs/performance.md, H87).
HALF_PANELS = ("defined(__AVX__) && !defined(__AVX512F__)", 8, 6, 1024, True, 1 << 17)

#: The next panel's share for this micro-kernel call, into L2 (``prefetcht1``).
_PREFETCH_NEXT_PANEL = """          if (!rows_outer && nb + 1 < first + panels) {{
            const char* next = (const char*)(P + (nb + 1) * K * {pw} + k0 * {pw});
            long calls = tiles * {halves}, call = inner * {halves} + j0 / {width};
            long bytes = (k1 - k0) * {row_bytes}, lo = bytes * call / calls;
            long hi = bytes * (call + 1) / calls;
            for (long o = lo & ~63L; o < hi; o += 64) __builtin_prefetch(next + o, 0, 2);
          }}
"""


#: How many panel rows ahead the AVX-512 micro-kernels (the generic ``og_mk`` and
#: :func:`_broadcast_kernel`'s ``og_mk_full``) prefetch the panel they stream into L1
#: (``prefetcht0``, two 64-byte lines a row: 3 KiB ahead). The first row tile over a panel slice
#: reads it from L3 or memory, 128 bytes per 24 multiply-adds; on Zen 5 (full-width multiply-adds)
#: the hardware prefetcher fell behind: C harness (``bench/gemm_tiles.py``'s driver, one thread,
#: thread CPU time, 8 column blocks in turn, load 6.5) 128x768x3072 195-205 -> 234 GF/s,
#: 128x768x2304 213-215 -> 236-240, 128x3072x768 209-214 -> 240-244, 128x768x768 224-225 -> 245,
#: 49x4608x512 189 -> 208; 8 rows ahead gained half of that, 32, 48 and 64 the same as 24. In
#: ``og_mk_full`` (Zen 4's full tiles; on this Zen 5 those of ``isa="avx512"`` builds), measured
#: here only: 128x768x2304 191-196 -> 209-216, 128x768x3072 188-194 -> 202-213, 128x768x768 203-204
#: -> 217-222, 256x784x512 215-218 -> 221-225. On Zen 4 (half-rate multiply-adds, so half the panel
#: bytes per cycle) not measured; it costs 2 load-port operations per 24 cycles of 3 ports there and
#: reads only lines the tile reads 24 rows later. Two prefetches beside the 12 broadcasts and 2
#: panel loads of 24 multiply-adds (a load port's share on cores with two, Skylake-SP included,
#: stays under one a cycle). A prefetch past the panel's end reads nothing and never faults.
PANEL_PREFETCH_ROWS = 24


def panel_prefetch(pointer: str, stride: str, second: int, rows: int = PANEL_PREFETCH_ROWS) -> str:
    """C lines (four-space indent, newline-ended) that prefetch into L1 the two 64-byte lines
    of the panel row ``rows`` rows past row ``k``: ``pointer + (k + rows) * stride`` and
    ``second`` elements further (the f32 AVX-512 kernels and the int8 ones with
    :data:`PANEL_PREFETCH_ROWS`, the bf16 ones with ``bf16.PREFETCH_ROWS``)."""
    ahead = f"{pointer} + (k + {rows}) * {stride}"
    return (
        f"    __builtin_prefetch({ahead}, 0, 3);\n"
        f"    __builtin_prefetch({ahead} + {second}, 0, 3);\n"
    )


def _stream_prefetch(lanes: int, pw: int) -> str:
    """The lines of an AVX-512 micro-kernel's inner loop that prefetch the panel
    :data:`PANEL_PREFETCH_ROWS` rows ahead (empty for the AVX2 and SSE kernels: left as they
    were measured)."""
    return panel_prefetch("p", str(pw), lanes) if lanes == BROADCAST_LANES else ""


#: The share of the L2 cache (:func:`~opgraph.backends.cpu.config.l2_cache_bytes`, read from
#: sysfs; 1 MiB where unknown) that ``a``'s inner block and two panel slices (the one multiplied
#: and the next, prefetched) may take for the AVX-512 panel GEMM to walk single panels and
#: prefetch the next (:data:`_NEXT_GROUP`). The size is a literal of the unit's C text, so the
#: module cache's keys (which hash the source) follow the CPU's L2. On a 1 MiB L2 (896 KiB):
#: ResNet's 49-row blocks (176 KiB), BERT's 128 x 768 blocks (384 KiB + 2 x 96) and 128 x 1024
#: ones (FFN 2: 512 KiB + 2 x 128) and the MLP's 256 x 512 (512 + 2 x 64) prefetch; the MLP's
#: 256 x 784 block (784 KiB) does not: ungated, it lost its rows from L2 to the prefetched
#: panels (W3 b256 per core 1.37-1.40 -> 1.39-1.44 ms; h129). Where the budget holds it also
#: overrides rows outer (``M > 32 * panels``: BERT's FFN 2 in the two-thread split's 3-panel
#: units), which streamed each inner block's panels cold in the first row tile: rows outer and
#: a group of all the panels are the same order. C harness (``bench/gemm_tiles.py``'s driver,
#: 8 column blocks, 8 weight copies, one thread, thread CPU, alternated, Zen 5, load 1.6-2.0),
#: GF/s, main (the gate at 256 KiB of ``a``) / this: 128x768x3072 251.0 / 258.6, 128x3072x768
#: 254.4 / 262.4, 128x768x2304 260.7 / 269.8, 128x768x768 267.1 / 274.1, 256x512x512 260.2 /
#: 265.2; 256x784x512, 49x4608x512, 196x256x1024 within 1 %. Groups of two or four panels
#: with the prefetch (the budget allowing) measured 1-3 % under single panels on BERT's
#: 768-deep products (docs/performance.md, 2026-11-27, h132).
NEXT_GROUP_L2_BYTES = l2_cache_bytes() * 7 // 8
#: Where ``a``'s inner block and two slices fit :data:`NEXT_GROUP_L2_BYTES` (``ahead``), the
#: AVX-512 kernel walks the panels one at a time (groups of one: ``a``'s block stays in L2)
#: and the row tiles after a panel's first prefetch the next panel's slice
#: (this inner block's next panel, else the first panel's slice of the next block) into
#: L2: row tile ``outer`` takes part ``outer - 1`` of ``tiles - 1``, one ``prefetcht1`` per
#: inner step from ``pf``, ``pfb`` bytes further each step (0 for the first row tile and
#: where nothing follows: it then prefetches one line it holds). ``pfb`` is the smallest of 8,
#: 16, 32, 64 whose steps reach the tile's share of the next slice (64 bytes, a line a step,
#: reached up to five shares ahead on BERT's 768-deep 11-tile products: each later tile
#: prefetched again the lines the tiles before had fetched, and the lines of the slice after
#: the next). On the Intel guest (Emerald Rapids, 2 MiB L2) that cost the tiles after the
#: first 6-11 % (rdtsc per call 8144-8770 ticks against the first tile's 7352-7730), and 16
#: bytes a step (BERT's 11 tiles) took it back: C harness, 8 weight copies, one thread, load
#: 8, GF/s 64 bytes / the share: 128x768x2304 149.0-154.2 / 163.1-168.6, 128x768x3072
#: 145.6-146.9 / 166.2-169.9, 128x3072x768 142.1-146.3 / 169.0, 49x4608x512 126.4-129.2 /
#: 137.1-138.1; the BERT layer per core -11 % (docs/performance.md, 2026-11-28, h146).
#: Zen 5 not measured (its lines re-fetched from L2 were cheaper: h132 gained with 64). Two
#: row tiles keep 64 (half of each slice, as before). Without it the first row
#: tile read each slice from memory at 128 bytes per 24 multiply-adds, faster than one core's
#: stream, and 49-row products (ResNet-18's 7x7 stage: five row tiles) waited on it: rdtsc per
#: call of a group's first row tile 11500-12400 ticks against the others' 6600-6700; with the
#: prefetch 6800-7400 except the first slice of each call (none before it to prefetch it),
#: 11600-13600. Groups of one leave that one slice cold per call instead of a group's (two
#: or three in the model's units). C harness (``bench/gemm_tiles.py``'s driver, 8 weight
#: copies, one thread, thread CPU, alternated, Zen 5, load 2.9-3.5), GF/s, main / the prefetch
#: with main's groups / with groups of one: 49x4608x512 in 64-column units 222.8 / 233.9 /
#: 239.7 (one weight copy, from L3: 264), in 256-column ones 217.2 / 230.2 / 232.1,
#: 49x2304x512 234.0 / 241.2 / 248.9 and 237.4 / 238.7 / 254.1, 49x2048x512 232.1 / 236.9 /
#: 243.9, 49x512x2048 237.6 / 240.1 / 250.4. The sums are unchanged (the same inner blocks in
#: the same order; the prefetch a hint only). Prefetching into L1 or L3's level
#: (``prefetcht0``, ``prefetcht2``) measured the same; the next slices spread over all of a
#: group's later calls (two calls a slice, earliest first) no better; the first row tile
#: prefetching its own slice 8-32 KiB ahead into L2 slower (its first calls 13600-15000 ticks);
#: the weights on 2 MiB pages changed nothing (not TLB misses).
_NEXT_GROUP = """        const char* pf = (const char*)P;
        long pfb = 0;
        if (ahead && outer > 0) {{
          long np = inner + 1, nk0 = k0, nk1 = k1;
          if (np == panels) {{ np = 0; nk0 = k1; nk1 = K * (kb + 2) / blocks; }}
          if (nk0 < K) {{
            long lo = (nk1 - nk0) * {row_bytes}L * (outer - 1) / (tiles - 1);
            long share = ((nk1 - nk0) * {row_bytes}L + tiles - 2) / (tiles - 1);
            pf = (const char*)(P + (first + np) * K * {pw} + nk0 * {pw}) + lo;
            for (pfb = 64; pfb > 8 && pfb / 2 * (k1 - k0) >= share; pfb /= 2) {{}}
          }}
        }}"""


def _group_prefetch(lanes: int) -> str:
    """The line of an AVX-512 micro-kernel's inner loop that prefetches its share of the next
    panel group into L2 (:data:`_NEXT_GROUP`; empty for the other kernels)."""
    return "    __builtin_prefetch(pf + (k - k0) * pfb, 0, 2);" if lanes == BROADCAST_LANES else ""


def _tile_order(lanes: int, rows: int, pw: int, budget: int) -> str:
    """The loops over row tiles and panels inside an inner block, opening the block that sets
    ``nb`` (the panel) and ``m`` (the first row) and the micro-kernels' ``pf``, ``pfb``: panels
    or row tiles outer (``rows_outer``), and for the AVX-512 kernel panels outer in groups of
    :data:`PANEL_GROUP_BYTES` with the row tiles outer within each group, or one panel at a time
    with the next one's slice prefetched (:data:`_NEXT_GROUP`) where ``a``'s block and two
    slices fit ``budget`` bytes."""
    if lanes != BROADCAST_LANES:
        return f"""    for (long outer = 0; outer < (rows_outer ? tiles : panels); ++outer)
      for (long inner = 0; inner < (rows_outer ? panels : tiles); ++inner) {{
        long nb = first + (rows_outer ? inner : outer), tile = rows_outer ? outer : inner;
        long m = {rows} * tile - (tile == tiles - 1 && tiles > 1 ? {rows} - even : 0);
        const char* pf = 0;
        long pfb = 0;
"""
    return f"""    long slice = (k1 - k0) * {4 * pw}L, room = {budget}L - M * (k1 - k0) * 4L;
    int ahead = room >= 2 * slice;
    long group = ahead ? 1 : rows_outer ? panels : {PANEL_GROUP_BYTES}L / slice;
    if (group < 1) group = 1;
    for (long g0 = 0; g0 < panels; g0 += group)
    for (long outer = 0; outer < tiles; ++outer)
      for (long inner = g0; inner < (g0 + group < panels ? g0 + group : panels); ++inner) {{
        long nb = first + inner, tile = outer;
        long m = {rows} * tile - (tile == tiles - 1 && tiles > 1 ? {rows} - even : 0);
{_NEXT_GROUP.format(pw=pw, row_bytes=4 * pw)}
"""


def _tile_kernel(name: str, lanes: int, rows: int, pw: int, fma: Callable[[int], str]) -> str:
    """``static inline void <name>(R, a, lda, p, k0, k1, c, ldc)``: ``c[R x 2 lanes] (+)= a[R x
    (k0..k1)] times p``, ``R`` up to ``rows``, two ``lanes``-float vectors of accumulators per
    row as named variables ``x<r>``, ``y<r>`` (an array of them, or an array element as an
    ``asm`` operand, is kept on the stack) loaded from and stored to ``c`` directly. ``R`` is a
    constant after inlining, so the row guards fold. ``fma(r)`` is the C of row ``r``'s two
    multiply-adds of one inner index (``a<r>[k]`` times ``b0`` and ``b1``)."""
    size = 4 * lanes
    each = range(rows)
    lines = [
        f"static inline __attribute__((always_inline)) void {name}(",
        "    const int R, const float* restrict a, long lda, const float* restrict p, long k0,",
        "    long k1, float* restrict c, long ldc, const char* restrict pf, long pfb) {",
        "  og_vf " + ", ".join(f"x{r} = {{0}}, y{r} = {{0}}" for r in each) + ";",
        "  if (k0 != 0) {",
        *(
            f"    if (R > {r}) {{ __builtin_memcpy(&x{r}, c + {r} * ldc, {size}); "
            f"__builtin_memcpy(&y{r}, c + {r} * ldc + {lanes}, {size}); }}"
            for r in each
        ),
        "  }",
        "  const float " + ", ".join(f"*a{r} = a + {r} * lda" for r in each) + ";",
        "  for (long k = k0; k < k1; ++k) {",
        "    og_vf b0, b1;",
        f"    __builtin_memcpy(&b0, p + k * {pw}, {size});",
        f"    __builtin_memcpy(&b1, p + k * {pw} + {lanes}, {size});",
        _stream_prefetch(lanes, pw).rstrip("\n"),
        _group_prefetch(lanes),
        *(f"    if (R > {r}) {{\n{fma(r)}\n    }}" for r in each),
        "  }",
        *(
            f"  if (R > {r}) {{ __builtin_memcpy(c + {r} * ldc, &x{r}, {size}); "
            f"__builtin_memcpy(c + {r} * ldc + {lanes}, &y{r}, {size}); }}"
            for r in each
        ),
        "}",
    ]
    return "\n".join(line for line in lines if line) + "\n"


def _plain_fma(r: int) -> str:
    """Row ``r``'s multiply-adds in C (GCC contracts each into one fused multiply-add)."""
    return f"      const float s = a{r}[k];\n      x{r} += s * b0;\n      y{r} += s * b1;"


def _micro_kernel(lanes: int, rows: int, pw: int, full_call: str) -> str:
    """``og_mk``: ``c[R x nvalid] (+)= a[R x (k0..k1)] times p`` for ``R`` up to ``rows``.
    Full tiles (``nvalid`` the tile's width) run ``og_mk_tile`` (:func:`_tile_kernel`) on
    ``c``; narrow ones on a zero-padded copy of their rows, copied back. The accumulators were
    arrays (``c0[rows], c1[rows]``), which GCC kept on the stack: every call loaded all of them
    before the inner loop and stored them after, then copied them to ``c`` through the stack
    with a per-row ``nvalid`` test. The same multiply-adds in the same order, so the sums are
    bit-identical."""
    width = 2 * lanes
    tile = _tile_kernel("og_mk_tile", lanes, rows, pw, _plain_fma)
    return f"""{tile}/* c[R x nvalid] (+)= a[R x (k0..k1)] times p ({width} columns read). */
static inline __attribute__((always_inline)) void og_mk(
    const int R, const float* restrict a, long lda, const float* restrict p, long k0,
    long k1, float* restrict c, long ldc, long nvalid, const char* restrict pf, long pfb) {{
{full_call}  if (nvalid == {width}) {{ og_mk_tile(R, a, lda, p, k0, k1, c, ldc, pf, pfb); return; }}
  float t[{rows} * {width}];
  for (int r = 0; r < R && k0 != 0; ++r)
    for (long j = 0; j < {width}; ++j) t[r * {width} + j] = j < nvalid ? c[r * ldc + j] : 0.0f;
  og_mk_tile(R, a, lda, p, k0, k1, t, {width}, pf, pfb);
  for (int r = 0; r < R; ++r)
    for (long j = 0; j < nvalid; ++j) c[r * ldc + j] = t[r * {width} + j];
}}
"""


def _gemm_panels(
    lanes: int,
    rows: int,
    depth: int,
    prefetch: bool = False,
    a_in_l2: int = 0,
    halves: bool = False,
    budget: int | None = None,
) -> str:
    """The panel GEMM for vectors of ``lanes`` floats and tiles of ``rows`` rows (``halves``:
    each 32-column panel stored as two 16-column halves, which are 16-column panels: the
    kernel runs over 16-column panels, each streamed by every row tile in turn before the
    next, for 16-column tiles); ``budget``: the L2 bytes of the next-slice prefetch
    (:data:`NEXT_GROUP_L2_BYTES` where None)."""
    width = 2 * lanes  # columns per tile: two vectors
    assert not halves or width == 16, "half panels are read by 16-column tiles"
    pw = 16 if halves else 32  # columns per panel as the kernel walks them
    cases = " ".join(f"case {n}: OG_MK({n}); break;" for n in range(rows, 0, -1))
    ahead = ""
    if prefetch:
        fields = {"halves": pw // width, "width": width, "pw": pw, "row_bytes": 4 * pw}
        ahead = _PREFETCH_NEXT_PANEL.format(**fields)
    read = "a 16-column half of a 32-column panel" if halves else "a 32-column panel"
    tiles = ("", "") if halves else _full_tiles(lanes, rows)
    order = f"M > {pw} * panels"
    walk = _tile_order(lanes, rows, pw, NEXT_GROUP_L2_BYTES if budget is None else budget)
    if a_in_l2:  # panels outer while a's inner block fits in L2 (GEMM_BLOCKING)
        order += f" && M * K > {a_in_l2}L * ((K + {depth - 1}) / {depth})"
    return f"""typedef float og_vf __attribute__((vector_size({4 * lanes})));
/* The micro-kernels read rows of {read}, {width} columns. */
{tiles[0]}{_micro_kernel(lanes, rows, pw, tiles[1])}
/* C[:, n0:n1] = A (M x K, rows contiguous) times P (K x N as {pw}-column panels); n0 is a
   multiple of 32. Tiles of {rows} rows x {width} columns; the inner dimension is cut into
   equal blocks of at most {depth}; the larger operand is streamed once (panels outer when P
   is larger, rows outer when A is). */
static void og_gemm_panels(const float* restrict A, long lda, const float* restrict P,
                           float* restrict C, long ldc, long M, long K, long n0, long n1) {{
  long first = n0 / {pw}, panels = (n1 + {pw - 1}) / {pw} - first;
  int rows_outer = {order};
  long blocks = (K + {depth - 1}) / {depth};
  for (long kb = 0; kb < blocks; ++kb) {{
    long k0 = K * kb / blocks, k1 = K * (kb + 1) / blocks;
    long tiles = (M + {rows - 1}) / {rows}, tail = M - {rows} * (tiles - 1);
    /* a last tile of under a third of the rows waits on its few multiply-add chains: it
       and the tile before share their rows evenly (49 = 3 x 12 + 7 + 6, not 4 x 12 + 1) */
    long even = tiles > 1 && 3 * tail < {rows} ? ({rows} + tail + 1) / 2 : {rows};
{walk}        long valid = n1 - nb * {pw} < {pw} ? n1 - nb * {pw} : {pw};
        for (long j0 = 0; j0 < valid; j0 += {width}) {{
          long nvalid = valid - j0 < {width} ? valid - j0 : {width};
          const float* p = P + nb * K * {pw} + j0;
          float* c = C + nb * {pw} + j0;
{ahead}#define OG_MK(R) og_mk(R, A + m * lda, lda, p, k0, k1, c + m * ldc, ldc, nvalid, pf, pfb)
          long r_ = tile == tiles - 2 ? even : M - m < {rows} ? M - m : {rows};
          switch (r_) {{ {cases} default: break; }}
#undef OG_MK
        }}
      }}
  }}
}}"""


def _gemm_panels_per_isa(budget: int | None = None) -> str:
    return isa_branches(GEMM_BLOCKING, functools.partial(_gemm_panels, budget=budget))


#: A module whose buffers (weights, arguments, results and intermediates, without reuse) take
#: at most this many bytes (half the L3 it can count on,
#: :func:`~opgraph.backends.cpu.config.l3_held_bytes`: at most 16 MiB a CPU sharing it)
#: finds its panels in L3 on every call after the first, and calls the panel GEMM without the
#: next-slice prefetch (``gemm_panels_resident``: panel groups of :data:`PANEL_GROUP_BYTES`,
#: the code before h132's budget). The prefetch hides the first row tile's wait on a slice
#: from memory; from L3 that wait is short, and single panels reread each row tile of ``a``
#: from L2 per panel where a group rereads it from L1 (h132 saw BERT FFN 2's other tiles slow
#: 5 %). W3 MLP b256 (2.6 MB of panels), its bands (128 x 784, 128 x 512) built with and
#: without the prefetch in one process, alternated (Zen 5, 32 MiB L3, load 3-4): two threads,
#: paired call minima, without / with 0.987-0.993 (lower in 127-155 of 150-200 rounds); the
#: same blocks on one thread (thread CPU) 0.992 (76 of 100); with 64 MB written before each
#: call (the panels from memory) 1.027 (lower in 5 of 60): there the prefetch pays, as in
#: BERT (28 MB of weights) and ResNet-18 (45 MB), which stream them from memory
#: (docs/performance.md, 2026-11-27, h135). A 2-CPU KVM guest of an Emerald Rapids socket
#: lists its 260 MiB L3: half of it took BERT's 28 MB of weights for resident, and its
#: one-thread layer measured 3-4 % slower than with the prefetch (thread CPU, alternated in
#: one process, per-round ratios 0.961-0.967 in 20-29 of 30-40 rounds, load 4-5; the MLP b256
#: level, 1.005); the L3 counted there is 32 MiB (docs/performance.md, 2026-11-28, h139).
RESIDENT_BYTES = l3_held_bytes() // 2


def panels_resident(footprint: int) -> bool:
    """Whether a module touching ``footprint`` bytes a call calls ``gemm_panels_resident``
    (:data:`RESIDENT_BYTES`)."""
    return footprint <= RESIDENT_BYTES


HELPERS["gemm_panels"] = _gemm_panels_per_isa
HELPERS["gemm_panels_resident"] = lambda: _gemm_panels_per_isa(0)


@helper("gemm_half_panels")
def _gemm_half_panels() -> str:
    """``og_gemm_panels`` over half panels (:data:`HALF_PANELS`): the same function, the same
    sums, another layout of ``P``; an error at compile time for a target it was not made for."""
    test, lanes, rows, depth, prefetch, a_in_l2 = HALF_PANELS
    kernel = _gemm_panels(lanes, rows, depth, prefetch, a_in_l2, halves=True)
    refusal = '#error "half panels (gemm_half_panels) are the layout of AVX2 builds only"'
    return f"#if {test}\n{kernel}\n#else\n{refusal}\n#endif"


#: The vector width (floats) whose full tiles take ``a``'s floats as embedded broadcasts
#: (:func:`_broadcast_kernel`): AVX-512's ``{1to16}``.
BROADCAST_LANES = 16
#: The builds that use it: code tuned for AMD Zen 4 (GCC's tuning macros; GCC 12 tunes a Zen 4
#: as ``znver3``, later versions as ``znver4``), where it was measured. Intel cores with two
#: load ports (Skylake-SP, Ice Lake) would issue 26 loads per 24 multiply-adds of a 12-row
#: tile, more than they load per cycle at two AVX-512 multiply-adds; not measured there, so
#: they keep the separate broadcasts. So does Zen 5 (full-width 512-bit multiply-adds), where
#: the embedded broadcasts cost: a loop of the 12 x 32 tile's 24 multiply-adds on L1 data
#: runs at 240 GF/s per core with them and 261 with ``vbroadcastss`` (peak 268.6), and the
#: panel GEMM gains 4-8 % without them (``bench/gemm_tiles.py``, docs/performance.md,
#: 2026-11-26, H95b). GCC 12 tunes a Zen 5 as ``znver3`` and GCC 13 as ``znver4``; its
#: ``-march=native`` tells it by AVX-VNNI (``__AVXVNNI__``), which AMD first shipped in Zen 5
#: (Zen 4 has only the AVX-512 form). Builds without the native feature macros (``isa=
#: "avx512"``: ``-march=x86-64-v4 -mtune=native``) cannot tell and keep Zen 4's choice.
BROADCAST_TARGETS = "defined(__AVX512F__) && !defined(__AVXVNNI__) && ({})".format(
    " || ".join(f"defined(__tune_znver{n}__)" for n in (3, 4))
)


def _broadcast_kernel(rows: int) -> tuple[str, str]:
    """The AVX-512 micro-kernel of full-width tiles (32 columns), and the line of ``og_mk`` that
    calls it (both only in :data:`BROADCAST_TARGETS` builds). Each multiply-add reads ``a``'s
    float as an embedded broadcast (``vfmadd231ps m32{1to16}``, in inline assembly: GCC loads
    a float used by two multiply-adds once, with a separate ``vbroadcastss``). The same fused
    multiply-adds in the same order, so the sums are bit-identical to the generic ``og_mk``;
    on Zen 4 the separate broadcasts cost about 2.5 % of the products' time (C harness, one
    thread, thread CPU time, BERT's four products in its two-thread column blocks, 28 MB of
    weights cycled, medians of 100: 16.81-16.88 ms against 16.41-16.49; docs/performance.md,
    2026-11-26, H79). Accumulators are named variables (an array element as an ``asm``
    operand is kept in memory); ``R`` is a constant after inlining, so the row guards fold.
    Every tile height takes it (one inlined copy per height: the kernel unit's compile went
    from 0.44 to 0.75 s of gcc CPU time, once per cache; with full-height tiles only, 0.50
    s, but BERT's 8-row last tiles kept the separate broadcasts and the harness figure above
    was 0.7 % higher)."""
    lines = [
        "/* Full tiles on AVX-512: a's floats as embedded broadcasts (codegen/dialect.py). */",
        _tile_kernel("og_mk_full", BROADCAST_LANES, rows, 32, _broadcast_fma).rstrip("\n"),
    ]
    gate = f"#if {BROADCAST_TARGETS}\n"
    full = gate + "\n".join(lines) + "\n#endif\n"
    call = "  if (nvalid == 32) { og_mk_full(R, a, lda, p, k0, k1, c, ldc, pf, pfb); return; }\n"
    return full, gate + call + "#endif\n"


def _broadcast_fma(r: int) -> str:
    """Row ``r``'s multiply-adds as ``vfmadd231ps`` with ``a<r>[k]`` embedded-broadcast."""
    fma = '      __asm__("vfmadd231ps %2%{{1to16%}}, %1, %0" : "+v"({}) : "v"({}), "m"(a{}[k]));'
    return fma.format(f"x{r}", "b0", r) + "\n" + fma.format(f"y{r}", "b1", r)


def _full_tiles(lanes: int, rows: int) -> tuple[str, str]:
    """:func:`_broadcast_kernel`'s two parts for the kernel of ``lanes``-float vectors (empty
    for every width but :data:`BROADCAST_LANES`)."""
    return _broadcast_kernel(rows) if lanes == BROADCAST_LANES else ("", "")


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
    GCC vectorizes loops calling them without -ffast-math (f32 ``tanh`` in AVX2 builds: an
    inline function instead, :mod:`~opgraph.backends.cpu.codegen.vector_math`)."""
    lines = []
    for name, t in sorted(names, key=lambda item: (item[0], item[1].name)):
        if name not in VECTOR_MATH:
            continue
        c = "double" if is_wide_float(t) else "float"
        fn = name if is_wide_float(t) else name + "f"
        params = ", ".join([c] * _ARITY.get(name, 1))
        libmvec = f'__attribute__((simd("notinbranch"))) extern {c} {fn}({params});'
        lines.append(libmvec if is_wide_float(t) else vector_math.declaration(fn, libmvec))
    return "\n".join(lines)
