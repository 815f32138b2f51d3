"""The channel-blocked depthwise kernel: one-pass f32 depthwise steps on narrow planes
(output rows narrower than a vector: the 7x7 and 14x14 planes of MobileNetV3,
EfficientNet-B0 and ConvNeXt), chosen by the plan (``DirectPlan.blocked``,
``lowering/convolution.py`` :func:`blocked_frame`).

With row-wise vectors a 7-wide row fills under half of a 16-lane vector. Here a unit is
:data:`CHANNEL_BLOCK` consecutive channels of one image, whole planes, laid out as channel
vectors (NCHW16c, as onnxruntime and OpenVINO do): the unit transposes its 16 input planes
into a zero-padded frame of vectors in this thread's scratch (``og_cb_in``: 16x16 blocks
transposed in registers, two-source permutes with AVX-512; each position's frame offset
stepped on from the last, not divided out: :func:`_offsets`), its filters the same way, then
every tap of every output is one full-vector multiply-add: an output row's columns (and a
few rows together, up to :data:`ACCUMULATORS` vectors) accumulate in registers, each tap's
filter vector loaded once for all of them and every input vector read at a constant offset
from one row pointer. The outputs, kept as channel vectors, are transposed back into the
NCHW planes (``og_cb_out``), and the fused epilogue runs on them as before. A last block of
fewer than 16 channels reads its last channel again in the missing lanes and stores only
its own channels.

AVX-512 and AVX2 builds run it (:data:`BUILDS`; ``DirectConvEmitter.emit`` puts the row-wise
form in the ``#else`` branch). With AVX2 each 16-channel block is two 8-lane vectors: the
tap loops run once per half (``h_``, :func:`lanes`) and the transposes are 8 x 8 in
registers (two per 8 positions, ``og_cb_in`` stepping each position's frame offset instead
of dividing by the width). Under ``isa="avx2"``, one thread, Zen 5: MobileNetV3's 7x7-plane
5x5 steps 96 / 86 / 86 -> 45 / 43 / 43 µs (OpenVINO's AVX2 kernel 43 / 57 / 56),
EfficientNet-B0's 14x14 5x5 steps 120 / 167 -> 55 / 78 µs (the 16-lane form on AVX2, before
these, measured 0.4-1.1x of the row-wise loops: scalar transposes, spilled accumulators).
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.register_transpose import loaded, transpose, transposed
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.fused.lowering.convolution import CHANNEL_BLOCK, DirectPlan
from opgraph.backends.fused.program import ConvStep
from opgraph.backends.fused.views import static_all

#: The C condition of the builds that run the kernel (the others: the row-wise loops).
BUILDS = "defined(__AVX512F__) || defined(__AVX2__)"
#: Output vectors one group of rows accumulates in registers at most (each with a
#: multiply-add per tap; with AVX-512 they and the filter vector fit the 32 registers).
ACCUMULATORS = 14
#: The same for AVX2's 16 registers: 7x7 planes one row at a time (two rows, 14
#: accumulators, measured 1.15-1.3x slower: 5x5 960ch 7x7 33 -> 27 µs, 7x7 768ch 34.5 -> 30.5).
ACCUMULATORS_AVX2 = 12
#: Outputs a direct step's fused epilogue runs on at once, at least, here and in
#: ``codegen/depthwise.py`` (small planes: one call per plane paid its setup, and its first
#: loads waited on the stores just made).
EPILOGUE_BATCH = 2048


class BlockedDepthwiseEmitter:
    """``static int <name>(T, A, lo, hi)`` over (image, block of 16 channels) units, and
    ``<name>_run``."""

    def __init__(
        self,
        step: ConvStep,
        name: str,
        module: ModuleContext,
        plan: DirectPlan,
        checks: list[Check],
    ) -> None:
        assert step.x is not None and step.w is not None and plan.frame is not None
        assert step.out is not None and step.scratch is not None
        self.step, self.name, self.module, self.plan = step, name, module, plan
        self.checks = checks
        self.x, self.w, self.out, self.scratch = step.x, step.w, step.out, step.scratch
        self.frame = plan.frame
        module.helper("dw_blocked")

    def parallel(self) -> bool:
        n, o, oh, ow = static_all(self.out.shape)
        kh, kw = self.step.kernel
        return n * o * oh * ow * kh * kw >= PARALLEL_MACS and self.module.num_threads > 1

    def emit(self) -> str:
        s, p = self.step, self.plan
        n, o, oh, ow = static_all(self.out.shape)
        kh, kw = s.kernel
        rows, cols = self.frame
        blocks = -(-o // CHANNEL_BLOCK)
        total = n * blocks
        parts = min(total, 4 * self.module.num_threads) if self.parallel() else 1
        worker = "(long)og_worker_index()" if parts > 1 else "0L"
        h, w = static_all(self.x.shape[2:])
        pt, pl = s.padding
        xs = self.x.strides
        v = CHANNEL_BLOCK
        body = [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.scratch, "scratch", False),
            f"  float* buf = scratch + {worker} * {p.per_thread}L;",
            f"  float* wt = buf + {rows * cols * v}L;",
            f"  float* ob = wt + {kh * kw * v}L;",
            "  #pragma omp simd",
            f"  for (long f = 0; f < {rows * cols * v}L; ++f) buf[f] = 0;",
            f"  long first = lo * {total}L / {parts}L, last = hi * {total}L / {parts}L;",
            "  long pending = -1;",
            "  for (long u = first; u < last; ++u) {",
            f"    long img = u / {blocks}L, c0 = (u % {blocks}L) * {v}L;",
            f"    long cnt = {o}L - c0 < {v}L ? {o}L - c0 : {v}L;",
            f"    const float* x = x0 + img * {xs[0]}L + c0 * {xs[1]}L;",
            f"    og_cb_in(buf + {(pt * cols + pl) * v}L, x, {xs[1]}L, {h * w}L, {w}L, {cols}L,"
            " cnt);",
            f"    og_cb_in(wt, w0 + c0 * {kh * kw}L, {kh * kw}L, {kh * kw}L, {kh * kw}L,"
            f" {kh * kw}L, cnt);",
            *["    " + line for line in self.rows_loops()],
            f"    float* y = y0 + (img * {o}L + c0) * {oh * ow}L;",
            f"    og_cb_out(y, ob, {oh * ow}L, {oh * ow}L, cnt);",
            *self.epilogue(),
            "  }",
            "  return err;",
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            f"  return {dispatch(self.module, self.name, parts)};",
            "}",
        ]
        return "\n".join(self.head() + body)

    def head(self) -> list[str]:
        """The step's comment and its fused epilogue's function."""
        s = self.step
        head = [f"/* {self.name}: channel-blocked depthwise: {s.label.replace('*/', '* /')} */"]
        if s.epilogue is not None:
            label = "epilogue of " + self.name
            ep = CLoopEmitter(s.epilogue, f"{self.name}_ep", self.module, label, self.checks)
            head.append(ep.emit())
        return head

    def rows_loops(self) -> list[str]:
        """:meth:`rows_loop` with AVX-512's :data:`ACCUMULATORS`, and AVX2's
        :data:`ACCUMULATORS_AVX2` where they group the rows differently."""
        oh, ow = static_all(self.out.shape[2:])
        wide, narrow = (max(1, min(oh, a // ow)) for a in (ACCUMULATORS, ACCUMULATORS_AVX2))
        if wide == narrow:
            return self.rows_loop(wide)
        avx512, avx2 = self.rows_loop(wide), self.rows_loop(narrow)
        return ["#if defined(__AVX512F__)", *avx512, "#else", *avx2, "#endif"]

    def rows_loop(self, together: int) -> list[str]:
        """The output rows in groups of ``together`` (as many whole rows as the build's
        accumulators hold), then a last group of the rows left."""
        oh, ow = static_all(self.out.shape[2:])
        full = oh // together
        lines = [
            f"for (long i = 0; i < {full * together}L; i += {together}L) {{",
            *["  " + line for line in self.row_group(together, ow)],
            "}",
        ]
        if oh % together:
            lines += [
                "{",
                f"  const long i = {full * together}L;",
                *["  " + line for line in self.row_group(oh % together, ow)],
                "}",
            ]
        return lines

    def row_group(self, count: int, ow: int) -> list[str]:
        """Output rows ``i .. i + count`` (every column) into ``ob``: per filter row ``a``
        one filter vector per tap, multiplied into every output vector of the group. Taps
        that read padding are skipped: columns when generated (they do not depend on the
        row), filter rows that read padding for every row of the group at run time."""
        s, v = self.step, CHANNEL_BLOCK
        (kh, kw), (sh, sw), (dh, dw), (pt, pl) = s.kernel, s.strides, s.dilations, s.padding
        h, w = static_all(self.x.shape[2:])
        cols = self.frame[1]
        outs = [(r, j) for r in range(count) for j in range(ow)]
        names = [f"a{r}_{j}" for r, j in outs]
        lines = [
            f"const float* s_ = buf + i * {sh * cols * v}L + h_;",
            f"og_cbw {', '.join(n + ' = {0}' for n in names)};",
            f"long lo_ = {pt}L - (i + {count - 1}L) * {sh}L, hi_ = {h - 1 + pt}L - i * {sh}L;",
            f"lo_ = lo_ > 0 ? (lo_ + {dh - 1}L) / {dh}L : 0;",
            f"hi_ = hi_ < 0 ? 0 : hi_ / {dh}L + 1 < {kh}L ? hi_ / {dh}L + 1 : {kh}L;",
            "for (long a = lo_; a < hi_; ++a) {",
            f"  const float* sa = s_ + a * {dh * cols * v}L;",
            f"  const float* wa = wt + a * {kw * v}L + h_;",
        ]
        for b in range(kw):
            terms = [
                (name, (r * sh * cols + j * sw + b * dw) * v)
                for (r, j), name in zip(outs, names, strict=True)
                if 0 <= j * sw + b * dw - pl < w
            ]
            if not terms:
                continue
            lines.append(f"  {{ const og_cbw f_ = og_cbw_load(wa + {b * v}L);")
            lines += [f"    {name} += f_ * og_cbw_load(sa + {at}L);" for name, at in terms]
            lines.append("  }")
        lines.append("}")
        for (r, j), name in zip(outs, names, strict=True):
            lines.append(f"og_cbw_store(ob + (i * {ow}L + {r * ow + j}L) * {v}L + h_, {name});")
        return lanes(lines)

    def epilogue(self) -> list[str]:
        """The unit's outputs join the pending range (units in order cover consecutive
        planes), which the epilogue runs on once it holds :data:`EPILOGUE_BATCH` elements,
        and at the end of the part."""
        if self.step.epilogue is None:
            return []
        _, o, oh, ow = static_all(self.out.shape)
        return flush_epilogue(self.name, f"(img * {o}L + c0) * {oh * ow}L", f"cnt * {oh * ow}L")


#: The names of a 16 x 16 block's rows as loaded (``ROW + str(c)``) and as transposed.
ROW, COLUMN = loaded("v"), transposed(16, "v")
#: The same for an 8 x 8 block (AVX2).
ROW8, COLUMN8 = loaded("u"), transposed(8, "u")


def lanes(lines: list[str]) -> list[str]:
    """``lines`` (indexing the channel vectors at ``+ h_``) once per vector of the build's
    lanes in a block of 16 channels: once with AVX-512 (``h_`` is 0), twice with AVX2."""
    return [
        f"for (long h_ = 0; h_ < {CHANNEL_BLOCK}L; h_ += OG_CB_LANES) {{",
        *["  " + line for line in lines],
        "}",
    ]


def _block(loads: str, stores: str, indent: str) -> str:
    """One 16 x 16 block: 16 vectors declared, loaded, transposed in registers
    (:func:`register_transpose.transpose`) and stored."""
    rows = ", ".join(f"{ROW}{c}" for c in range(16))
    transpose_lines = "\n".join(transpose(16, "v", "og_cbv", "og_cbi", indent))
    return f"""{indent}og_cbv {rows};
{loads}
{transpose_lines}
{stores}"""


def _offsets(count: int) -> str:
    """``og_cb_in``'s frame offsets ``o0 .. o<count - 1>`` of the positions from ``p``, each
    stepped on from the last (a division by ``w`` per block, not per position)."""
    steps = [
        f"      const long o{k} = at_; ++at_; if (++c_ == w) {{ c_ = 0; at_ += pw - w; }}"
        for k in range(count)
    ]
    return "\n".join(["      long c_ = p % w, at_ = (p / w) * pw + c_;", *steps])


def _positions(lanes: int, block: str) -> str:
    """The loop of ``og_cb_in`` / ``og_cb_out`` over blocks of ``lanes`` positions (the last
    moved back to end at ``n``), ``block`` the C of one block at ``p``."""
    return f"""  if (n >= {lanes}) {{
    for (long p0 = 0; p0 < n; p0 += {lanes}) {{
      long p = p0 + {lanes} <= n ? p0 : n - {lanes};
{block}
    }}
    return;
  }}"""


def _blocks(loads: str, stores: str, offsets: str = "") -> str:
    """The AVX-512 loop of ``og_cb_in`` / ``og_cb_out``: blocks of 16 positions, each 16
    vectors loaded, transposed and stored (``offsets``: C before the block, :func:`_offsets`
    for ``og_cb_in``)."""
    return _positions(16, f"{offsets}\n{_block(loads, stores, '      ')}")


def _short(loads: str, stores: str) -> str:
    """The AVX-512 block of ``og_cb_in`` / ``og_cb_out`` for fewer than 16 positions (a
    14-pixel row of the bf16 Winograd's 14x14 stage): the rows read and written under the
    mask ``mask_`` of the ``n`` positions, the rest of the block zero."""
    return f"""  if (n > 0 && n < 16) {{
    const unsigned short mask_ = (unsigned short)((1u << n) - 1u);
    const og_cbv zero_ = {{0}};
{_block(loads, stores, "    ")}
    return;
  }}"""


def _block8(at: str, half: str) -> str:
    """One 8 x 8 block of ``og_cb_in`` (``at`` is ``"in"``) or ``og_cb_out`` with AVX2: the
    channels ``half .. half + 8`` of the 8 positions from ``p``."""
    rows = ", ".join(f"{ROW8}{c}" for c in range(8))
    if at == "in":
        loads = [
            f"__builtin_memcpy(&{ROW8}{c}, s + ({half} + {c} < cnt ? {half} + {c} : cnt - 1) * cs"
            " + p, 32);"
            for c in range(8)
        ]
        stores = [f"__builtin_memcpy(d + o{k} * 16 + {half}, &{COLUMN8}{k}, 32);" for k in range(8)]
    else:
        loads = [
            f"__builtin_memcpy(&{ROW8}{k}, ob + (p + {k}) * 16 + {half}, 32);" for k in range(8)
        ]
        stores = [
            f"if ({half} + {c} < cnt) "
            f"__builtin_memcpy(y + ({half} + {c}) * ys + p, &{COLUMN8}{c}, 32);"
            for c in range(8)
        ]
    inner = "        "
    return "\n".join(
        [
            "      {",
            f"{inner}og_cb8 {rows};",
            *[inner + line for line in loads],
            *transpose(8, "u", "og_cb8", "og_cb8i", inner),
            *[inner + line for line in stores],
            "      }",
        ]
    )


def _blocks8(at: str) -> str:
    """The AVX2 loop of ``og_cb_in`` / ``og_cb_out``: blocks of 8 positions, each as two 8 x 8
    blocks (channels 0-7 and 8-15). ``og_cb_in`` steps each position's frame offset on
    (``o<k>``) instead of dividing by ``w``."""
    offsets = _offsets(8) if at == "in" else ""
    return _positions(8, f"{offsets}\n{_block8(at, '0')}\n{_block8(at, '8')}")


@dialect.helper("dw_blocked")
def _dw_blocked() -> str:
    loads_in = "\n".join(
        f"      __builtin_memcpy(&{ROW}{c}, s + ({c} < cnt ? {c} : cnt - 1) * cs + p, 64);"
        for c in range(16)
    )
    stores_in = "\n".join(f"      og_cbw_store(d + o{k} * 16, {COLUMN}{k});" for k in range(16))
    loads_out = "\n".join(
        f"      __builtin_memcpy(&{ROW}{k}, ob + (p + {k}) * 16, 64);" for k in range(16)
    )
    stores_out = "\n".join(
        f"      if ({c} < cnt) __builtin_memcpy(y + {c} * ys + p, &{COLUMN}{c}, 64);"
        for c in range(16)
    )
    short_in = _short(
        "\n".join(
            f"    {ROW}{c} = __builtin_ia32_loadups512_mask(s + ({c} < cnt ? {c} : cnt - 1) * cs, "
            "zero_, mask_);"
            for c in range(16)
        ),
        "\n".join(
            f"    if ({k} < n) og_cbw_store(d + (({k} / w) * pw + {k} % w) * 16, {COLUMN}{k});"
            for k in range(16)
        ),
    )
    short_out = _short(
        "\n".join(
            f"    {ROW}{k} = {k} < n ? og_cbw_load(ob + {k} * 16) : zero_;" for k in range(16)
        ),
        "\n".join(
            f"    if ({c} < cnt) __builtin_ia32_storeups512_mask(y + {c} * ys, {COLUMN}{c}, mask_);"
            for c in range(16)
        ),
    )
    return f"""typedef float og_cbv __attribute__((vector_size(64)));
typedef int og_cbi __attribute__((vector_size(64)));
typedef float og_cb8 __attribute__((vector_size(32)));
typedef int og_cb8i __attribute__((vector_size(32)));
/* The kernel's vectors: the build's lanes of a block of 16 channels. */
#if defined(__AVX512F__)
#define OG_CB_LANES 16L
typedef og_cbv og_cbw;
#else
#define OG_CB_LANES 8L
typedef og_cb8 og_cbw;
#endif
static inline __attribute__((always_inline)) og_cbw og_cbw_load(const float* p) {{
  og_cbw v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}}
static inline __attribute__((always_inline)) void og_cbw_store(float* p, og_cbw v) {{
  __builtin_memcpy(p, &v, sizeof v);
}}
/* Channel vectors from planes: d[((q / w) * pw + q % w) * 16 + c] = s[c * cs + q] for the
   n positions q of 16 channels (channels from cnt on read channel cnt - 1 again). */
static inline __attribute__((always_inline)) void og_cb_in(
    float* d, const float* s, long cs, long n, long w, long pw, long cnt) {{
#if defined(__AVX512F__)
{_blocks(loads_in, stores_in, _offsets(16))}
{short_in}
#elif defined(__AVX2__)
{_blocks8("in")}
#endif
  for (long c = 0; c < 16; ++c) {{
    const float* r = s + (c < cnt ? c : cnt - 1) * cs;
    for (long q = 0; q < n; ++q) d[((q / w) * pw + q % w) * 16 + c] = r[q];
  }}
}}
/* Planes from channel vectors: y[c * ys + q] = ob[q * 16 + c] for the n positions q of
   channels c < cnt. */
static inline __attribute__((always_inline)) void og_cb_out(
    float* y, const float* ob, long ys, long n, long cnt) {{
#if defined(__AVX512F__)
{_blocks(loads_out, stores_out)}
{short_out}
#elif defined(__AVX2__)
{_blocks8("out")}
#endif
  for (long c = 0; c < cnt; ++c)
    for (long q = 0; q < n; ++q) y[c * ys + q] = ob[q * 16 + c];
}}"""


def dispatch(module: ModuleContext, name: str, parts: int) -> str:
    """The call of range function ``name`` over ``parts`` units (shared out when several)."""
    if parts > 1:
        module.uses_pool = True
        return f"og_parallel({name}, T, A, {parts}L, 1L, {module.num_threads})"
    return f"{name}(T, A, 0, 1L)"


def flush_epilogue(name: str, start: str, advance: str) -> list[str]:
    """A unit's outputs, from element ``start`` on for ``advance`` elements, join the pending
    range (units in order cover consecutive outputs), which epilogue ``name``_ep runs on once
    it holds :data:`EPILOGUE_BATCH` elements, and at the end of the part."""
    return [
        f"    long at_ = {start};",
        "    if (pending < 0) pending = at_;",
        f"    at_ += {advance};",
        f"    if (at_ - pending >= {EPILOGUE_BATCH}L || u + 1 == last) {{",
        f"      err |= {name}_ep(T, A, pending, at_);",
        "      pending = -1;",
        "    }",
    ]
