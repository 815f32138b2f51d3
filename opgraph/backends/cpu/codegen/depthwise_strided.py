"""3x3 stride-2 f32 depthwise steps straight from the input rows with AVX-512.

The direct kernel (``codegen/depthwise.py``) copies every input channel into zero-padded
column phases before its tap loops; for a 3x3 filter with stride 2 that copy is most of the
step (C harness of MobileNetV3's 64-channel 112 -> 56 step, one thread, Zen 5: 63 of 96 µs
without the epilogue). Here each 16-output vector of an output row loads the 32 input floats
under it per filter row and splits them in registers: the even columns (``x[2j]``), the odd
ones (``x[2j + 1]``), and with padding 1 to the left the odd ones one lane later
(``x[2j - 1]``, the float before the pair in lane 0: zero at the left edge), without it the
even ones one lane earlier (``x[2j + 2]``, the float after the pair in lane 15: zero past the
row). Rows outside the image are zero vectors through the same multiply-adds, and each
output is ``(row 0 + row 1) + row 2`` with a row's taps in the order the copy-in form's loops
contract them, so the outputs are bitwise the direct kernel's (tested). The last vector of
a row overlaps the one before it when the width is not a multiple of 16 (same values,
written twice); nothing is read past a row's last column.

Taken by ``DirectConvEmitter`` (:func:`takes`) for one-pass depthwise steps written in place
with padding 0 or 1 above and to the left (PyTorch's 1, 1 and TensorFlow's "same" 0, 0 with
the padding below and to the right) and an input about twice the output's width; other ISAs
keep the copy-in form (the helper is AVX-512 only).
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.fused.program import ConvStep
from opgraph.backends.fused.views import static, static_all

#: Lanes of one output vector (AVX-512 f32).
LANES = 16


def takes(step: ConvStep, ctype: str, rowwise: bool) -> bool:
    """Whether the step runs :func:`call` under AVX-512: f32, one input and one output
    channel per group, 3x3, strides 2, no dilation, padding 0 or 1 above and to the left,
    rows of at least one vector, an input twice the output's width (or one more without left
    padding: the 32 floats under a vector are in the row) with rows one after another,
    written in place by the row-wise plan."""
    assert step.x is not None and step.w is not None and step.out is not None
    _, o, _, ow = static_all(step.out.shape)
    return (
        ctype == "float"
        and rowwise
        and static(step.x.shape[1]) == step.groups == o
        and step.kernel == (3, 3)
        and step.strides == (2, 2)
        and step.dilations == (1, 1)
        and step.padding[0] in (0, 1)
        and step.padding[1] in (0, 1)
        and ow >= LANES
        and static(step.x.shape[3]) in ((2 * ow,) if step.padding[1] else (2 * ow, 2 * ow + 1))
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
    pt, pl = step.padding
    return [f"    og_dw3s2_rows(x, {h}L, {wd}L, {pt}L, {pl}, w, {plane}, {ow}L, r0, r1);"]


def _indices(first: int) -> str:
    return ", ".join(str(first + 2 * i) for i in range(LANES))


@dialect.helper("dw3s2")
def _dw3s2() -> str:
    later = ", ".join(str(i) for i in [LANES - 1, *range(LANES - 1)])
    earlier = ", ".join(str(i) for i in [*range(1, LANES), 0])
    return f"""#if defined(__AVX512F__)
typedef float og_d2v __attribute__((vector_size(64)));
typedef int og_d2i __attribute__((vector_size(64)));
/* One filter row of a 3x3 stride-2 depthwise filter for the 16 outputs from j0: input
   row xr of wd columns (null: outside the image) split into its three taps, x[2j - 1],
   x[2j], x[2j + 1] with padding 1 to the left (pl), else x[2j], x[2j + 1], x[2j + 2]. */
static inline __attribute__((always_inline)) og_d2v og_dw3s2_row(
    const float* xr, long wd, long j0, int pl, const float* f) {{
  og_d2v a = {{0}}, b = {{0}}, c = {{0}};
  if (xr) {{
    og_d2v lo, hi;
    __builtin_memcpy(&lo, xr + 2 * j0, 64);
    __builtin_memcpy(&hi, xr + 2 * j0 + 16, 64);
    og_d2v e = __builtin_shuffle(lo, hi, (og_d2i){{{_indices(0)}}});
    og_d2v o = __builtin_shuffle(lo, hi, (og_d2i){{{_indices(1)}}});
    if (pl) {{
      a = __builtin_shuffle(o, (og_d2i){{{later}}});
      a[0] = j0 > 0 ? xr[2 * j0 - 1] : 0.0f;
      b = e;
      c = o;
    }} else {{
      a = e;
      b = o;
      c = __builtin_shuffle(e, (og_d2i){{{earlier}}});
      c[15] = 2 * j0 + 32 < wd ? xr[2 * j0 + 32] : 0.0f;
    }}
  }}
  og_d2v t = f[1] * b;
  __asm__("" : "+v"(t)); /* a product of its own: f[0] * a is the one fused into t */
  t = f[0] * a + t;
  return f[2] * c + t;
}}
/* Output rows r0 .. r1 (plane y, rows of ow) of one channel: input plane x of h rows of
   wd (2 ow, or 2 ow + 1 without left padding) columns, padding pt above and pl to the
   left (0 or 1), filter f (9 taps). */
static inline __attribute__((always_inline)) void og_dw3s2_rows(
    const float* restrict x, long h, long wd, long pt, int pl, const float* restrict f,
    float* restrict y, long ow, long r0, long r1) {{
  for (long r = r0; r < r1; ++r) {{
    const float* xr[3];
    for (int a = 0; a < 3; ++a) {{
      long ir = 2 * r - pt + a;
      xr[a] = ir >= 0 && ir < h ? x + ir * wd : 0;
    }}
    for (long jb = 0; jb < ow; jb += 16) {{
      long j0 = jb + 16 <= ow ? jb : ow - 16;
      og_d2v s = og_dw3s2_row(xr[0], wd, j0, pl, f) + og_dw3s2_row(xr[1], wd, j0, pl, f + 3);
      s = s + og_dw3s2_row(xr[2], wd, j0, pl, f + 6);
      __builtin_memcpy(y + r * ow + j0, &s, 64);
    }}
  }}
}}
#endif"""
