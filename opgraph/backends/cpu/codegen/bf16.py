"""bf16 mode (``CpuBackend.compile(fn, precision="bf16")``): products by constant weights in
bf16 with f32 accumulation, on CPUs with AVX512-BF16 (``vdpbf16ps``).

The IR stays f32. After the shared pipeline has built and planned the Program,
:func:`to_bf16` replaces the steps whose weights are constants by bf16 variants:

* ``GemmStep`` with 32-column panels (activations times a constant matrix: Linear layers):
  the panels are repacked at compile time as bf16 *pairs* (``(K/2, 32, 2)`` per panel: the
  two inner-dimension neighbours of a column side by side, the layout ``vdpbf16ps`` reads);
  the activations are rounded to bf16 per tile of 12 rows as they are used;
* ``ConvStep`` (im2col and GEMM, not the direct depthwise kernel) and ``WinogradStep``: the
  filter matrix (or the transformed filters) is stored as bf16, and the f32 patches (or
  transformed tiles) are rounded to bf16 pairs per 32-column panel inside ``og_sgemm_bf16``,
  which replaces OpenBLAS's ``sgemm`` for these calls.

Both kernels share one micro-kernel: 12 rows x 32 columns of f32 accumulators (24 zmm),
each step one broadcast bf16 pair of the left operand times two vectors of 16 pairs of the
right (``vdpbf16ps`` with an embedded broadcast). Products of two bf16 values are exact in
f32, so the error is the rounding of both operands to bf16 (8 significant bits, relative
2^-9) plus f32 accumulation; ``vdpbf16ps`` treats subnormal inputs as zero.

The fused attention step's two products run in bf16 too (``codegen/attention_bf16.py``
registers its conversion here). Everything else (elementwise kernels, reductions, other
products of two activations, one-row GEMVs, depthwise convolutions) stays f32. The
instruction is written as inline assembly, so the module needs no header and compiles with
any GCC or Clang whose assembler knows it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.bf16_units import even_rows
from opgraph.backends.cpu.codegen.blas import Call, GemmEmitter, _pointer
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.windows import ConvEmitter
from opgraph.backends.cpu.codegen.winograd import WinogradEmitter
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.backends.fused.program import (
    Buffer,
    BufferKind,
    ConvStep,
    GemmStep,
    LoopKernel,
    Program,
    Step,
    WinogradStep,
)
from opgraph.backends.fused.views import View, static_all
from opgraph.core import element_type as et

#: Rows of a micro-kernel tile (2 x ROWS zmm accumulators) and ``og_sgemm_bf16``'s
#: inner-dimension block (a tile's 12 x 384 bf16 rows, 9 KiB, and a panel's 384 x 32, 24 KiB,
#: stay in L1).
ROWS = 12
DEPTH = 384
#: The panel GEMM's inner blocks: equal, even, at most this deep. Deeper blocks than
#: ``DEPTH`` leave the panel slice in L2, which feeds the kernel as fast (128 bytes per 24
#: instructions), and store and reload the f32 accumulators fewer times (BERT's FFN 2, K =
#: 3072: 4 passes over its output block instead of 8; K = 768: 1 instead of 2): the BERT
#: layer took 0.95 of the thread CPU time of 384-deep blocks on one thread (load 5).
PANEL_DEPTH = 768
#: The inner blocks of a product whose activations were rounded to bf16 once (``rows16``,
#: ``og_gemm_bf16_rows``), which copies no chunk to the stack: at most this deep (a panel
#: slice of 192 KiB, in L2). On Zen 5, where ``vdpbf16ps`` runs two 512-bit instructions a
#: cycle, BERT's FFN 2 (128 x 3072 x 768) ran at 0.83-0.84 of that peak in one block against
#: 0.78-0.79 in four of 768 (``bench/bf16_peak.py``, thread CPU, load 6-7).
ROWS_DEPTH = 3072
#: Rows of activations rounded to bf16 at a time (198 KiB of stack, in L2), each 32-column
#: panel slice then serving all their tiles. 11 tiles, so that a transformer's 128 tokens
#: are one chunk and the weights are streamed once: with 8 tiles (96 rows) the BERT layer
#: read them twice and took 1.7-3 % more thread CPU time on one thread (bench/per_core.py's
#: measure, both builds in one process, load 3-4).
CHUNK = 11 * ROWS
#: Panels of the f32 right operand rounded to bf16 at a time by ``og_sgemm_bf16`` (96 KiB).
WIDE = 4
#: How many pair rows (128 bytes each) ahead the micro-kernels prefetch the panel they stream
#: (``dialect.panel_prefetch``: both lines of a row, into L1, 8 KiB ahead). The first tile over
#: a panel slice reads it from L3 or memory; the f32 kernels' 24 rows (the same 128 bytes per
#: 24 vector instructions) gained less here. The BERT layer on one thread (its steps in a C
#: harness, thread CPU, medians of 300 calls, load 5.5-5.7): 4.57-4.62 ms without, 4.21 with
#: 24 rows, 4.04-4.22 with 48, 4.11-4.17 with 64, 4.15 with 96, 4.23 with 160.
PREFETCH_ROWS = 64


@dataclasses.dataclass(eq=False)
class Bf16GemmStep(GemmStep):
    """A :class:`GemmStep` whose ``b`` is a constant as bf16 pair panels: per 32-column
    panel, ``ceil(K/2)`` rows of 32 (even, odd) pairs, zero-padded. ``rows16``: an arena
    buffer for ``a`` rounded to bf16 once (rows of ``K`` rounded up to even), used when the
    product is split into column blocks (:func:`with_rounded_rows`)."""

    rows16: View | None = None


@dataclasses.dataclass(eq=False)
class Bf16ConvStep(ConvStep):
    """A :class:`ConvStep` whose filter matrix ``w`` is a bf16 constant."""


@dataclasses.dataclass(eq=False)
class Bf16WinogradStep(WinogradStep):
    """A :class:`WinogradStep` whose transformed filters ``u`` are a bf16 constant."""


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """f32 values rounded to the nearest bf16 (ties to even), as uint16 bit patterns."""
    rounded = np.asarray(values, np.float32).astype(ml_dtypes.bfloat16)
    return rounded.view(np.uint16)


def _constant(buffers: list[Buffer], view: View) -> np.ndarray | None:
    """The finite f32 values ``view`` (dense, rows contiguous) reads from a constant buffer,
    or None (not a constant, other strides, or an infinity or NaN: the kernels pad odd
    inner dimensions with products by zero, which must stay zero)."""
    buffer = buffers[view.buffer]
    if buffer.kind is not BufferKind.CONST or buffer.data is None:
        return None
    if view.element_type is not et.f32:
        return None
    dense = 1
    for size, stride in zip(reversed(static_all(view.shape)), reversed(view.strides), strict=True):
        if size > 1 and stride != dense:
            return None
        dense *= size
    flat = np.asarray(buffer.data, np.float32).reshape(-1)
    values = flat[view.offset : view.offset + dense].reshape(view.shape)
    return values if bool(np.isfinite(values).all()) else None


def _add_constant(buffers: list[Buffer], data: np.ndarray, label: str) -> int:
    """Append a bf16 constant buffer holding ``data`` (uint16 bits); its id."""
    index = sum(1 for b in buffers if b.kind is BufferKind.CONST)
    buffer = Buffer(len(buffers), BufferKind.CONST, et.bf16, data.size, index, label, data)
    buffers.append(buffer)
    return buffer.id


def _pair_panels(matrix: np.ndarray, width: int) -> np.ndarray:
    """A (K, N) matrix as bf16 pair panels: (N/width, ceil(K/2), width, 2), zero-padded."""
    inner, cols = matrix.shape
    pairs, count = -(-inner // 2), -(-cols // width)
    padded = np.zeros((2 * pairs, count * width), np.float32)
    padded[:inner, :cols] = matrix
    panels = padded.reshape(pairs, 2, count, width).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(_bf16_bits(panels)).reshape(-1)


def _left_matrix(values: np.ndarray) -> np.ndarray:
    """A left operand in bf16, row-major, with one zero after it: the kernel reads each row
    in pairs, and an odd row's last pair takes its second element from the next row (or this
    padding), multiplied by the right operand's zero padding."""
    return np.concatenate([_bf16_bits(values.reshape(-1)), np.zeros(1, np.uint16)])


def _fields(step: Step) -> dict[str, Any]:
    return {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}


def _gemm(step: GemmStep, buffers: list[Buffer]) -> Step:
    if (
        step.panel != 32
        or step.b is None
        or step.out is None
        or step.out.element_type is not et.f32
    ):
        return step
    packed = buffers[step.b.buffer]
    if packed.data is None or len(step.batch) != 1:
        return step
    inner, cols = step.b.shape
    width = step.panel
    count = -(-cols // width)
    matrix = np.asarray(packed.data, np.float32).reshape(count, inner, width)
    matrix = matrix.transpose(1, 0, 2).reshape(inner, count * width)[:, :cols]
    if not np.isfinite(matrix).all():
        return step
    data = _pair_panels(matrix, width)
    label = f"{packed.label} (bf16 pairs)"
    b = View(_add_constant(buffers, data, label), et.bf16, (inner, cols), (0, 0), 0)
    return Bf16GemmStep(**{**_fields(step), "b": b, "epilogue": _bf16_epilogue(step.epilogue)})


#: Ops a bf16 product's fused epilogue computes in a cheaper form, keyed by op class (the
#: epilogue feeds a result rounded to bf16): each f32 node of a key's class gets the op the
#: value makes (erf_bf16.py registers ``FastErf`` for ``Erf``). f32 compiles never see them.
EPILOGUE_OPS: dict[type, Callable[[], Any]] = {}


def _bf16_epilogue(kernel: LoopKernel | None) -> LoopKernel | None:
    def cheaper(n: Any) -> bool:
        return type(n.op) in EPILOGUE_OPS and n.element_type is et.f32

    if kernel is None or not any(cheaper(n) for n in kernel.nodes):
        return kernel
    nodes = [
        dataclasses.replace(n, op=EPILOGUE_OPS[type(n.op)]()) if cheaper(n) else n
        for n in kernel.nodes
    ]
    return dataclasses.replace(kernel, nodes=nodes, stores=list(kernel.stores))


def _conv(step: ConvStep, buffers: list[Buffer]) -> Step:
    if step.direct or step.w is None or step.out is None or step.out.element_type is not et.f32:
        return step
    values = _constant(buffers, step.w)
    if values is None:
        return step
    label = f"{buffers[step.w.buffer].label} (bf16)"
    w = View(
        _add_constant(buffers, _left_matrix(values), label),
        et.bf16,
        step.w.shape,
        (step.w.shape[1], 1),
        0,
    )
    return Bf16ConvStep(**{**_fields(even_rows(step)), "w": w})


def _winograd(step: WinogradStep, buffers: list[Buffer]) -> Step:
    if step.u is None or step.flipped:  # a data gradient reads its filters flipped: f32
        return step
    values = _constant(buffers, step.u)
    if values is None:
        return step
    label = f"{buffers[step.u.buffer].label} (bf16)"
    _, o, c = step.u.shape
    u = View(
        _add_constant(buffers, _left_matrix(values), label), et.bf16, step.u.shape, (o * c, c, 1), 0
    )
    return Bf16WinogradStep(**{**_fields(step), "u": u})


#: How each kind of step becomes its bf16 variant (unchanged when it cannot).
CONVERSIONS: dict[type, Callable[[Any, list[Buffer]], Step]] = {
    GemmStep: _gemm,
    ConvStep: _conv,
    WinogradStep: _winograd,
}


def to_bf16(program: Program) -> Program:
    """``program`` with its products by constant weights in bf16 (see the module docstring).

    Needs a planned Program (the new constants are not arena buffers, so the memory plan
    stays valid); returns a new Program sharing the unchanged steps and buffers.
    """
    buffers = list(program.buffers)
    steps = []
    for step in program.steps:
        convert = CONVERSIONS.get(type(step))
        steps.append(convert(step, buffers) if convert is not None else step)
    return Program(buffers, steps, program.num_args, program.num_results)


def with_rounded_rows(
    program: Program, plan: MemoryPlan, threads: int
) -> tuple[Program, MemoryPlan]:
    """``program`` and ``plan`` with one arena buffer more, past the planned peak, shared by
    the bf16 products of more than one row as ``rows16``: their left operands rounded to
    bf16 once per call when split between ``threads`` > 1 (each column block then reads the
    bf16 rows instead of rounding all of ``a`` again) or, on one thread, when deeper than
    ``PANEL_DEPTH`` (read in blocks of ``ROWS_DEPTH``). The BERT layer's products split into
    4 column blocks as on two threads, run on one: 1.033 of the CPU time of one block each,
    1.004 with the rows rounded once (load 11). Steps run one at a time, so the products
    share the buffer; its lifetime is the whole program."""
    takes = [s for s in program.steps if isinstance(s, Bf16GemmStep) and _takes_rows16(s, threads)]
    if not takes:
        return program, plan
    elements = max(r * k for r, k in map(_rows16_shape, takes))
    buffers = list(program.buffers)
    buffer = Buffer(len(buffers), BufferKind.ARENA, et.bf16, elements, label="bf16 rows")
    buffers.append(buffer)
    offset = -(-plan.peak // 64) * 64
    steps: list[Step] = []
    for step in program.steps:
        if isinstance(step, Bf16GemmStep) and step in takes:
            rows, inner = _rows16_shape(step)
            view = View(buffer.id, et.bf16, (rows, inner), (inner, 1), 0)
            step = Bf16GemmStep(**{**_fields(step), "rows16": view})
        steps.append(step)
    last = len(steps) - 1
    plan = dataclasses.replace(
        plan,
        offsets={**plan.offsets, buffer.id: offset},
        sizes={**plan.sizes, buffer.id: 2 * elements},
        peak=offset + 2 * elements,
        labels={**plan.labels, buffer.id: buffer.label},
        intervals={**plan.intervals, buffer.id: (0, last)},
    )
    return Program(buffers, steps, program.num_args, program.num_results), plan


def _takes_rows16(step: Bf16GemmStep, threads: int) -> bool:
    """Whether ``step`` reads its left operand rounded to bf16 once (``rows16``): a product
    of more than one row, split between threads or deeper than ``PANEL_DEPTH``."""
    if step.a is None:
        return False
    rows, inner = _rows16_shape(step)
    return rows > 1 and (threads > 1 or inner > PANEL_DEPTH)


def _rows16_shape(step: GemmStep) -> tuple[int, int]:
    """(rows, inner rounded up to even) of a bf16 product's left operand."""
    assert step.a is not None
    rows, inner = static_all(step.a.shape)
    return rows, inner + inner % 2


# ------------------------------------------------------------------------------ emitters
class Bf16GemmEmitter(GemmEmitter):
    """A :class:`Bf16GemmStep`: ``og_gemm_bf16_panels`` instead of ``og_gemm_panels``; split
    into column blocks with ``rows16``, ``og_gemm_bf16_rows`` over ``a`` rounded once by a
    pass of its own (``<name>_rows``, shared between the threads by rows) before it."""

    row_blocks = False

    def rounded(self) -> bool:
        """Whether the blocks read ``a`` rounded once (``rows16``) rather than rounding it:
        split into column blocks, or deeper than ``og_gemm_bf16_panels``'s blocks."""
        return (
            isinstance(self.step, Bf16GemmStep)
            and self.step.rows16 is not None
            and (self.blocks > 1 or self.inner > PANEL_DEPTH)
        )

    def run_prologue(self, split: bool) -> tuple[list[str], list[str]]:
        if not self.rounded():
            return [], []
        step = self.step
        assert isinstance(step, Bf16GemmStep) and step.rows16 is not None
        rows, inner = self.rows, self.inner
        ld16 = _rows16_shape(step)[1]
        grain = max(1, 16384 // ld16)
        self.module.uses_pool = True
        base = self.module.base(step.rows16.buffer)
        definition = [
            f"static int {self.name}_rows(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.a, "a0", True),
            f"  const float* a = a0 + {self.name}_batch[0][0];",
            f"  uint16_t* s = (uint16_t*)({base}) + {step.rows16.offset}L;",
            "  for (long r = lo; r < hi; ++r) {",
            f"    og_bf16_row(a + r * {self.a.strides[0]}L, s + r * {ld16}L, {inner}L);",
            *([f"    s[r * {ld16}L + {inner}L] = 0;"] if inner % 2 else []),
            "  }",
            "  return 0;",
            "}",
        ]
        threads = self.module.num_threads
        start = [
            f"  int e_ = og_parallel({self.name}_rows, T, A, {rows}L, {grain}L, {threads});",
            "  if (e_) return e_;",
        ]
        return definition, start

    def blocks_per_thread(self) -> int:
        """Two column blocks per thread, not the f32 kernel's four: every block rounds all
        of ``a`` to bf16 again (a C harness, 128 x 3072 x 768 on one thread: 8 blocks 3.15-3.18
        ms, 4 blocks 3.01, 2 blocks 2.98-2.99); two per thread still leave a block that a
        descheduled thread has not started to the others."""
        return 2

    def panel_gemm(self) -> tuple[int, Call]:
        self.module.helper("gemm_bf16")
        lda = self.a.strides[0] if self.rows > 1 else self.inner
        self.split_columns = True

        def call(first: str, count: str) -> str:
            tail = f"c, {self.cols}L, {self.rows}L, {self.inner}L, {first}, {first} + {count});"
            if self.rounded():
                step = self.step
                assert isinstance(step, Bf16GemmStep) and step.rows16 is not None
                rows16 = f"(const uint16_t*)({self.module.base(step.rows16.buffer)})"
                ld16 = _rows16_shape(step)[1]
                return f"og_gemm_bf16_rows({rows16}, {ld16}L, (const uint16_t*)b, {tail}"
            return f"og_gemm_bf16_panels(a, {lda}L, (const uint16_t*)b, {tail}"

        return self.cols, call


class Bf16ConvEmitter(ConvEmitter):
    """A :class:`Bf16ConvStep`: ``og_sgemm_bf16`` (bf16 filters) instead of ``sgemm``."""

    def __init__(
        self, step: ConvStep, name: str, module: ModuleContext, checks: list[Check] | None = None
    ) -> None:
        super().__init__(step, name, module, checks)
        self.gemm = "og_sgemm_bf16"
        module.helper("gemm_bf16")


class Bf16WinogradEmitter(WinogradEmitter):
    """A :class:`Bf16WinogradStep`: its 16 products by ``og_sgemm_bf16``."""

    gemm = "og_sgemm_bf16"
    shares_transform = False
    splits_depth = False

    def emit(self) -> str:
        self.module.helper("gemm_bf16")
        return super().emit()


# ------------------------------------------------------------------------------ C kernels
def _micro_kernel(rows: int, ahead: bool = False) -> str:
    """``og_bf16_mk<rows>``: c[rows x nvalid] (+)= a (rows of bf16, lda apart, read in pairs)
    times b (kp rows of a 32-column pair panel). The 2 x rows accumulators are named
    variables: as arrays (the f32 kernel's form), GCC kept them on the stack around the
    inline assembly, storing all of them on every step. Each row's pair is taken once
    (``og_bf16_q``) for its two ``vdpbf16ps``: broadcast into a register, or its address
    where the instruction broadcasts it (see ``_BROADCAST``). The panel is prefetched
    :data:`PREFETCH_ROWS` pair rows ahead. ``ahead``: ``og_bf16_mkp<rows>``, which also
    fetches the cache lines ``pf``, ``pf + 64``, ... (``lines`` of them, one a step of its
    first steps) into L2, spread among its products rather than in a burst."""
    rs = range(rows)
    init = []
    for r in rs:
        init += [
            f"  og_bv x{r}_0 = {{0}}, x{r}_1 = {{0}};",
            f"  if (accumulate) og_bf16_load(&x{r}_0, &x{r}_1, c + {r} * ldc, nvalid);",
        ]
    step = [
        f"    {{ const og_bq p = og_bf16_q((const og_u32u*)(a + {r} * lda + 2 * k));\n"
        f"      x{r}_0 = og_dpbf16(x{r}_0, b0, p); x{r}_1 = og_dpbf16(x{r}_1, b1, p); }}"
        for r in rs
    ]
    store = [f"  og_bf16_store(x{r}_0, x{r}_1, c + {r} * ldc, nvalid);" for r in rs]
    return "\n".join(
        [
            f"static inline __attribute__((always_inline)) void og_bf16_mk{'p' if ahead else ''}"
            f"{rows}(",
            "    const uint16_t* restrict a, long lda, const uint32_t* restrict b, long kp,",
            "    float* restrict c, long ldc, long nvalid, int accumulate"
            + (", const char* pf, long lines) {" if ahead else ") {"),
            *init,
            "  for (long k = 0; k < kp; ++k) {",
            *(["    if (k < lines) __builtin_prefetch(pf + k * 64, 0, 2);"] if ahead else []),
            "    og_bv b0, b1;",
            "    __builtin_memcpy(&b0, b + k * 32, 64);",
            "    __builtin_memcpy(&b1, b + k * 32 + 16, 64);",
            dialect.panel_prefetch("b", "32", 16, PREFETCH_ROWS).rstrip("\n"),
            *step,
            "  }",
            *store,
            "}",
        ]
    )


#: ``og_dpbf16(acc, b, q)``: acc += the bf16 pair ``q`` stands for, in every lane, times the 16
#: bf16 pairs of b (f32 accumulation); ``og_bf16_q(p)`` takes the pair at p. Where
#: ``dialect.BROADCAST_TARGETS`` takes embedded broadcasts (Zen 4, where the kernels were tuned)
#: ``q`` is p and the instruction reads it as ``m32{1to16}``; elsewhere ``vbroadcastss`` puts it
#: in a register once for the row's two instructions. On this Zen 5 the register form runs the
#: 12-row kernel on L1 data at 0.98-1.00 of the ``vdpbf16ps`` peak against 0.90-0.92 with the
#: embedded broadcasts (C harness, thread CPU, best of 7, load 3.9; docs/performance.md,
#: 2026-11-27, h109), as H95b found for the f32 and H104 for the int8 kernels. The same
#: instructions on the same values: the sums are bit-identical.
_BROADCAST = f"""#if {dialect.BROADCAST_TARGETS}
typedef const og_u32u* og_bq;
static inline __attribute__((always_inline)) og_bq og_bf16_q(const og_u32u* p) {{ return p; }}
static inline __attribute__((always_inline)) og_bv og_dpbf16(og_bv acc, og_bv b, og_bq a) {{
  __asm__("vdpbf16ps %2%{{1to16%}}, %1, %0" : "+v"(acc) : "v"(b), "m"(*a));
  return acc;
}}
#else
typedef og_bv og_bq;
static inline __attribute__((always_inline)) og_bq og_bf16_q(const og_u32u* p) {{
  og_bv q;
  __asm__("vbroadcastss %1, %0" : "=v"(q) : "m"(*p));
  return q;
}}
static inline __attribute__((always_inline)) og_bv og_dpbf16(og_bv acc, og_bv b, og_bq a) {{
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(b), "v"(a));
  return acc;
}}
#endif"""


def _row_conversion() -> str:
    """``og_bf16_row``: n f32 values rounded to bf16 (nearest even), 32 at a time by
    ``vcvtne2ps2bf16`` (one instruction per 32 values against about ten for the integer
    rounding of ``og_bf16_bits``; 0.5 % of the BERT layer on one thread). The instruction
    treats f32 subnormals as zero: the products differ only where ``vdpbf16ps`` would have
    read a bf16 subnormal, which it treats as zero too, or where a subnormal within 2^-134 of
    the smallest normal would have rounded up to it (a term of 2^-126 times a weight
    dropped)."""
    return """static inline void og_bf16_row(const float* restrict x, uint16_t* restrict t,
                               long n) {
  long j = 0;
  for (; j + 32 <= n; j += 32) {
    og_bv lo, hi, r;
    __builtin_memcpy(&lo, x + j, 64);
    __builtin_memcpy(&hi, x + j + 16, 64);
    __asm__("vcvtne2ps2bf16 %2, %1, %0" : "=v"(r) : "v"(hi), "v"(lo));
    __builtin_memcpy(t + j, &r, 64);
  }
  for (; j < n; ++j) t[j] = (uint16_t)og_bf16_bits(x[j]);
}"""


def _pair_conversion() -> str:
    """``og_bf16_pairs``: 16 (lo, hi) pairs of f32 rounded to bf16 pairs (lo in the low
    half), by one ``vcvtne2ps2bf16`` and one ``vpermw`` interleaving its two halves, where
    ``og_bf16_bits`` takes about ten integer instructions per value: ``og_sgemm_bf16``'s
    right operand (the stem's patches). Subnormals as in ``og_bf16_row``."""
    order = ", ".join(f"{j}, {16 + j}" for j in range(16))
    return f"""typedef uint16_t og_hv __attribute__((vector_size(64)));
static inline void og_bf16_pairs(const float* restrict lo, const float* restrict hi,
                                 uint32_t* restrict d) {{
  static const og_hv order = {{{order}}};
  og_bv l, h;
  og_hv r;
  __builtin_memcpy(&l, lo, 64);
  __builtin_memcpy(&h, hi, 64);
  __asm__("vcvtne2ps2bf16 %2, %1, %0" : "=v"(r) : "v"(h), "v"(l));
  __asm__("vpermw %1, %2, %0" : "=v"(r) : "v"(r), "v"(order));
  __builtin_memcpy(d, &r, 64);
}}"""


def switch_cases(macro: str) -> str:
    """The cases of a switch over a tile's rows, :data:`ROWS` down to 1: ``macro(rows)``."""
    return " ".join(f"case {n}: {macro}({n}); break;" for n in range(ROWS, 0, -1))


def _chunk_loop(ahead: bool) -> str:
    """``og_bf16_chunk``: one inner block of a chunk of rows times the panels, each panel slice
    serving every tile of the rows. ``ahead``:
    ``og_bf16_chunkp``, the same sums in the same order, whose micro-kernels (``og_bf16_mkp``)
    also fetch the slice read next into L2, its lines spread over the tiles of a panel: the
    next panel's, after the last ``then`` (``thenkp`` pair rows; none where it is null)."""
    p = "p" if ahead else ""
    pad = " " * (26 + len(p))
    extra = ", const char* then, long thenkp" if ahead else ""
    blocks = [
        "  long tiles = (m + tile - 1) / tile, nb1 = (n1 + 31) / 32;",
    ]
    panel = [
        "    const char* ahead = nb + 1 < nb1 ? (const char*)(panels + ((nb + 1) * pairs + k0 / 2)"
        " * 32)\n                                     : then;",
        "    long total = ahead ? 2 * (nb + 1 < nb1 ? kp : thenkp) : 0;",
        "    long each = (total + tiles - 1) / tiles;",
    ]
    tile = [
        "      long lines = total - done < each ? total - done : each;",
        "      const char* pf = lines > 0 ? ahead + done * 64 : ahead;",
    ]
    loop = (
        "r0 = 0, done = 0; r0 < m; r0 += tile, done += each"
        if ahead
        else "r0 = 0; r0 < m; r0 += tile"
    )
    head = (
        "/* C[0:m, n0:n1] (+)= a (m rows of bf16, lda apart: inner elements k0..k1) times "
        "those rows of\n   P's panels; each panel slice then serves every tile of the m rows"
    )
    head += (
        ". Prefetching:\n   the next panel's slice, after the last `then` (thenkp pair rows), "
        "into L2. */"
        if ahead
        else ". */"
    )
    return "\n".join(
        [
            head,
            f"static void og_bf16_chunk{p}(const uint16_t* restrict a, long lda, "
            "const uint16_t* restrict P,",
            f"{pad}float* restrict C, long ldc, long m, long K, long k0, long k1,",
            f"{pad}long n0, long n1{extra}) {{",
            "  const uint32_t* panels = (const uint32_t*)P;",
            "  long pairs = (K + 1) / 2, kp = (k1 - k0 + 1) / 2, tile = og_bf16_tile(m);",
            *(blocks if ahead else []),
            "  for (long nb = n0 / 32; nb < (n1 + 31) / 32; ++nb) {",
            "    long valid = n1 - nb * 32 < 32 ? n1 - nb * 32 : 32;",
            *(panel if ahead else []),
            f"    for (long {loop}) {{",
            "      int rows = m - r0 < tile ? (int)(m - r0) : (int)tile;",
            *(tile if ahead else []),
            "#define OG_A (a + r0 * lda)",
            "#define OG_LDA lda",
            "#define OG_B (panels + (nb * pairs + k0 / 2) * 32)",
            "#define OG_C (C + r0 * ldc + nb * 32)",
            f"      switch (rows) {{ {switch_cases('OG_BMKP' if ahead else 'OG_BMK')} default: "
            "break; }",
            "#undef OG_A",
            "#undef OG_LDA",
            "#undef OG_B",
            "#undef OG_C",
            "    }",
            "  }",
            "}",
        ]
    )


def _rows_loop(ahead: bool) -> str:
    """``og_gemm_bf16_rows``: a product whose left operand was rounded to bf16 once, by
    chunks of :data:`CHUNK` rows and inner blocks of at most :data:`ROWS_DEPTH`. ``ahead``:
    ``og_gemm_bf16_rowsp`` over ``og_bf16_chunkp``, the same sums in the same order, each
    chunk's last panel prefetching what the loop reads next (the first panel's slice of the
    next chunk or inner block) or, after the last, ``after``: the first slice of the next
    product by panels as deep (a Winograd step's next position, whose filters are not in L2
    when the step starts), or null."""
    p = "p" if ahead else ""
    pad = " " * (30 + len(p))
    first = [
        "  const uint32_t* first = (const uint32_t*)P + n0 / 32 * ((K + 1) / 2) * 32;",
    ]
    block = [
        "    long kn = k1 < K ? k1 : 0, next = ((K - kn < depth ? K - kn : depth) + 1) / 2;",
    ]
    chunk = [
        "      const char* then = m1 < M ? (const char*)(first + k0 / 2 * 32)",
        "                         : k1 < K ? (const char*)(first + k1 / 2 * 32) : "
        "(const char*)after;",
        "      long thenkp = m1 < M ? (k1 - k0 + 1) / 2 : next;",
    ]
    args = "A16 + m0 * ld16 + k0, ld16, P, C + m0 * ldc, ldc, m1 - m0, K, k0, k1, n0,"
    call = f"      og_bf16_chunk{p}({args}\n                    {' ' * len(p)}n1"
    call += ", then, thenkp);" if ahead else ");"
    head = (
        "/* og_gemm_bf16_panels over A16, A already rounded to bf16 (rows ld16 apart, an odd K's "
        "last\n   pair ending in a zero): the same chunks, read in place, by inner blocks of at "
        f"most\n   {ROWS_DEPTH} (no copy on the stack bounds them)"
        + (
            ". Prefetching: after the last panel of a\n   chunk, the slice read next, or `after` "
            "(the next product's first, or null). */"
            if ahead
            else ". */"
        )
    )
    return "\n".join(
        [
            head,
            f"static void og_gemm_bf16_rows{p}(const uint16_t* restrict A16, long ld16,",
            f"{pad}const uint16_t* restrict P, float* restrict C, long ldc, long M,",
            f"{pad}long K, long n0, long n1" + (", const uint16_t* after) {" if ahead else ") {"),
            f"  long depth = og_bf16_depth(K, {ROWS_DEPTH});",
            *(first if ahead else []),
            "  for (long k0 = 0; k0 < K; k0 += depth) {",
            "    long k1 = k0 + depth < K ? k0 + depth : K;",
            *(block if ahead else []),
            f"    for (long m0 = 0; m0 < M; m0 += {CHUNK}) {{",
            f"      long m1 = m0 + {CHUNK} < M ? m0 + {CHUNK} : M;",
            *(chunk if ahead else []),
            call,
            "    }",
            "  }",
            "}",
        ]
    )


@dialect.helper("gemm_bf16_ahead")
def _gemm_bf16_ahead() -> str:
    """The prefetching forms of the row products (``og_bf16_chunkp``, ``og_gemm_bf16_rowsp``:
    :func:`_chunk_loop`, :func:`_rows_loop`), only in the modules that call them (the Winograd
    rows form), after ``gemm_bf16``, whose micro-kernels and blocking they use."""
    return f"""#define OG_BMKP(R) \\
  og_bf16_mkp##R(OG_A, OG_LDA, OG_B, kp, OG_C, ldc, valid, k0 > 0, pf, lines)
{_chunk_loop(True)}
{_rows_loop(True)}
#undef OG_BMKP"""


@dialect.helper("gemm_bf16")
def _gemm_bf16() -> str:
    cases = switch_cases("OG_BMK")
    pairs = DEPTH // 2
    kernels = "\n".join(
        _micro_kernel(rows, ahead) for ahead in (False, True) for rows in range(1, ROWS + 1)
    )
    return f"""typedef float og_bv __attribute__((vector_size(64)));
typedef uint32_t og_u32u __attribute__((aligned(2), may_alias));
{_BROADCAST}
static inline __attribute__((always_inline)) void og_bf16_load(og_bv* lo, og_bv* hi,
                                                               const float* c, long nvalid) {{
  float t[32];
  for (long j = 0; j < 32; ++j) t[j] = j < nvalid ? c[j] : 0.0f;
  __builtin_memcpy(lo, t, 64);
  __builtin_memcpy(hi, t + 16, 64);
}}
static inline __attribute__((always_inline)) void og_bf16_store(og_bv lo, og_bv hi, float* c,
                                                                long nvalid) {{
  if (nvalid == 32) {{
    __builtin_memcpy(c, &lo, 64);
    __builtin_memcpy(c + 16, &hi, 64);
    return;
  }}
  float t[32];
  __builtin_memcpy(t, &lo, 64);
  __builtin_memcpy(t + 16, &hi, 64);
  for (long j = 0; j < nvalid; ++j) c[j] = t[j];
}}
static inline uint32_t og_bf16_bits(float f) {{ /* round to nearest even; NaN stays NaN */
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r;
}}
{_row_conversion()}
{_pair_conversion()}
{kernels}
/* Rows of the tiles that share out m rows evenly (49: 10, 10, 10, 10, 9 rather than four of
   12 and one of 1, whose two accumulator chains wait on the instruction's latency). */
static inline long og_bf16_tile(long m) {{
  long tiles = (m + {ROWS - 1}) / {ROWS};
  return tiles > 0 ? (m + tiles - 1) / tiles : 1;
}}
#define OG_BMK(R) og_bf16_mk##R(OG_A, OG_LDA, OG_B, kp, OG_C, ldc, valid, k0 > 0)
{_chunk_loop(False)}
/* The inner block of a K-deep bf16 product: equal even blocks of at most `most`. */
static inline long og_bf16_depth(long K, long most) {{
  long blocks = K > most ? (K + most - 1) / most : 1;
  return ((K + blocks - 1) / blocks + 1) / 2 * 2;
}}
/* C[:, n0:n1] = A (M x K f32, rows lda apart) times P (K x N as bf16 pair panels of 32
   columns); n0 is a multiple of 32. A is rounded to bf16 by chunks of {CHUNK} rows and equal
   even blocks of at most {PANEL_DEPTH} inner elements; each panel slice (block x 32, L1 or L2)
   then serves every tile of the chunk (P is streamed once per chunk: tiles outermost re-read
   all of it from L3 for every 12 rows). */
static void og_gemm_bf16_panels(const float* restrict A, long lda, const uint16_t* restrict P,
                                float* restrict C, long ldc, long M, long K, long n0,
                                long n1) {{
  uint16_t chunk[{CHUNK} * {PANEL_DEPTH}];
  long depth = og_bf16_depth(K, {PANEL_DEPTH});
  for (long k0 = 0; k0 < K; k0 += depth) {{
    long k1 = k0 + depth < K ? k0 + depth : K;
    for (long m0 = 0; m0 < M; m0 += {CHUNK}) {{
      long m1 = m0 + {CHUNK} < M ? m0 + {CHUNK} : M;
      for (long r = 0; r < m1 - m0; ++r) {{
        og_bf16_row(A + (m0 + r) * lda + k0, chunk + r * depth, k1 - k0);
        if ((k1 - k0) & 1) chunk[r * depth + k1 - k0] = 0;
      }}
      og_bf16_chunk(chunk, depth, P, C + m0 * ldc, ldc, m1 - m0, K, k0, k1, n0, n1);
    }}
  }}
}}
{_rows_loop(False)}
/* sgemm(RowMajor, NoTrans, NoTrans, M, N, K, 1, A, lda, B, ldb, 0, C, ldc) with A in bf16
   (a constant: finite, and one readable element after its last row) and B in f32, rounded to
   bf16 pairs by blocks of {WIDE} panels of 32 columns and {DEPTH} rows (96 KiB, L2); each
   tile of A ({ROWS} rows, L1) then serves all the block's panels, so A is streamed once per
   {WIDE * 32} columns. */
static void og_sgemm_bf16(int order, int ta, int tb, int M, int N, int K, float alpha,
                          const uint16_t* restrict A, int lda, const float* restrict B,
                          int ldb, float beta, float* restrict C, int ldc) {{
  (void)order; (void)ta; (void)tb; (void)alpha; (void)beta;
  uint32_t panel[{WIDE} * {pairs} * 32];
  for (long n0 = 0; n0 < N; n0 += {WIDE * 32}) {{
    long count = (N - n0 < {WIDE * 32} ? N - n0 + 31 : {WIDE * 32}) / 32;
    for (long k0 = 0; k0 < K; k0 += {DEPTH}) {{
      long k1 = k0 + {DEPTH} < K ? k0 + {DEPTH} : K, kp = (k1 - k0 + 1) / 2;
      for (long pi = 0; pi < count; ++pi) {{
        long n = n0 + pi * 32, valid = N - n < 32 ? N - n : 32;
        for (long q = 0; q < kp; ++q) {{
          const float* lo = B + (k0 + 2 * q) * (long)ldb + n;
          const float* hi = k0 + 2 * q + 1 < k1 ? lo + ldb : 0;
          uint32_t* d = panel + (pi * {pairs} + q) * 32;
          if (valid == 32 && hi) {{
            og_bf16_pairs(lo, hi, d);
            og_bf16_pairs(lo + 16, hi + 16, d + 16);
            continue;
          }}
          for (long j = 0; j < 32; ++j)
            d[j] = j < valid ? og_bf16_bits(lo[j]) | (hi ? og_bf16_bits(hi[j]) << 16 : 0u) : 0u;
        }}
      }}
      long tile = og_bf16_tile(M);
      for (long m = 0; m < M; m += tile) {{
        int rows = M - m < tile ? (int)(M - m) : (int)tile;
        for (long pi = 0; pi < count; ++pi) {{
          long valid = N - n0 - pi * 32 < 32 ? N - n0 - pi * 32 : 32;
#define OG_A (A + m * (long)lda + k0)
#define OG_LDA (long)lda
#define OG_B (panel + pi * {pairs} * 32)
#define OG_C (C + m * (long)ldc + n0 + pi * 32)
          switch (rows) {{ {cases} default: break; }}
#undef OG_A
#undef OG_LDA
#undef OG_B
#undef OG_C
        }}
      }}
    }}
  }}
}}
#undef OG_BMK"""


Emitted = tuple[str, str, tuple[Check, ...]]


def _emitter(cls: type) -> Callable[[Any, int, ModuleContext], Emitted]:
    def emit(step: Any, i: int, module: ModuleContext) -> Emitted:
        checks: list[Check] = []
        text = cls(step, f"g{i}", module, checks).emit()
        return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)

    return emit


#: The C generator of each bf16 step (``module.STEP_EMITTERS`` takes them in).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], Emitted]] = {
    Bf16GemmStep: _emitter(Bf16GemmEmitter),
    Bf16ConvStep: _emitter(Bf16ConvEmitter),
    Bf16WinogradStep: _emitter(Bf16WinogradEmitter),
}
