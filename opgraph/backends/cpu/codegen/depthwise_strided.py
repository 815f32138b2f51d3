"""3x3 and 5x5 stride-2 f32 depthwise steps straight from the input rows with AVX-512 or AVX2.

The direct kernel (``codegen/depthwise.py``) copies every input channel into zero-padded
column phases before its tap loops; with stride 2 that copy is most of a 3x3 step (C harness
of MobileNetV3's 64-channel 112 -> 56 step, one thread, Zen 5: 63 of 96 µs without the
epilogue) and 16 of 40 µs of its 5x5 56 -> 28 one. Here each 16-output vector of an output
row loads the 32 input floats under it per filter row and splits them in registers into the
even columns (``x[2j]``) and the odd ones (``x[2j + 1]``); the taps left of them are those
vectors one lane later with the float before the pair in lane 0 (``x[2j - 1]``,
``x[2j - 2]``: zero left of the row), the taps right of them one lane earlier with the float
after it in lane 15 (``x[2j + 2]``, ``x[2j + 3]``: zero past the row). Rows outside the image
are zero vectors through the same multiply-adds, and each output adds its filter rows' sums
(:data:`TAPS_SUMS`) with a row's taps in the order the copy-in form's loops contract them,
so the outputs are bitwise the direct kernel's (tested). The last vector of a row overlaps
the one before it when the width is not a multiple of 16 (same values, written twice);
nothing is read past a row's last column. Where the input is larger than the L2 cache each
output row prefetches the input rows :data:`PREFETCH_ROWS` output rows ahead.

Taken by ``DirectConvEmitter`` (:func:`takes`) for one-pass depthwise steps written in place
with the padding of PyTorch's and TensorFlow's "same" convolutions (taps from two columns left
of the pair to three right, :data:`REACH`) and an input at least twice the output's width;
AVX2 builds run the same code on 8-lane vectors (MobileNetV3's 64-channel 112 -> 56 step
under ``isa="avx2"``, one thread: 151 -> 92 µs, OpenVINO's AVX2 kernel 129), other ISAs
keep the copy-in form (``depthwise_blocked.BUILDS``).
"""

from __future__ import annotations

import math

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.depthwise_blocked import BUILDS
from opgraph.backends.cpu.config import l2_cache_bytes
from opgraph.backends.fused.program import ConvStep
from opgraph.backends.fused.views import static, static_all

#: Lanes of one output vector with AVX-512 (f32; AVX2 builds: half as many).
LANES = 16
#: Columns a tap may lie left of and right of the pair of vectors under it: ``x[2j - 2]``
#: and ``x[2j + 3]`` are the farthest one shuffle and one inserted float make.
REACH = (2, 3)
#: Filter sizes taken, and how an output adds its filter rows' sums (the copy-in form's
#: ``_tree_sum`` over rows of taps: chains of 3 and of 5 taps, added pairwise).
TAPS_SUMS = {3: "({} + {}) + {}", 5: "(({} + {}) + ({} + {})) + {}"}
#: Output rows ahead of the one computed whose two new input rows each output row
#: prefetches where the step's input is larger than the L2 cache (:func:`prefetch_rows`; the
#: size read from the CPU): the input, written by the step before, then comes from L3, at
#: the pace of the core's misses in flight, which the hardware prefetchers do not keep full
#: across the rows. 16 input rows ahead (7 KiB of MobileNetV3's 112-wide rows; past a plane's
#: last row, the next channel's first rows). Intel guest (2 MiB L2), one thread, profiled
#: step minimums: MobileNetV3's 64-channel 112 -> 56 step 170-241 -> 141-152 us, with two
#: threads 96-97 -> 73-74 us; EfficientNet-B0's 96-channel one 309 -> 248 us; 1, 2, 4 and 16
#: rows within a few us of 8 (docs/performance.md, h152). Inputs within L2 are read without
#: it (EfficientNet-B0's 5x5 144-channel 56 -> 28 step, 1.8 MiB: 108 -> 111 us with it).
PREFETCH_ROWS = 8


def takes(step: ConvStep, ctype: str, rowwise: bool) -> bool:
    """Whether the step runs :func:`call` under AVX-512 or AVX2: f32, one input and one output
    channel per group, a 3x3 or 5x5 filter, strides 2, no dilation, padding above of less
    than the filter and to the left whose taps fall within two columns of the pair
    (:data:`REACH`), rows of at least one vector, an input at least twice the output's
    width (the 32 floats under a vector are in the row) with rows one after another,
    written in place by the row-wise plan."""
    assert step.x is not None and step.w is not None and step.out is not None
    _, o, _, ow = static_all(step.out.shape)
    (kh, kw), (pt, pl) = step.kernel, step.padding
    return (
        ctype == "float"
        and rowwise
        and static(step.x.shape[1]) == step.groups == o
        and kh == kw
        and kh in TAPS_SUMS
        and step.strides == (2, 2)
        and step.dilations == (1, 1)
        and 0 <= pt < kh
        and 0 <= pl <= REACH[0]
        and kw - 1 - pl <= REACH[1]
        and ow >= LANES
        and static(step.x.shape[3]) >= 2 * ow
        and static(step.x.strides[2]) == static(step.x.shape[3])  # rows one after another
    )


def call(step: ConvStep) -> list[str]:
    """The unit's rows ``r0 .. r1`` of channel ``oc0`` of image ``img`` (the names the
    direct kernel's unit loop defines; ``x`` is the channel's input plane, ``w`` its
    filter). It replaces the unit's copy-in (pipelined plans' too) and tap loops."""
    assert step.x is not None and step.out is not None
    _, o, oh, ow = static_all(step.out.shape)
    h, wd = static(step.x.shape[2]), static(step.x.shape[3])
    plane = f"y0 + (img * {o}L + oc0) * {oh * ow}L"
    (pt, pl), k = step.padding, step.kernel[0]
    size = f"{h}L, {wd}L, {pt}L, {pl}"
    ahead = prefetch_rows(step)
    return [f"    og_dws2_rows{k}(x, {size}, w, {plane}, {ow}L, r0, r1, {ahead}L);"]


def prefetch_rows(step: ConvStep) -> int:
    """:data:`PREFETCH_ROWS` where the step's input is larger than the L2 cache, else 0."""
    assert step.x is not None
    size = 4 * math.prod(static_all(step.x.shape))
    return PREFETCH_ROWS if size > l2_cache_bytes() else 0


def _indices(first: int, lanes: int) -> str:
    return ", ".join(str(first + 2 * i) for i in range(lanes))


def _functions(k: int) -> str:
    """``og_dws2_rows<k>``: output rows of one channel for a k x k filter, each output the
    filter rows' sums added as the copy-in form's tap loops add them (in vectors of the
    build's lanes)."""
    rows = [f"og_dws2_row(xr[{a}], wd, j0, {k}, pl, f + {k * a})" for a in range(k)]
    total = TAPS_SUMS[k].format(*rows)
    return f"""static inline __attribute__((always_inline)) void og_dws2_rows{k}(
    const float* restrict x, long h, long wd, long pt, int pl, const float* restrict f,
    float* restrict y, long ow, long r0, long r1, long ahead) {{
  for (long r = r0; r < r1; ++r) {{
    const float* xr[{k}];
    for (int a = 0; a < {k}; ++a) {{
      long ir = 2 * r - pt + a;
      xr[a] = ir >= 0 && ir < h ? x + ir * wd : 0;
    }}
    if (ahead) /* the two input rows output row r + ahead adds first (prefetches never fault) */
      for (long c = 0; c < 2 * wd; c += 16)
        __builtin_prefetch(x + (2 * (r + ahead) - pt + {k - 2}) * wd + c);
    for (long jb = 0; jb < ow; jb += OG_D2_LANES) {{
      long j0 = jb + OG_D2_LANES <= ow ? jb : ow - OG_D2_LANES;
      og_d2v s = {total};
      __builtin_memcpy(y + r * ow + j0, &s, sizeof s);
    }}
  }}
}}"""


@dialect.helper("dws2")
def _dws2() -> str:
    return f"""#if defined(__AVX512F__)
{_vectors(LANES)}
#elif defined(__AVX2__)
{_vectors(LANES // 2)}
#endif
#if {BUILDS}
{_functions(3)}
{_functions(5)}
#endif"""


def _vectors(lanes: int) -> str:
    """The vector types of ``lanes`` floats and the two per-row functions on them."""
    later = ", ".join(str(i) for i in [lanes - 1, *range(lanes - 1)])
    earlier = ", ".join(str(i) for i in [*range(1, lanes), 0])
    return f"""#define OG_D2_LANES {lanes}L
typedef float og_d2v __attribute__((vector_size({lanes * 4})));
typedef int og_d2i __attribute__((vector_size({lanes * 4})));
/* x[2j + c] for the {lanes} outputs j from j0 (c in -2 .. 3) out of the row's even (e) and odd
   (o) columns under them: one lane later with the float before them in lane 0 (zero left
   of the row), or one lane earlier with the float after them in lane {lanes - 1} (zero past
   it). */
static inline __attribute__((always_inline)) og_d2v og_dws2_tap(
    og_d2v e, og_d2v o, const float* xr, long wd, long j0, int c) {{
  og_d2v v = c & 1 ? o : e;
  if (c < 0) {{
    v = __builtin_shuffle(v, (og_d2i){{{later}}});
    v[0] = j0 > 0 ? xr[2 * j0 + c] : 0.0f;
  }} else if (c > 1) {{
    v = __builtin_shuffle(v, (og_d2i){{{earlier}}});
    v[{lanes - 1}] = 2 * j0 + {2 * lanes - 2} + c < wd ? xr[2 * j0 + {2 * lanes - 2} + c] : 0.0f;
  }}
  return v;
}}
/* One filter row (k taps, f) of a stride-2 depthwise filter for the {lanes} outputs from j0:
   input row xr of wd columns (null: outside the image), padding pl to the left; the taps
   contracted as the copy-in form's loops are. */
static inline __attribute__((always_inline)) og_d2v og_dws2_row(
    const float* xr, long wd, long j0, int k, int pl, const float* f) {{
  og_d2v t[5] = {{{{0}}}};
  if (xr) {{
    og_d2v lo, hi;
    __builtin_memcpy(&lo, xr + 2 * j0, sizeof lo);
    __builtin_memcpy(&hi, xr + 2 * j0 + {lanes}, sizeof hi);
    og_d2v e = __builtin_shuffle(lo, hi, (og_d2i){{{_indices(0, lanes)}}});
    og_d2v o = __builtin_shuffle(lo, hi, (og_d2i){{{_indices(1, lanes)}}});
    for (int b = 0; b < k; ++b) t[b] = og_dws2_tap(e, o, xr, wd, j0, b - pl);
  }}
  og_d2v s = f[1] * t[1];
  __asm__("" : "+v"(s)); /* a product of its own: f[0] * t[0] is the one fused into s */
  s = f[0] * t[0] + s;
  for (int b = 2; b < k; ++b) s = f[b] * t[b] + s;
  return s;
}}"""
