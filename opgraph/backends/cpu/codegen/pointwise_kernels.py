"""The C micro-kernels of pointwise (1x1) convolutions (``codegen/pointwise.py``), blocked per
instruction set, emitted once into each module that has such a convolution (``noclone``: GCC
would clone them per call site for the steps' constant sizes). Served by the shared
generic-kernel library instead, every model with a 1x1 convolution would build that
library, int8 kernels included, on its first compile in a cache (8 s, measured).

* ``og_pw_px`` (``pixels`` layout): 8 output channels (a packed panel, zero-padded) x up to
  ``OG_PW_TILE`` output pixels; per input channel it loads the vectors of one input row and
  broadcasts the 8 filter values (AVX-512: 24 accumulators). ``og_pw_pxb`` is the same with
  each row's bias added to its accumulators (then ReLU or not) before they are stored: a
  ``channel_bias`` epilogue without its pass over the output; ``og_pw_pxr`` adds a residual
  tensor of the output's layout after the bias (then ReLU or not); ``og_pw_pxh`` applies
  hard-swish after the bias (``og_pw_biash``). ``og_pw_pl`` (and ``og_pw_plb`` / ``plr`` /
  ``plh``) is the same tile reading a patch step's phase planes in place of its patch rows
  (``_Reads``: input row ``k`` of each vector at ``off[k]`` from the vector's plane place).
* ``og_pw_ch`` (``channels`` layout): pixels ``p0 .. p1`` of one 32-channel panel, in
  tiles of ``rb`` pixels (a range's last ``rb + 1`` as one tile with AVX-512:
  :func:`wide_tail`), the panel in passes of two vectors; per input
  channel it loads the panel row and broadcasts the pixels' values, then stores the tile
  transposed into the (channel, pixel) output (tiles of :data:`TRANSPOSED_STORES`' pixels or
  more transposed in registers: :func:`_transposed_store`); with AVX2 a one-pixel tile takes
  the whole panel in one pass (``og_pw_ch_one``: :func:`one_pass_pixel`). ``og_pw_chb`` and
  ``og_pw_chr`` are the same with the ``channel_bias`` epilogues of ``og_pw_pxb`` and
  ``og_pw_pxr`` (the same ``_Form`` s): each transposed row (one channel's pixels) plus the
  channel's bias, plus the residual's row at the same place, then ReLU or not, before its
  store; element by element where the tile is stored so (:func:`_channel_value`).
  ``og_pw_chh`` (``og_pw_pxh``'s ``_Form``) adds the bias and applies hard-swish to the
  tile's accumulators, vectors of channels, before the transpose (:func:`_on_accumulators`),
  then stores the tile as ``og_pw_ch`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.register_transpose import loaded, transpose, transposed
from opgraph.backends.fused.lowering.pointwise import PANEL, ROWS

#: (preprocessor test, lanes, vectors of pixels per ``pixels`` tile, pixels per ``channels``
#: tile): 8 x 3 x 16 and 12 x 2 x 16 accumulators with AVX-512 (32 registers), 8 x 1 x 8
#: and 6 x 2 x 8 with AVX2 (16 registers; a ``channels`` tile covers its 32-channel panel in
#: passes of two vectors: with 3 pixels x 4 vectors GCC kept the accumulators on the stack,
#: 6x slower). The C harness of this work (AVX-512, one thread) ran both at 110-116
#: GFLOP/s on the zoo's shapes against OpenBLAS's 90-103.
BLOCKING = (
    ("defined(__AVX512F__)", 16, 3, 12),
    ("defined(__AVX__)", 8, 3, 6),
    ("1", 4, 1, 6),
)
#: ``pixels`` tiles whose :data:`ROWS` x vectors accumulators would not fit 16 registers
#: (AVX2: 8 x 3) run the panel in groups of this many rows, each over the same input
#: vectors (4 x 3 accumulators, 3 input vectors and a broadcast), their accumulators named
#: variables (GCC 12 kept a 4 x 3 array indexed by loops on the stack). The 8 x 1 x 8 tile
#: before it (8 accumulators: one multiply-add in flight per accumulator at Zen 4's latency
#: of 4 and 2 per cycle, 9 loads per 8 multiply-adds) ran ResNet-18's stem (K 147) and
#: 3x3 stride-2 convolutions (K 576) on patch blocks at ~1.25x the AVX-512 build's time.
ROW_GROUP = 4
#: Pixels of the largest ``channels`` tile on any instruction set.
RB_MAX = max(rb for _, _, _, rb in BLOCKING)
#: Rows of the filter panel ``og_pw_ch`` prefetches ahead of the one it multiplies (0: none),
#: both of a row's lines, with the vector widths of :data:`PREFETCHED_LANES`. A panel's
#: first tile reads it from memory when the filters are larger than L2 (ResNet-50's 1024 ->
#: 2048 at 7x7: 8 MB, read once a call); H94 (Zen 4) took 16 rows, AVX-512 only. On the Zen
#: 5 (one thread, per-step minimums, one process, docs/performance.md h131) the ``channels``
#: steps gain from 48-128 rows, each tile's panel read again from L2 (60-150 KB panels
#: beside a 48 KB L1): their sum, 16 -> 64 rows native, MobileNetV3 845 -> 756 us,
#: EfficientNet-B0 2080 -> 1822, ResNet-50 10043 -> 9184; AVX2 (no prefetch before)
#: MobileNetV3 2344 -> 2209, EfficientNet-B0 4652 -> 4454, ResNet-50 19786 -> 19004.
PANEL_PREFETCH = 64
#: The vector widths (lanes) whose ``og_pw_ch`` prefetches its panel (AVX-512 and AVX2: the
#: measured ones).
PREFETCHED_LANES = frozenset({16, 8})
#: Input rows ``og_pw_ch`` prefetches ahead of the one it multiplies, with the vector widths
#: of :data:`INPUT_PREFETCHED_LANES` (0: none): both ends of the tile's pixels in the row (one
#: line or two). A tile reads its input rows ``ldx`` floats apart, each once a pass (1024
#: rows of a 12-pixel tile: 64-128 KB, more than a 48 KiB L1), and the hardware did not fetch
#: them ahead. On the Intel guest (AVX-512, one thread, docs/performance.md h158): ResNet-50's
#: 1024 -> 256 at 14x14 0.86-0.93x, 2048 -> 512 at 7x7 0.91x, 512 -> 128 at 28x28 0.97x,
#: 256 -> 1024 level.
INPUT_PREFETCH = 8
#: The vector widths whose ``og_pw_ch`` prefetches its input rows: AVX-512 only. AVX2's tile
#: (6 pixels, two passes over a panel, the second reading rows the first brought in) lost
#: 3-6 % with K 256 and 512 and gained 1-16 % (noisy) with K 1024 and 2048; gating on K
#: (the rows against L1) cost a second copy of every tile (GCC 2.3 -> 6.1 s for the
#: ``og_pw_ch`` kernels) or a branch in the loop (3.2 s) and measured no better.
INPUT_PREFETCHED_LANES = frozenset({16})
#: Vector registers of each instruction set (AVX-512: 32, else 16).
REGISTERS = {16: 32, 8: 16, 4: 16}


def wide_tail(lanes: int, rb: int) -> bool:
    """Whether ``og_pw_ch`` runs a range that ends ``rb + 1`` pixels before its end as one
    tile of ``rb + 1`` pixels instead of a tile of ``rb`` and a one-pixel tile: the
    one-pixel tile reads the whole panel for two accumulators, whose multiply-adds wait on
    each other (Zen 4's latency of 4). It needs ``(rb + 1) x 2`` accumulators, the two
    panel vectors and the broadcast in registers: AVX-512 only (13 x 2 + 3 = 29 of 32; AVX2's
    7 x 2 + 3 would spill). 7x7 planes (49 = 4 x 12 + 1 pixels: ResNet-50's 512 -> 2048 and
    2048 -> 512, MobileNetV3's last stage) take it; C harness, one thread: 512 -> 2048 at
    7x7 0.952 -> 0.918 ms, 960 -> 160 0.136 -> 0.131 (docs/performance.md, H94)."""
    pp = min(2, PANEL // lanes)
    return (rb + 1) * pp + pp + 1 <= REGISTERS[lanes]


def _branches(make: Callable[[int, int, int], str]) -> str:
    """``make(lanes, pixel vectors, channel-tile pixels)`` for each instruction set."""
    parts = []
    for i, (test, lanes, nv, rb) in enumerate(BLOCKING):
        keyword = "#if" if i == 0 else "#elif"
        parts.append(f"{keyword} {test}\n{make(lanes, nv, rb)}")
    return "\n".join(parts) + "\n#endif"


def _tile(lanes: int, nv: int, rb: int) -> str:
    return f"#define OG_PW_TILE {nv * lanes}"


@dataclass(frozen=True)
class _Form:
    """``og_pw_px`` or a variant of it that adds each row's bias (``og_pw_pxb``), or its
    bias and a residual tensor of the output's layout (``og_pw_pxr``), to the products in
    registers, then ReLU or not, or hard-swish after the bias (``og_pw_pxh``); the same
    forms of ``og_pw_ch`` (``og_pw_chb``, ``og_pw_chr``, ``og_pw_chh``): name suffix, extra
    parameters, extra arguments of the drivers' calls (``{at}``: the tile's first pixel), the
    note on its comment (``pixels`` layout, ``channels`` layout), whether it adds a bias and
    whether a residual too, the call that adds the bias and applies the activation to a
    vector (``{acc}``: the accumulator, ``{row}``: its row or channel) where there is no
    residual, and the same for one value stored element by element in the ``channels``
    layout (``{value}``: the product, ``{channel}``, ``{at}``: its place in ``y``); or, in
    the ``channels`` layout, the call applied to every accumulator before the tile is stored
    (``{acc}``, ``{bias}``: the vector of its channels' biases; :func:`_on_accumulators`)."""

    suffix: str
    params: str
    args: str
    note: str
    channel_note: str = ""
    biased: bool = False
    residual: bool = False
    activation: str = "og_pw_bias({acc}, bias, {row}, relu)"
    scalar: str = "og_pw_res1({value}, bias[{channel}], relu)"
    accumulators: str = ""

    def epilogue(self, acc: str, row: str, at: str, whole: bool) -> str:
        """The assignment of accumulator ``acc`` of panel row ``row`` (``R`` rows valid),
        columns from ``at`` (``whole``: every row valid, whole vectors), or ''."""
        if not self.biased:
            return ""
        rr = f"({row} < R ? {row} : 0)"
        if not self.residual:
            return f"{acc} = {self.activation.format(acc=acc, row=rr)};"
        if whole:
            return f"{acc} = og_pw_biasr({acc}, bias, {row}, res + ({row}) * ldy + {at}, relu);"
        return f"{acc} = og_pw_bias({acc}, bias, {rr}, 0);"  # the rest as it is stored

    @property
    def output(self) -> str:
        """The ``pixels`` kernels' output pointer type: not ``restrict`` in the residual
        form, whose output may be the residual's own block (``inplace_pairs`` of
        ``PointwiseConvStep``: each tile reads its residual before it stores over it)."""
        return "float*" if self.residual else "float* restrict"

    def whole_or_not(self, whole: str, make: Callable[[bool], str]) -> str:
        """``make(False)``; the residual form's in two branches on ``whole``: a whole
        tile reads whole vectors of the residual, any other adds it (then ReLU) as the
        tile is stored element by element (:meth:`stored`)."""
        if not self.residual:
            return make(False)
        return f"if ({whole}) {{ {make(True)} }} else {{ {make(False)} }}"

    def stored(self, value: str, at: str) -> str:
        """The value stored element by element at ``y + at`` (a tile that is not whole)."""
        return f"og_pw_res1({value}, res[{at}], relu)" if self.residual else value


_PLAIN = _Form("", "", "", "")
#: ``og_pw_px`` is left as it was: the bias in the same function slowed EfficientNet-B0's
#: 16 -> 96 SiLU convolution at 112x112, which has no bias to add, by 3-4 % per step
#: (AVX-512: 189 -> 281 stack references in the kernel's assembly; docs/performance.md,
#: h121).
_BIASED = _Form(
    "b",
    ", const float* restrict bias, int relu",
    ", bias, relu",
    "; row r's outputs are bias[r] plus the products (then, with relu, negatives\n   "
    "made +0), added in registers (og_pw_bias)",
    ";\n   channel j's outputs are bias[j] plus the products (then, with relu,"
    "\n   negatives made +0), added in registers before they are stored",
    biased=True,
)
#: The residual in a third function, not in ``og_pw_pxb``: modules without a residual
#: epilogue keep h121's code.
_RESIDUAL = _Form(
    "r",
    ", const float* restrict bias, const float* res, int relu",
    ", bias, res + {at}, relu",
    "; row r's outputs are bias[r] plus the products, plus res[r * ldy + j] (then,\n   "
    "with relu, negatives made +0), added in registers (og_pw_biasr)",
    ";\n   channel j's outputs are bias[j] plus the products, plus res at y's place (then,"
    " with relu,\n   negatives made +0), added in registers before they are stored",
    biased=True,
    residual=True,
    scalar="og_pw_res1({value} + bias[{channel}], res[{at}], relu)",
)
#: Hard-swish in a fourth function (``og_pw_pxh``, ``og_pw_chh``), its line's constants as
#: parameters.
_HARD_SWISH = _Form(
    "h",
    ", const float* restrict bias, float alpha, float beta",
    ", bias, alpha, beta",
    "; row r's outputs are v = bias[r] plus the products, then\n   "
    "v * max(min(v * alpha + beta, 1), +0) (hard-swish), in registers (og_pw_biash)",
    ";\n   channel j's outputs are v = bias[j] plus the products, then"
    "\n   v * max(min(v * alpha + beta, 1), +0) (hard-swish), in registers before the"
    "\n   tile is transposed",
    biased=True,
    activation="og_pw_biash({acc}, bias, {row}, alpha, beta)",
    accumulators="og_pw_hswish({acc} + {bias}, alpha, beta)",
)


@dataclass(frozen=True)
class _Reads:
    """How a ``pixels`` kernel reads its input rows: ``og_pw_px`` (``name`` ``px``) row ``k``
    of its tile at ``x + k * ldx``; ``og_pw_pl`` (``pl``: a patch step's phase planes, no
    patches) row ``k`` of vector ``v`` at ``x + off[k]`` plus the plane place of the
    vector's first pixel ``p`` (``p / ow * ldr + p % ow``: whole vectors within one output
    row, ``ow`` a multiple of the lanes), ``off`` the patch rows' offsets in the planes."""

    name: str
    params: str  # after ``wp``
    args: str  # the driver's, for the tile at pixel ``o``
    note: str
    row_at: str  # vector ``{v}`` of input row ``k`` (``{offset}``: its first float)
    pointers: str = ""  # C before the loop over ``k`` (``{nv}`` vectors of ``{lanes}``)

    def setup(self, nv: str, lanes: int) -> str:
        """C before the loop over ``k`` (``og_pw_pl``: the vectors' row pointers)."""
        return self.pointers.format(nv=nv, lanes=lanes)

    def row(self, v: int | str, lanes: int) -> str:
        """The address of vector ``v`` (a number, or a C variable) of input row ``k``."""
        offset = v * lanes if isinstance(v, int) else f"{v} * {lanes}"
        return self.row_at.format(v=v, offset=offset)


_ROWS = _Reads(
    "px", "const float* restrict x, long ldx", "x + o, ldx", "", "x + k * ldx + {offset}"
)
#: The stem's products straight from its phase planes (``PointwiseConvStep.from_planes``).
_PLANES = _Reads(
    "pl",
    "const float* restrict x, const long* restrict off, long p, long ow, long ldr",
    "x, off, p + o, ow, ldr",
    "; input row k of the vector at pixel p at x + off[k] + p / ow * ldr + p % ow",
    "xp[{v}] + off[k]",
    "const float* restrict xp[{nv}];\n  for (int v = 0; v < {nv}; ++v) {{\n"
    "    const long pv = p + v * {lanes};\n"
    "    xp[v] = x + pv / ow * ldr + pv % ow;\n  }}\n  ",
)


def _declares_vector_type(form: _Form, reads: _Reads) -> bool:
    """Whether a ``pixels`` kernel declares ``og_pwv``: ``og_pw_px`` itself; its variants and
    ``og_pw_pl`` come after it and use its."""
    return form is _PLAIN and reads is _ROWS


def _px_driver(
    lanes: int, nv: int, make: Callable[[int, str], str], form: _Form, reads: _Reads
) -> str:
    """``og_pw_px`` (or a variant; ``og_pw_pl`` and its variants: ``reads``): the panel's
    pixels in whole tiles of ``nv`` vectors, then the rest, each by a ``switch`` over its
    vector count of ``make(vectors, args)``."""
    args = form.args.format(at="o")
    cases = " ".join(f"case {v}: {make(v, args)}; break;" for v in range(nv, 0, -1))
    return f"""/* R (<= {ROWS}) output channels of a packed panel wp, cols pixels: whole tiles of
   {nv * lanes}, then what is left{form.note}{reads.note}. */
__attribute__((noinline, noclone)) static void og_pw_{reads.name}{form.suffix}(
    const float* restrict wp, {reads.params}, long K, {form.output} y,
    long ldy, long R, long cols{form.params}) {{
  for (long o = 0; o < cols; o += {nv * lanes}) {{
    long c = cols - o < {nv * lanes} ? cols - o : {nv * lanes};
    switch ((c + {lanes - 1}) / {lanes}) {{ {cases} default: break; }}
  }}
}}"""


def _bias(lanes: int, nv: int, rb: int) -> str:
    """``og_pw_bias``: a vector of products plus its row's bias, then, with ``relu``,
    ``v < 0 ? +0 : v`` lane by lane (the epilogue's ``Add`` and ``Relu``: NaN and -0 kept)
    by a mask of the comparison; ``og_pw_biasr``: the same with a whole vector of the
    residual at ``res`` added after the bias; ``og_pw_res1``: one value plus its residual,
    then ``v < 0 ? +0 : v`` or not (the same bits as the vector form's mask)."""
    size = 4 * lanes
    return f"""typedef int og_pwi __attribute__((vector_size({size})));
static inline __attribute__((always_inline)) og_pwv og_pw_relu(og_pwv v, int relu) {{
  if (relu) v = (og_pwv)((og_pwi)v & ~(og_pwi)(v < (og_pwv){{0}}));
  return v;
}}
static inline __attribute__((always_inline)) og_pwv og_pw_bias(
    og_pwv v, const float* restrict bias, long r, int relu) {{
  v += bias[r];
  return og_pw_relu(v, relu);
}}
static inline __attribute__((always_inline)) og_pwv og_pw_biasr(
    og_pwv v, const float* restrict bias, long r, const float* restrict res, int relu) {{
  og_pwv e;
  __builtin_memcpy(&e, res, {size});
  v += bias[r];
  v += e;
  return og_pw_relu(v, relu);
}}
static inline __attribute__((always_inline)) float og_pw_res1(float v, float res, int relu) {{
  v += res;
  return relu && v < 0 ? 0.0f : v;
}}"""


#: Per lanes: the body of ``og_pw_min(a, b)``, ``a < b ? a : b`` lane by lane (``vminps``
#: is that select, NaN and signed-zero ties included; GCC writes no ``vminps`` for any C
#: form of it, docs/performance.md h121); ``og_pw_max`` is the same with ``max``.
_EXTREMA = {
    16: "return __builtin_ia32_{op}ps512_mask(a, b, b, (unsigned short)-1, 4);",
    8: "return __builtin_ia32_{op}ps256(a, b);",
    4: "og_pwi m = (og_pwi)(a {cmp} b);\n  return (og_pwv)((m & (og_pwi)a) | (~m & (og_pwi)b));",
}


def _hard_swish(lanes: int, nv: int, rb: int) -> str:
    """``og_pw_biash``: a vector of products plus its row's bias, ``v``, then
    ``v * (max(+0, min(1, v * alpha + beta)) + 0)``: the operations of the hard-swish pass
    (``Max`` / ``Min`` against a constant bound, ``lowering/elementwise.py``) in its order,
    ``v * alpha + beta`` contracted as GCC contracts the pass's (``og_pw_hswish``: after the
    bias); ``og_pw_biasv``: the vector of ``n`` channels' biases at ``bias`` (lanes past
    ``n`` zero: no read past a partial panel's channels)."""
    extrema = "\n".join(
        f"""static inline __attribute__((always_inline)) og_pwv og_pw_{op}(og_pwv a, og_pwv b) {{
  {_EXTREMA[lanes].format(op=op, cmp=cmp)}
}}"""
        for op, cmp in (("min", "<"), ("max", ">"))
    )
    return f"""typedef int og_pwi __attribute__((vector_size({4 * lanes})));
{extrema}
static inline __attribute__((always_inline)) og_pwv og_pw_hswish(
    og_pwv v, float alpha, float beta) {{
  const og_pwv zero = {{0}};
  og_pwv t = v * alpha + beta;
  t = og_pw_max(zero, og_pw_min(zero + 1.0f, t)) + 0.0f;
  return v * t;
}}
static inline __attribute__((always_inline)) og_pwv og_pw_biash(
    og_pwv v, const float* restrict bias, long r, float alpha, float beta) {{
  v += bias[r];
  return og_pw_hswish(v, alpha, beta);
}}
static inline __attribute__((always_inline)) og_pwv og_pw_biasv(
    const float* restrict bias, long n) {{
  og_pwv b = {{0}};
  if (n >= {lanes})
    __builtin_memcpy(&b, bias, {4 * lanes});
  else
    for (long i = 0; i < n; ++i) b[i] = bias[i];
  return b;
}}"""


def _grouped(lanes: int, nv: int) -> bool:
    """Whether the ``pixels`` tile's accumulators need :data:`ROW_GROUP`-row groups."""
    return ROWS * nv + nv + 1 > (32 if lanes == 16 else 16)


def _variant(form: _Form, reads: _Reads = _ROWS) -> Callable[[int, int, int], str]:
    """``og_pw_px``, or a variant (``og_pw_pxb``, ``og_pw_pxr``, ``og_pw_pxh``: after
    ``og_pw_px``, whose vector type they use, and ``pw_bias`` / ``pw_hswish``); with
    ``_PLANES``, ``og_pw_pl`` and its variants (after ``og_pw_px``)."""

    def make(lanes: int, nv: int, rb: int) -> str:
        if _grouped(lanes, nv):
            return _px_grouped(lanes, nv, form, reads)
        vector = _vector_type(lanes) if _declares_vector_type(form, reads) else ""
        return vector + _px_one(lanes, nv, form, reads)

    return make


def _vector_type(lanes: int) -> str:
    return f"typedef float og_pwv __attribute__((vector_size({4 * lanes})));\n"


def _px_one(lanes: int, nv: int, form: _Form, reads: _Reads) -> str:
    """``og_pw_px`` (or a variant) with one tile of all :data:`ROWS` rows."""
    name = f"og_pw_{reads.name}{form.suffix}_mk"
    return "\n".join(
        [
            _px_mk(lanes, nv, form, reads),
            _px_driver(
                lanes,
                nv,
                lambda v, a: f"{name}({v}, wp, {reads.args}, K, y + o, ldy, R, c{a})",
                form,
                reads,
            ),
        ]
    )


def _px_mk(lanes: int, nv: int, form: _Form, reads: _Reads) -> str:
    """``og_pw_px_mk`` (or a variant's): one tile of up to ``nv`` vectors."""
    size = 4 * lanes

    def loops(whole: bool) -> str:
        line = form.epilogue("acc[r][v]", "r", f"v * {lanes}", whole)
        return f"for (int r = 0; r < {ROWS}; ++r) for (int v = 0; v < nv; ++v) {line}"

    whole = f"R == {ROWS} && cols == nv * {lanes}"
    bias = f"\n  {form.whole_or_not(whole, loops)}" if form.biased else ""
    head = f"/* y[r * ldy + j] = sum_k wp[k * {ROWS} + r] * x[k * ldx + j] for r < R (the panel's"
    return f"""{head} {ROWS}
   rows are computed: padding rows are zero), j < cols <= nv * {lanes}; x is readable for
   whole vectors. */
static inline __attribute__((always_inline)) void og_pw_{reads.name}{form.suffix}_mk(
    const int nv, const float* restrict wp, {reads.params}, long K,
    {form.output} y, long ldy, long R, long cols{form.params}) {{
  {reads.setup("nv", lanes)}og_pwv acc[{ROWS}][{nv}];
  for (int r = 0; r < {ROWS}; ++r)
    for (int v = 0; v < nv; ++v) acc[r][v] = (og_pwv){{0}};
  for (long k = 0; k < K; ++k) {{{_next_tile_prefetch(form, lanes)}
    og_pwv xv[{nv}];
    for (int v = 0; v < nv; ++v) __builtin_memcpy(&xv[v], {reads.row("v", lanes)}, {size});
    for (int r = 0; r < {ROWS}; ++r) {{
      const float s = wp[k * {ROWS} + r];
      for (int v = 0; v < nv; ++v) acc[r][v] += s * xv[v];
    }}
  }}{bias}
  if (R == {ROWS} && cols == nv * {lanes}) {{
    for (int r = 0; r < {ROWS}; ++r)
      for (int v = 0; v < nv; ++v) __builtin_memcpy(y + r * ldy + v * {lanes}, &acc[r][v], {size});
    return;
  }}
  float t[{nv * lanes}];
  for (long r = 0; r < R; ++r) {{
    for (int v = 0; v < nv; ++v) __builtin_memcpy(t + v * {lanes}, &acc[r][v], {size});
    for (long j = 0; j < cols; ++j) y[r * ldy + j] = {form.stored("t[j]", "r * ldy + j")};
  }}
}}"""


#: Whether ``og_pw_pxr``'s tile prefetches the residual lines of the next panel's tile at its
#: columns (rows ``ROWS`` on; within a block the next tile the driver runs), one vector a
#: step of the inner loop; each group of the grouped tile (AVX2) the next panel's rows of
#: its group (h156: ResNet-50's first residual step, over the shortcut's output just
#: written, 2.11 -> 1.20 ms, the later 56x56 ones 1.40 -> 1.15-1.19, one thread, the Intel
#: guest with ``isa="avx2"``). The residual (the output's
#: channel-major layout: each of the tile's rows a line run one plane apart) comes from L3
#: when the output is larger than L2 (ResNet-50's 64 -> 256 at 56x56: 3.2 MB), and the
#: tile's 24 loads after its products stalled it: the Intel guest (2 MiB L2), one thread,
#: per-step minima in the model, 0.97-0.99 -> 0.72-0.77 ms for those steps, the 28x28
#: ones 0.90-0.92x (docs/performance.md, h148). The output's lines prefetched for writing
#: as well lost (the 56x56 steps 1.08-1.14x).
RESIDUAL_PREFETCH = True


def _next_tile_prefetch(
    form: _Form, lanes: int, nv: str = "nv", rows: int = ROWS, group: str = ""
) -> str:
    """The inner loop's prefetch of the next panel's residual (:data:`RESIDUAL_PREFETCH`):
    ``rows`` rows of ``nv`` vectors from row ``ROWS`` (plus ``group``: a grouped tile's
    first row)."""
    if not (RESIDUAL_PREFETCH and form.residual):
        return ""
    at = f"({ROWS}{group} + k / {nv}) * ldy + k % {nv} * {lanes}"
    return f"\n    if (k < {rows} * {nv}) __builtin_prefetch(res + {at}, 0, 3);"


def _px_grouped_mk(lanes: int, nv: int, form: _Form, reads: _Reads) -> str:
    """``og_pw_px_mk<nv>`` (or a variant's): the panel's rows in groups of
    :data:`ROW_GROUP`, ``nv`` vectors."""
    size, g = 4 * lanes, ROW_GROUP
    pairs = [(r, v) for r in range(g) for v in range(nv)]
    zero = " ".join(f"og_pwv c{r}{v} = {{0}};" for r, v in pairs)
    # each input vector loaded once, into a register (the empty asm): with -mtune=native
    # (znver3 to GCC 12 on this Zen 4), GCC folded the loads into the multiply-adds, 16
    # loads per 12 of them (~15 % slower)
    loads = " ".join(
        f"og_pwv b{v}; __builtin_memcpy(&b{v}, {reads.row(v, lanes)}, {size}); "
        f'__asm__("" : "+x"(b{v}));'
        for v in range(nv)
    )
    fmas = "\n".join(
        f"      {{ const float s = wg[k * {ROWS} + {r}]; "
        + " ".join(f"c{r}{v} += s * b{v};" for v in range(nv))
        + " }"
        for r in range(g)
    )
    whole = " ".join(
        f"__builtin_memcpy(yg + {r} * ldy + {v * lanes}, &c{r}{v}, {size});" for r, v in pairs
    )
    spill = " ".join(f"__builtin_memcpy(t[{r}] + {v * lanes}, &c{r}{v}, {size});" for r, v in pairs)

    def biasing(whole: bool) -> str:
        return " ".join(
            form.epilogue(f"c{r}{v}", f"g + {r}", f"{v * lanes}", whole) for r, v in pairs
        )

    full = f"R - g >= {g} && cols == {nv * lanes}"
    stored = form.stored("t[r][j]", "(g + r) * ldy + j")
    bias = f"\n    {form.whole_or_not(full, biasing)}" if form.biased else ""
    name = f"og_pw_{reads.name}{form.suffix}_mk{nv}"
    prefetch = _next_tile_prefetch(form, lanes, str(nv), g, " + g")
    return f"""static inline __attribute__((always_inline)) void {name}(
    const float* restrict wp, {reads.params}, long K, {form.output} y,
    long ldy, long R, long cols{form.params}) {{
  {reads.setup(str(nv), lanes)}for (long g = 0; g < R; g += {g}) {{
    const float* restrict wg = wp + g;
    {form.output} yg = y + g * ldy;
    {zero}
    for (long k = 0; k < K; ++k) {{{prefetch}
      {loads}
{fmas}
    }}{bias}
    if (R - g >= {g} && cols == {nv * lanes}) {{
      {whole}
      continue;
    }}
    float t[{g}][{nv * lanes}];
    {spill}
    for (long r = 0; r < {g} && g + r < R; ++r)
      for (long j = 0; j < cols; ++j) yg[r * ldy + j] = {stored};
  }}
}}"""


def _px_grouped(lanes: int, nv: int, form: _Form, reads: _Reads) -> str:
    """``og_pw_px`` (or a variant) with :data:`ROW_GROUP`-row groups (see there)."""
    name = f"og_pw_{reads.name}{form.suffix}_mk"
    kernels = "\n".join(_px_grouped_mk(lanes, v, form, reads) for v in range(1, nv + 1))
    driver = _px_driver(
        lanes,
        nv,
        lambda v, a: f"{name}{v}(wp, {reads.args}, K, y + o, ldy, R, c{a})",
        form,
        reads,
    )
    if not _declares_vector_type(form, reads):  # og_pw_px's vector type is there already
        return f"{kernels}\n{driver}"
    return f"""typedef float og_pwv __attribute__((vector_size({4 * lanes})));
/* y[r * ldy + j] = sum_k wp[k * {ROWS} + r] * x[k * ldx + j] for r < R, j < cols <= nv *
   {lanes}, in groups of {ROW_GROUP} rows (the groups at or past R are skipped; rows of a group
   past R are computed from the zero padding, not stored); x is readable for whole vectors. */
{kernels}
{driver}"""


def _channel_variant(form: _Form) -> Callable[[int, int, int], str]:
    """``og_pw_ch``, or ``og_pw_chb`` / ``og_pw_chr`` / ``og_pw_chh`` (after ``og_pw_ch`` and
    ``pw_bias`` / ``pw_hswish``)."""

    def make(lanes: int, nv: int, rb: int) -> str:
        return _channels(lanes, rb, form)

    return make


def _channel_tuning(form: _Form) -> str:
    """The variants' extra attribute: GCC's generic tuning. Under ``-march=native`` on this
    Zen 5 (GCC 12 tunes it as ``znver3``), GCC kept the variants' spilled general registers
    in vector registers (``inter_unit_moves_to_vec``, off in generic tuning) and so one panel
    vector of the 12-pixel tile on the stack, an operand of 12 of its 24 multiply-adds:
    ResNet-50's 1024 -> 256 at 14x14 0.42 -> 0.60 ms a step (``og_pw_ch`` itself fits,
    barely: 24 accumulators, 3 operands and the transpose's 4 index vectors). Callees are
    ``always_inline``, which GCC inlines across tunings."""
    return ', target("tune=generic")' if form.biased else ""


def _channel_value(form: _Form, value: str, channel: str, at: str) -> str:
    """The value stored element by element at ``y + at`` of a panel's ``channel``: the
    product ``value`` and the form's epilogue (``_Form.scalar``: the vector forms' bits)."""
    if not form.biased:
        return value
    return form.scalar.format(value=value, channel=channel, at=at)


def _on_accumulators(form: _Form, lanes: int, vectors: int, rows: str, at: str, n: str) -> str:
    """C applying ``form.accumulators`` (``og_pw_chh``'s hard-swish) to accumulators
    ``acc[r][v]``, ``r < rows``, ``v < vectors``, of the ``n`` channels from ``at`` (their
    biases' vectors: ``og_pw_biasv``), before the tile is stored as ``og_pw_ch`` stores it
    (:func:`_stores`): whole vectors of channels, not the transposed rows (AVX2: 6-pixel
    rows in 8 lanes, 16 rows for 12 accumulators; 1-2 % slower, docs/performance.md h131);
    or ''."""
    if not form.accumulators:
        return ""
    value = form.accumulators.format(acc="acc[r][v]", bias="bv[v]")
    return f"""
  og_pwv bv[{vectors}];
  for (int v = 0; v < {vectors}; ++v)
    bv[v] = og_pw_biasv(bias + {at} + v * {lanes}, {n} - v * {lanes});
  for (int r = 0; r < {rows}; ++r)
    for (int v = 0; v < {vectors}; ++v) acc[r][v] = {value};"""


def _stores(form: _Form) -> _Form:
    """The form whose epilogue a ``channels`` tile's stores apply: ``form``'s, or none where
    ``form`` applies its own to the accumulators (:func:`_on_accumulators`)."""
    return _PLAIN if form.accumulators else form


def _channels(lanes: int, rb: int, form: _Form) -> str:
    """``og_pw_ch`` (or a variant: ``form``) and its tiles for ``lanes``-lane vectors."""
    size = 4 * lanes
    pp = min(2, PANEL // lanes)  # vectors of one pass over a panel
    wp = pp * lanes  # channels of one pass
    name = f"og_pw_ch{form.suffix}"
    chunks = [c for c in (8, 4, 2, 1) if c < rb]  # the rest of a range, as in binary
    one = one_pass_pixel(lanes)
    run = f"wt, x + a, ldx, K, y + a, ldy, valid{form.args.format(at='a')}"
    runs = {c: f"{name}_run({c}, {run})" for c in chunks}
    one_kernel = _one_pixel(lanes, form) + "\n" if one else ""
    if one:
        runs[1] = f"{name}_one({run})"
    rest = "\n".join(f"  if (r & {c}) {{\n    {runs[c]};\n    a += {c};\n  }}" for c in chunks)
    wide = wide_tail(lanes, rb)
    tile = rb + 1 if wide else rb  # the largest tile
    last = f" (the last {tile} as one tile)" if wide else ""
    prefetch = _prefetch(lanes, "k", "\n    ")
    tiles = f"  for (; a + {rb} <= p1; a += {rb}) {name}_run({rb}, {run});"
    if wide:  # the last rb + 1 pixels as one tile (see wide_tail)
        tiles = (
            f"  for (; a + {rb} <= p1 && p1 - a != {tile}; a += {rb})\n"
            f"    {name}_run({rb}, {run});\n"
            f"  if (p1 - a == {tile}) {{\n"
            f"    {name}_run({tile}, {run});\n"
            f"    a = p1;\n  }}"
        )
    stores = _stores(form)
    transposed = _transposed_store(lanes, pp, tile, stores) if lanes in TRANSPOSED_STORES else ""
    stored = _channel_value(stores, "t[r][j]", f"h * {wp} + j", f"(h * {wp} + j) * ldy + r")
    activated = _on_accumulators(form, lanes, pp, "R", f"h * {wp}", "last")
    extra, passed = (", ...", ", __VA_ARGS__") if form.biased else ("", "")
    return f"""typedef float og_pwv __attribute__((vector_size({size})));
typedef int og_pwi __attribute__((vector_size({size})));
/* y[j * ldy + r] = sum_k wt[k * {PANEL} + j] * x[k * ldx + r], r < R, for the channels j of
   pass h ({wp} of the panel's {PANEL}) below valid{form.channel_note}. */
static inline __attribute__((always_inline)) void {name}_mk(
    const int R, long h, const float* restrict wt, const float* restrict x, long ldx, long K,
    float* restrict y, long ldy, long valid{form.params}) {{
  og_pwv acc[{tile}][{pp}];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < {pp}; ++v) acc[r][v] = (og_pwv){{0}};
  wt += h * {wp};
  for (long k = 0; k < K; ++k) {{
    og_pwv b[{pp}];{prefetch}{_input_prefetch(lanes)}
    for (int v = 0; v < {pp}; ++v) __builtin_memcpy(&b[v], wt + k * {PANEL} + v * {lanes}, {size});
    for (int r = 0; r < R; ++r) {{
      const float s = x[k * ldx + r];
      for (int v = 0; v < {pp}; ++v) acc[r][v] += s * b[v];
    }}
  }}
  long last = valid - h * {wp} < {wp} ? valid - h * {wp} : {wp};{activated}{transposed}
  float t[{tile}][{wp}];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < {pp}; ++v) __builtin_memcpy(t[r] + v * {lanes}, &acc[r][v], {size});
  for (long j = 0; j < last; ++j)
    for (int r = 0; r < R; ++r) y[(h * {wp} + j) * ldy + r] = {stored};
}}
#define {name}_run(R, wt, x, ldx, K, y, ldy, valid{extra}) \
  for (long h = 0; h * {wp} < (valid); ++h) {name}_mk(R, h, wt, x, ldx, K, y, ldy, valid{passed})
{one_kernel}/* Pixels p0 .. p1 of one {PANEL}-channel panel wt (its valid channels): tiles of {rb}
   pixels{last}, then the rest in power-of-two tiles (one instantiation of the tile per size,
   not one per pixel count: GCC took 1.8 s for all twelve), each in passes of {wp} channels. */
__attribute__((noinline, noclone{_channel_tuning(form)})) static void {name}(
    const float* restrict wt, const float* restrict x, long ldx, long K, float* restrict y,
    long ldy, long p0, long p1, long valid{form.params}) {{
  long a = p0;
{tiles}
  long r = p1 - a;
{rest}
}}"""


#: Multiply-add chains a one-pixel tile runs at least (``og_pw_ch_one``): Zen 5's latency of 4
#: cycles and 2 multiply-adds a cycle, so 4 chains run at half the peak, 2 at a quarter.
PIXEL_CHAINS = 4


def pixel_splits(lanes: int) -> int:
    """The interleaved sums over ``k`` of ``og_pw_ch_one``: 1 where the panel's vectors give
    :data:`PIXEL_CHAINS` chains (AVX2: 4), else enough for them (AVX-512: 2 vectors x 2, even
    and odd ``k`` summed apart and added at the end)."""
    return max(1, PIXEL_CHAINS // (PANEL // lanes))


def one_pass_pixel(lanes: int) -> bool:
    """Whether ``og_pw_ch`` runs a one-pixel tile over its whole panel in one pass
    (``og_pw_ch_one``: ``PANEL / lanes`` x :func:`pixel_splits` accumulators) instead of
    passes of two vectors: where that gives more than two chains and its accumulators,
    vectors and the broadcast fit the registers (AVX2: 4 + 4 + 1 of 16, AVX-512 2 x 2 + 2 + 1
    of 32). A one-pixel tile's multiply-adds wait on each other (Zen 5: 4 cycles), so two
    chains run at a quarter of the peak and four at half: the squeeze-excite convolutions of
    1x1 planes and the last pixel of 7x7 planes (49 = 8 x 6 + 1). With one sum over ``k``
    (AVX2) each channel's multiply-adds are the same in the same order (sequential FMAs; GCC
    left some modules' second pass of two vectors uncontracted, one rounding apart); with two
    (AVX-512) the order changes (a rounding or so apart)."""
    vectors = PANEL // lanes
    accumulators = vectors * pixel_splits(lanes)
    return accumulators > min(2, vectors) and accumulators + vectors + 1 <= REGISTERS[lanes]


def _input_prefetch(lanes: int) -> str:
    """``og_pw_ch``'s prefetches of its tile's input row :data:`INPUT_PREFETCH` rows ahead of
    row ``k``: the lines of its first and last pixel (one line where the tile's ``R`` pixels
    do not cross one; :data:`INPUT_PREFETCHED_LANES` only); or ''."""
    if not INPUT_PREFETCH or lanes not in INPUT_PREFETCHED_LANES:
        return ""
    at = f"x + (k + {INPUT_PREFETCH}) * ldx"
    return f"\n    __builtin_prefetch({at});\n    __builtin_prefetch({at} + R - 1);"


def _prefetch(lanes: int, row: str, indent: str) -> str:
    """The prefetches of the filter panel's row :data:`PANEL_PREFETCH` rows ahead of row
    ``row`` (:data:`PREFETCHED_LANES` only; each line after ``indent``)."""
    ahead = PANEL_PREFETCH * PANEL if lanes in PREFETCHED_LANES else 0  # floats ahead
    return "".join(
        f"{indent}__builtin_prefetch(wt + {row} * {PANEL} + {ahead + line});"
        for line in range(0, PANEL, 16)
        if ahead
    )


def _pixel_k(lanes: int, k: str, c: str, pad: str, prefetch: bool = False) -> str:
    """``og_pw_ch_one``'s multiply-adds of input channel ``k`` into sum ``c`` (its main loop
    with the filter prefetch, and its odd-``K`` tail), each line indented by ``pad``."""
    vectors, size = PANEL // lanes, 4 * lanes
    ahead = _prefetch(lanes, k, "\n" + pad) if prefetch else ""
    return f"""
{pad}const float s = x[{k} * ldx];{ahead}
{pad}for (int v = 0; v < {vectors}; ++v) {{
{pad}  og_pwv b;
{pad}  __builtin_memcpy(&b, wt + {k} * {PANEL} + v * {lanes}, {size});
{pad}  acc[{c}][v] += s * b;
{pad}}}"""


def _one_pixel(lanes: int, form: _Form) -> str:
    """``og_pw_ch_one`` (or a variant's: ``form``): one pixel of a panel over all of its
    channels in one pass, in :func:`pixel_splits` interleaved sums over ``k``."""
    vectors, size, splits = PANEL // lanes, 4 * lanes, pixel_splits(lanes)
    rest = (
        f"""
  for (; k < K; ++k) {{{_pixel_k(lanes, "k", "0", "    ")}
  }}
  for (int c = 1; c < {splits}; ++c)
    for (int v = 0; v < {vectors}; ++v) acc[0][v] += acc[c][v];"""
        if splits > 1
        else ""
    )
    apart = f" x {splits}, k mod {splits} apart" if splits > 1 else ""
    activated = _on_accumulators(form, lanes, vectors, "1", "0", "valid")
    stored = _channel_value(_stores(form), "t[j]", "j", "j * ldy")
    return f"""/* y[j * ldy] = sum_k wt[k * {PANEL} + j] * x[k * ldx], j < valid: one pixel, the
   whole panel in one pass ({vectors}{apart} accumulators). */
static inline __attribute__((always_inline)) void og_pw_ch{form.suffix}_one(
    const float* restrict wt, const float* restrict x, long ldx, long K, float* restrict y,
    long ldy, long valid{form.params}) {{
  og_pwv acc[{splits}][{vectors}];
  for (int c = 0; c < {splits}; ++c)
    for (int v = 0; v < {vectors}; ++v) acc[c][v] = (og_pwv){{0}};
  long k = 0;
  for (; k + {splits} <= K; k += {splits})
    for (int c = 0; c < {splits}; ++c) {{{_pixel_k(lanes, "(k + c)", "c", "      ", True)}
    }}{rest}{activated}
  float t[{PANEL}];
  for (int v = 0; v < {vectors}; ++v) __builtin_memcpy(t + v * {lanes}, &acc[0][v], {size});
  for (long j = 0; j < valid; ++j) y[j * ldy] = {stored};
}}"""


def _masked_stores(j: int, address: str, row: str, head: str = "") -> str:
    """AVX-512: channel ``j``'s ``R`` pixels (lanes of ``row``) by one masked store (after
    ``head``, C that declares ``row``, where there is one)."""
    store = f"__builtin_ia32_storeups512_mask({address}, {row}, mask);"
    if head:
        return f"      if ({j} < top) {{\n{head}\n        {store}\n      }}"
    return f"      if ({j} < top)\n        {store}"


def _split_stores(j: int, address: str, row: str, head: str = "") -> str:
    """AVX2: channel ``j``'s ``R`` (4 to 7) pixels by a 16-byte store of the low half of
    ``row`` and one of ``R - 4`` floats of the high half (``vmaskmovps`` avoided; after
    ``head``, C that declares ``row``, where there is one)."""
    first = f"{head}\n" if head else ""
    return f"""      if ({j} < top) {{
{first}        float* const yj = {address};
        __builtin_memcpy(yj, &{row}, 16);
        const og_pw4 hi = __builtin_ia32_vextractf128_ps256({row}, 1);
        __builtin_memcpy(yj + 4, &hi, (R - 4) * 4);
      }}"""


#: Per lanes: the smallest tile whose write-back is transposed in registers (smaller tiles,
#: a range's last pixels, store scalars), the C before the tile's passes and the stores of
#: one channel's pixels (see :func:`_transposed_store`).
TRANSPOSED_STORES: dict[int, tuple[int, str, Callable[[int, str, str, str], str]]] = {
    16: (8, "    const unsigned short mask = (unsigned short)((1u << R) - 1u);\n", _masked_stores),
    8: (4, "    typedef float og_pw4 __attribute__((vector_size(16)));\n", _split_stores),
}


def _masked_load(name: str, address: str) -> str:
    """AVX-512: ``name``, the ``R`` floats at ``address`` (lanes past ``R`` zero) by one
    masked load."""
    return f"        const og_pwv {name} = __builtin_ia32_loadups512_mask({address}, zero, mask);"


def _split_load(name: str, address: str) -> str:
    """AVX2: ``name``, the ``R`` (4 to 7) floats at ``address`` (lanes past ``R`` zero): a
    16-byte load and the high half built of ``R - 4`` floats (a copy of ``R - 4`` floats into
    a zeroed vector went through the stack: a 16-byte load after an 8-byte store, which
    cannot be forwarded; ResNet-50's 256 -> 1024 residual steps ran 13 % slower than their
    pass)."""
    high = ", ".join(f"R > {4 + i} ? {name}a[{4 + i}] : 0.0f" for i in range(3))
    return f"""        const float* const {name}a = {address};
        og_pw4 {name}l;
        __builtin_memcpy(&{name}l, {name}a, 16);
        const og_pw4 {name}h = {{{high}, 0.0f}};
        const og_pwv {name} = __builtin_shufflevector({name}l, {name}h, 0, 1, 2, 3, 4, 5, 6, 7);"""


#: Per lanes: the load of one channel's ``R`` residual values at the place a transposed tile
#: stores them (``og_pw_chr``; :data:`TRANSPOSED_STORES`).
TRANSPOSED_LOADS: dict[int, Callable[[str, str], str]] = {16: _masked_load, 8: _split_load}


def _row_epilogue(form: _Form, lanes: int, j: int, row: str, channel: str) -> str:
    """C declaring ``e{j}``: transposed row ``row`` (one channel's pixels) plus the channel's
    bias, plus the residual's row at the same place (``og_pw_chr``), then ReLU or not, or
    hard-swish (``og_pw_chh``: the form's ``activation``); or '' (``og_pw_ch``)."""
    if not form.biased:
        return ""
    if not form.residual:
        return f"        const og_pwv e{j} = {form.activation.format(acc=row, row=channel)};"
    load = TRANSPOSED_LOADS[lanes](f"r{j}", f"res + ({channel}) * ldy")
    value = f"og_pw_relu(og_pw_bias({row}, bias, {channel}, 0) + r{j}, relu)"
    return f"{load}\n        const og_pwv e{j} = {value};"


def _transposed_store(lanes: int, pp: int, tile: int, form: _Form) -> str:
    """The write-back of a ``channels`` tile of at least :data:`TRANSPOSED_STORES`' pixels:
    each of its ``pp`` vectors of ``lanes`` channels transposed in registers (rows past ``R``
    zero), then each channel's ``R`` pixels stored from one vector (the variants: after
    :func:`_row_epilogue`); instead of the tile's spill to ``t`` and ``R`` scalar stores per
    channel."""
    least, setup, store = TRANSPOSED_STORES[lanes]
    if tile < least:
        return ""
    row = loaded("m")
    rows = "\n".join(
        f"      const og_pwv {row}{r} = R > {r} ? acc[{r}][v] : zero;"
        if r < tile
        else f"      const og_pwv {row}{r} = zero;"
        for r in range(lanes)
    )
    stages = "\n".join(transpose(lanes, "m", "og_pwv", "og_pwi", "      "))
    out = transposed(lanes, "m")
    channels = [f"h * {pp * lanes} + v * {lanes} + {j}" for j in range(lanes)]
    heads = [_row_epilogue(form, lanes, j, f"{out}{j}", channels[j]) for j in range(lanes)]
    stores = "\n".join(
        store(j, f"y + ({channels[j]}) * ldy", f"e{j}" if heads[j] else f"{out}{j}", heads[j])
        for j in range(lanes)
    )
    return f"""
  if (R >= {least}) {{
    const og_pwv zero = {{0}};
{setup}    for (int v = 0; v < {pp}; ++v) {{
      const long top = last - v * {lanes};
{rows}
{stages}
{stores}
    }}
    return;
  }}"""


#: The C helpers this module writes, by name: each ``make(lanes, pixel vectors, channel-tile
#: pixels)`` for every instruction set (:func:`_branches`).
KERNELS: dict[str, Callable[[int, int, int], str]] = {
    "pw_tile": _tile,
    "pw_px": _variant(_PLAIN),
    "pw_bias": _bias,
    "pw_pxb": _variant(_BIASED),
    "pw_pxr": _variant(_RESIDUAL),
    "pw_hswish": _hard_swish,
    "pw_pxh": _variant(_HARD_SWISH),
    "pw_ch": _channel_variant(_PLAIN),
    "pw_chb": _channel_variant(_BIASED),
    "pw_chr": _channel_variant(_RESIDUAL),
    "pw_chh": _channel_variant(_HARD_SWISH),
    "pw_pl": _variant(_PLAIN, _PLANES),
    "pw_plb": _variant(_BIASED, _PLANES),
    "pw_plr": _variant(_RESIDUAL, _PLANES),
    "pw_plh": _variant(_HARD_SWISH, _PLANES),
}
for _name, _make in KERNELS.items():
    dialect.helper(_name)(functools.partial(_branches, _make))
