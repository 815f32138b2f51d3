"""Generate the C of a direct convolution step (``ConvStep`` with ``direct``): depthwise
convolutions and grouped ones with few channels per group, which im2col and one thin GEMM
per group run badly (a 3x3 depthwise filter is a 1 x 9 matrix).

A unit is a block of output rows of a few output channels of one group of one image
(:class:`~opgraph.backends.fused.lowering.convolution.DirectPlan`). For each input channel
of the group it copies the input rows the block reads into a zero-padded block in this
thread's scratch (padding, cropping and rows outside the data are resolved there), then runs
one flat ``omp simd`` loop over the block's outputs in which every filter tap is unrolled and
reads the padded block at a constant offset: no bounds tests, no scalar border or tail code,
whatever the padding, stride or dilation. Each loaded input vector feeds the taps of every
output channel of the unit. The outputs are computed with a row pitch of the padded block
(the columns past the output width are dropped when the block is copied out) and the fused
epilogue runs on the copied rows while they are in cache.

Depthwise steps (one input channel per group, one pass) whose output rows are at least
16 wide (``DirectPlan.in_place``) skip the flat outputs: each group of ``together`` output
rows is one ``omp simd`` loop over the output columns that reads the same padded phases and
writes the output rows in place, so the block is not copied out (perf showed that copy at
about 15 % of a 3x3 step); narrower rows keep the flat loop, whose padded columns waste less
than a vector's tail. The copy-in writes only the columns inside the image (the padding
columns are zeroed once per call). Small one-pass units are pipelined
(``DirectPlan.pipelined``: the next unit's input is copied in before this one is computed),
and the fused epilogue runs over several consecutive units at once
(:data:`EPILOGUE_BATCH`).

One-pass f32 depthwise steps on planes narrower than a vector run channel-blocked instead
(``codegen/depthwise_blocked.py``, ``DirectPlan.blocked``) in AVX-512 and AVX2 builds.

One-pass f32 steps with filters of :data:`VECTOR_TAPS` taps or more (5x5, 7x7) run their
tap loops as register-blocked GCC vector code instead (``codegen/depthwise_vector.py``:
each phase row loaded once as a pair of vectors, the column shifts made by permutes, a few
independent accumulators per output row), four output rows together (the plan's
``together``); in every ``omp simd`` tap loop a row's taps are summed as a few independent
chains (:func:`_tree_sum`), not one chain of dependent multiply-adds.

Units are shared out by the runtime's thread pool in a few equal parts (``4 x threads``).
"""

from __future__ import annotations

import math

from opgraph.backends.cpu.codegen import depthwise_strided, dialect
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.depthwise_blocked import (
    BUILDS,
    BlockedDepthwiseEmitter,
    dispatch,
    flush_epilogue,
)
from opgraph.backends.cpu.codegen.depthwise_vector import TapOutput, span_loop, tap_block
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.fused.lowering.convolution import direct_plan
from opgraph.backends.fused.program import ConvStep
from opgraph.backends.fused.views import static, static_all

#: Columns one vector loop of a row written in place covers at least: the columns past
#: the last multiple of it are computed as the last ``ROWWISE_WIDTH`` columns again (one
#: full vector overlapping the previous ones, same values), not a scalar tail.
ROWWISE_WIDTH = 16
#: Filter taps from which one-pass f32 steps with unstrided columns run the vector tap loops
#: (``codegen/depthwise_vector.py``) instead of ``omp simd`` loops (a column stride of 2
#: leaves two or three shifts per phase row: the loads measured as fast as the permutes).
VECTOR_TAPS = 25
#: Multiply-adds of one independent chain of a tap sum at least (:func:`_tree_sum`).
CHAIN_MIN = 2


class DirectConvEmitter:
    """``static int <name>(T, A, lo, hi)`` over parts of the units, and ``<name>_run``."""

    def __init__(
        self, step: ConvStep, name: str, module: ModuleContext, checks: list[Check] | None = None
    ) -> None:
        assert step.direct and step.x is not None and step.w is not None
        assert step.out is not None and step.scratch is not None
        self.step, self.name, self.module = step, name, module
        self.checks: list[Check] = checks if checks is not None else []
        self.x, self.w, self.out, self.scratch = step.x, step.w, step.out, step.scratch
        self.ctype = dialect.storage_type(step.out.element_type)
        # direct steps are static (symbolic ones fall back, lowering/convolution.py)
        self.cg = static(self.x.shape[1]) // step.groups
        self.og = static(self.w.shape[0]) // step.groups
        threads = static(step.scratch.shape[0])
        plan = direct_plan(step, threads)
        assert plan.rows == step.block_rows
        self.stride = plan.per_thread  # scratch elements per thread
        self.blocked: BlockedDepthwiseEmitter | None = None
        if plan.blocked:  # narrow planes: codegen/depthwise_blocked.py with AVX-512 / AVX2
            self.blocked = BlockedDepthwiseEmitter(step, name, module, plan, self.checks)
            plan = direct_plan(step, threads, blocked=False)  # else the row-wise loops
        self.plan = plan
        self.rowwise = self.plan.in_place
        self.sets = 2 if self.plan.pipelined else 1  # sets of phases
        # units in order cover consecutive outputs when they are whole planes or one channel
        blocks = -(-self.out.shape[2] // self.plan.rows)
        whole = self.plan.block == 1 or blocks == 1
        self.batched = step.epilogue is not None and whole
        # one-pass f32 steps: register-blocked vector tap loops (codegen/depthwise_vector.py)
        taps = step.kernel[0] * step.kernel[1]
        self.vector = (
            self.ctype == "float"
            and self.cg == 1
            and not self.plan.row_passes
            and taps >= VECTOR_TAPS
            and step.strides[1] == 1
        )
        if self.vector:
            module.helper("dw_vector")
        # 3x3 and 5x5 stride 2: straight from the input rows with AVX-512 / AVX2 (depthwise_strided)
        self.strided = depthwise_strided.takes(step, self.ctype, self.rowwise)
        if self.strided:
            module.helper("dws2")

    def parallel(self) -> bool:
        n, o, oh, ow = static_all(self.out.shape)
        kh, kw = self.step.kernel
        work = n * o * oh * ow * self.cg * kh * kw
        return work >= PARALLEL_MACS and self.module.num_threads > 1

    def emit(self) -> str:
        """The step's C: channel-blocked steps have it twice, the row-wise form for builds
        without AVX-512 or AVX2."""
        if self.blocked is None:
            return self.emit_rows()
        lines = [f"#if {BUILDS}", self.blocked.emit(), "#else", self.emit_rows()]
        return "\n".join([*lines, "#endif"])

    def emit_rows(self) -> str:
        s, p, ct = self.step, self.plan, self.ctype
        n, o, oh, _ = static_all(self.out.shape)
        blocks = -(-oh // p.rows)
        chunks = o // p.block
        total = n * chunks * blocks
        parallel = self.parallel()
        parts = min(total, 4 * self.module.num_threads) if parallel else 1
        head = [f"/* {self.name}: direct convolution: {s.label.replace('*/', '* /')} */"]
        if s.epilogue is not None:
            label = "epilogue of " + self.name
            ep = CLoopEmitter(s.epilogue, f"{self.name}_ep", self.module, label, self.checks)
            head.append(ep.emit())
        worker = "(long)og_worker_index()" if parts > 1 else "0L"
        body = [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.scratch, "scratch", False),
            f"  {ct}* buf = scratch + {worker} * {self.stride}L;",
            *self.strided_rows([], self.zero_phases()),
            *[
                f"  {ct}* ext{b}_{row} = buf + {self.ext_offset(b, row)}L;"
                for b in range(p.block)
                for row in range(p.together)
            ],
            f"  long first = lo * {total}L / {parts}L, last = hi * {total}L / {parts}L;",
            *(["  long pending = -1;"] if self.batched else []),
            *self.strided_rows([], self.pipeline_start(chunks, blocks)),
            "  for (long u = first; u < last; ++u) {",
            *self.decode("u", "", chunks, blocks),
            f"    long r1 = r0 + {p.rows}L < {oh}L ? r0 + {p.rows}L : {oh}L;",
            f"    const {ct}* w = w0 + oc0 * {self.w.shape[1]}L;",
            *self.strided_rows([], self.pipeline_next(chunks, blocks)),
            *self.strided_rows(depthwise_strided.call(s), self.passes()),
            *self.copy_out(),
            "  }",
            "  return err;",
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            f"  return {dispatch(self.module, self.name, parts)};",
            "}",
        ]
        return "\n".join(head + body)

    def strided_rows(self, strided: list[str], phases: list[str]) -> list[str]:
        """``phases`` (the copy-in form's lines), or for steps taken by
        ``depthwise_strided`` ``strided`` with AVX-512 or AVX2 and ``phases`` without."""
        if not self.strided:
            return phases
        return [f"#if {BUILDS}", *strided, "#else", *phases, "#endif"]

    def decode(self, unit: str, sfx: str, chunks: int, blocks: int) -> list[str]:
        """Image, first output channel and first row of unit ``unit``, and where its
        input channels start (names suffixed with ``sfx``)."""
        p, ct = self.plan, self.ctype
        return [
            f"    long img{sfx} = {unit} / {chunks * blocks}L;",
            f"    long blk{sfx} = ({unit} / {blocks}L) % {chunks}L;",
            f"    long r0{sfx} = ({unit} % {blocks}L) * {p.rows}L;",
            f"    long oc0{sfx} = blk{sfx} * {p.block}L, grp{sfx} = oc0{sfx} / {self.og}L;",
            f"    const {ct}* x{sfx} = x0 + img{sfx} * {self.x.strides[0]}L"
            f" + grp{sfx} * {self.cg * self.x.strides[1]}L;",
        ]

    def pipeline_start(self, chunks: int, blocks: int) -> list[str]:
        """Pipelined plans: copy the part's first unit in before the loop."""
        if not self.plan.pipelined:
            return []
        return [
            "  if (first < last) {",
            *self.decode("first", "", chunks, blocks),
            *["  " + line for line in self.copy_in("buf", "r0", "x")],
            "  }",
        ]

    def pipeline_next(self, chunks: int, blocks: int) -> list[str]:
        """Pipelined plans: this unit's phases (copied in by the previous step of the
        loop), then the next unit's input copied into the other set."""
        p, ct = self.plan, self.ctype
        if not p.pipelined:
            return []
        size = p.phases * p.phase_size
        return [
            f"    const {ct}* cur = buf + ((u - first) & 1L) * {size}L;",
            "    if (u + 1 < last) {",
            "      long un = u + 1;",
            *["  " + line for line in self.decode("un", "n", chunks, blocks)],
            f"      {ct}* nb = buf + ((un - first) & 1L) * {size}L;",
            *["      " + line for line in self.copy_in("nb", "r0n", "xn")],
            "    }",
        ]

    def passes(self) -> list[str]:
        """Every input channel of the group (and filter row, for tall filters): copy in,
        then one flat loop per pass."""
        p = self.plan
        kh, kw = self.step.kernel
        single = self.cg == 1 and not p.row_passes
        lines: list[str] = []
        if not single and not self.rowwise:  # passes accumulate
            zero = " ".join(
                f"ext{b}_{row}[f] = 0;" for b in range(p.block) for row in range(p.together)
            )
            lines += [
                "    #pragma omp simd",
                f"    for (long f = 0; f < {p.flat}L; ++f) {{ {zero} }}",
            ]
        indent = "    "
        if self.cg > 1:
            lines.append(f"{indent}for (long ci = 0; ci < {self.cg}L; ++ci) {{")
            indent += "  "
        channel = "ci" if self.cg > 1 else "0"
        if not p.pipelined:
            xc = f"x + {channel} * {self.x.strides[1]}L"
            lines.append(f"{indent}const {self.ctype}* xc = {xc};")
            lines += [indent + line for line in self.copy_in("buf", "r0", "xc")]
        if p.row_passes:
            lines.append(f"{indent}for (long a = 0; a < {kh}L; ++a) {{")
            indent += "  "
            taps = [(0, b) for b in range(kw)]
            (sh, sw), dh = self.step.strides, self.step.dilations[0]
            lines.append(  # together is 1: the phases split rows by sh
                f"{indent}const {self.ctype}* src = buf + (a * {dh}L % {sh}L) * "
                f"{sw * p.phase_size}L + (a * {dh}L / {sh}L) * {p.pitch}L;"
            )
            first = f"{channel} * {kh * kw}L + a * {kw}L"
        else:
            taps = [(a, b) for a in range(kh) for b in range(kw)]
            lines.append(f"{indent}const {self.ctype}* src = {'cur' if p.pipelined else 'buf'};")
            first = f"{channel} * {kh * kw}L"
        if self.rowwise:
            lines += [indent + line for line in self.row_loops(taps, first)]
        else:
            flat = self.flat_loop(taps, first, "=" if single else "+=")
            lines += [indent + line for line in flat]
        if p.row_passes:
            lines.append(f"{indent[:-2]}}}")
        if self.cg > 1:
            lines.append("    }")
        return lines

    def copy_in(self, into: str, r0: str, xc: str) -> list[str]:
        """This input channel into the phases in ``buf``: phase ``(pr, pc)`` row ``i``
        column ``j`` holds image row ``r0 * sh + i * span + pr - pt`` and column ``j * sw +
        pc - pl`` (``span = together * sh``), zero outside the image. Only the columns
        inside the image are copied: the others are zeroed once per call
        (:meth:`zero_phases`) and never written; rows outside the image are zeroed whole.
        ``into``, ``r0``, ``xc``: the phases, the unit's first output row, its channel."""
        s, p, ct = self.step, self.plan, self.ctype
        h = self.x.shape[2]
        (sh, sw), pt = s.strides, s.padding[0]
        span = p.together * sh
        lines = [f"for (long i = 0; i < {p.in_rows}L; ++i) {{"]
        for pr in range(span):
            copies, zeros = [], []
            for pc in range(sw):
                lo, hi = self.inside_columns(pc)
                d = f"d[{(pr * sw + pc) * p.phase_size}L + j]"
                for a, b in (_spans(lo, hi) if sw == 1 else [(lo, hi)]) if lo < hi else []:
                    copies += ["#pragma omp simd", f"for (long j = {a}L; j < {b}L; ++j)"]
                    copies.append(f"  {d} = s[j * {sw}L + {pc - s.padding[1]}L];")
                zeros += ["#pragma omp simd", f"for (long j = 0; j < {p.pitch}L; ++j) {d} = 0;"]
            lines += [
                "  {",
                f"    long ih = {r0} * {sh}L - {pt}L + i * {span}L + {pr}L;",
                f"    {ct}* d = {into} + i * {p.pitch}L;",
                f"    if (ih >= 0 && ih < {h}L) {{",
                f"      const {ct}* s = {xc} + ih * {self.x.strides[2]}L;",
                *["      " + line for line in copies],
                "    } else {",
                *["      " + line for line in zeros],
                "    }",
                "  }",
            ]
        lines.append("}")
        return lines

    def inside_columns(self, pc: int) -> tuple[int, int]:
        """The columns ``[lo, hi)`` of column phase ``pc`` that hold image columns (image
        column ``j * sw + pc - pl`` lies in ``[0, w)``)."""
        p, w = self.plan, static(self.x.shape[3])
        sw, pl = self.step.strides[1], self.step.padding[1]
        lo = min(p.pitch, max(0, -(-(pl - pc) // sw)))
        return lo, min(p.pitch, max(lo, (w - 1 + pl - pc) // sw + 1))

    def zero_phases(self) -> list[str]:
        """Zero this thread's phases once per call: the columns outside the image stay
        zero (every copy writes only the inside ones)."""
        p = self.plan
        return [
            "  #pragma omp simd",
            f"  for (long f = 0; f < {self.sets * p.phases * p.phase_size}L; ++f) buf[f] = 0;",
        ]

    def tap_offset(self, row: int, a: int, col: int) -> int:
        """Where output row ``row`` of a group of ``together`` reads tap (filter row ``a``,
        column ``col``), relative to ``src`` (for row passes ``a`` is 0: ``src`` moves)."""
        s, p = self.step, self.plan
        (sh, sw), (dh, dw) = s.strides, s.dilations
        down = row * sh + a * dh
        span = p.together * sh
        phase = (down % span) * sw + col * dw % sw
        return phase * p.phase_size + down // span * p.pitch + col * dw // sw

    def weights(self, taps: list[tuple[int, int]], first: str) -> list[str]:
        """The weights of ``taps`` (filter row, column) for each output channel of the unit."""
        s, p, ct = self.step, self.plan, self.ctype
        kw, k = s.kernel[1], self.w.shape[1]
        return [
            f"const {ct} f{b}_{t} = w[{b * k}L + {first} + {a * kw + col}L];"
            for b in range(p.block)
            for t, (a, col) in enumerate(taps)
        ]

    def taps_sum(self, taps: list[tuple[int, int]], b: int, row: int, src: str, at: str) -> str:
        """Output channel ``b``'s sum over ``taps`` for row ``row`` of a group, reading
        ``src`` at ``at`` plus each tap's offset."""
        terms = [
            f"f{b}_{t} * {src}[{at} + {self.tap_offset(row, a, col)}L]"
            for t, (a, col) in enumerate(taps)
        ]
        return _tree_sum(terms)

    def flat_loop(self, taps: list[tuple[int, int]], first: str, assign: str) -> list[str]:
        """The weights, then the flat loop over the block's outputs (``together`` rows per
        channel)."""
        p = self.plan
        if self.vector and assign == "=":
            outputs = self.tap_outputs(taps, first, "ext{b}_{row}", p.together)
            block = tap_block("f", "src", outputs)
            return span_loop("f", "0L", f"{p.flat}L", block, whole=True)
        updates = [
            f"  ext{b}_{row}[f] {assign} {self.taps_sum(taps, b, row, 'src', 'f')};"
            for b in range(p.block)
            for row in range(p.together)
        ]
        return [
            *self.weights(taps, first),
            "#pragma omp simd",
            f"for (long f = 0; f < {p.flat}L; ++f) {{",
            *updates,
            "}",
        ]

    def row_loops(self, taps: list[tuple[int, int]], first: str) -> list[str]:
        """The weights, then one loop over the output columns per group of ``together``
        rows, writing the output rows in place; a last group with fewer rows when the
        block's row count is not a multiple of ``together``."""
        p = self.plan
        lines = [
            *([] if self.vector else self.weights(taps, first)),
            f"long full = (r1 - r0) / {p.together}L;",
            "for (long g = 0; g < full; ++g) {",
            *["  " + line for line in self.row_group(taps, p.together, first)],
            "}",
        ]
        for count in range(1, p.together):
            lines += [
                f"if (r1 - r0 - full * {p.together}L == {count}L) {{",
                "  long g = full;",
                *["  " + line for line in self.row_group(taps, count, first)],
                "}",
            ]
        return lines

    def row_group(self, taps: list[tuple[int, int]], count: int, first: str) -> list[str]:
        """Rows ``0 .. count`` of group ``g`` of the block, for each output channel of the
        unit, straight into the output."""
        p, ct = self.plan, self.ctype
        _, o, oh, ow = static_all(self.out.shape)
        pointers = [
            f"{ct}* y{b}_{row} = y0 + ((img * {o}L + oc0 + {b}L) * {oh}L + r0 + g * "
            f"{p.together}L + {row}L) * {ow}L;"
            for b in range(p.block)
            for row in range(count)
        ]
        updates = [
            f"  y{b}_{row}[j] = {self.taps_sum(taps, b, row, 'sg', 'j')};"
            for b in range(p.block)
            for row in range(count)
        ]
        lines = [f"const {ct}* sg = src + g * {p.pitch}L;", *pointers]
        if self.vector:
            block = tap_block("j", "sg", self.tap_outputs(taps, first, "y{b}_{row}", count))
            return lines + span_loop("j", "0L", f"{ow}L", block, whole=ow % 16 == 0)
        spans = _spans(0, ow)
        for lo, hi in spans:
            lines += ["#pragma omp simd", f"for (long j = {lo}L; j < {hi}L; ++j) {{"]
            lines += [*updates, "}"]
        return lines

    def tap_outputs(
        self, taps: list[tuple[int, int]], first: str, dest: str, count: int
    ) -> list[TapOutput]:
        """The outputs of a vector tap loop: rows ``0 .. count`` of each output channel of
        the unit, stored through ``dest`` (formatted with ``b`` and ``row``). The weights
        are read from the filters in the loop (``w[...]``), which GCC folds into the
        multiply-adds as broadcasts: hoisted as locals, they were spilled."""
        k = static(self.w.shape[1])
        return [
            TapOutput(
                dest.format(b=b, row=row),
                tuple(self.tap_term(b * k, first, row, a, col) for a, col in taps),
            )
            for b in range(self.plan.block)
            for row in range(count)
        ]

    def tap_term(self, at: int, first: str, row: int, a: int, col: int) -> tuple[str, int, int]:
        """A term of a vector tap loop: the weight (filter ``at + first``, tap ``(a, col)``),
        the offset of the phase row it reads and the column within that row."""
        kw, (sw, dw) = self.step.kernel[1], (self.step.strides[1], self.step.dilations[1])
        shift = col * dw // sw
        weight = f"w[{at}L + {first} + {a * kw + col}L]"
        return weight, self.tap_offset(row, a, col) - shift, shift

    def ext_offset(self, b: int, row: int) -> int:
        """Where output channel ``b`` of the unit keeps its flat outputs of row ``row`` of
        each group of ``together``, in ``buf``."""
        p = self.plan
        return self.sets * p.phases * p.phase_size + (b * p.together + row) * p.flat

    def copy_out(self) -> list[str]:
        """The block's outputs into ``out`` (dropping the columns past the output width;
        row-wise steps wrote them in place), then the epilogue on them."""
        p = self.plan
        _, o, oh, ow = static_all(self.out.shape)
        each: list[str] = []  # per output channel of the unit
        if not self.rowwise:
            each += [
                f"      {self.ctype}* y = y0 + ((img * {o}L + oc0 + b) * {oh}L + r0) * {ow}L;",
                f"      const {self.ctype}* e = buf + {self.ext_offset(0, 0)}L"
                f" + b * {p.together * p.flat}L;",
                "      for (long i = 0; i < r1 - r0; ++i) {",
                f"        const {self.ctype}* ei = e + (i % {p.together}L) * {p.flat}L"
                f" + (i / {p.together}L) * {p.pitch}L;",
                "        #pragma omp simd",
                f"        for (long j = 0; j < {ow}L; ++j) y[i * {ow}L + j] = ei[j];",
                "      }",
            ]
        if self.step.epilogue is not None and not self.batched:
            each += [
                f"      long at_ = ((img * {o}L + oc0 + b) * {oh}L + r0) * {ow}L;",
                f"      err |= {self.name}_ep(T, A, at_, at_ + (r1 - r0) * {ow}L);",
            ]
        lines = [f"    for (long b = 0; b < {p.block}L; ++b) {{", *each, "    }"] if each else []
        return lines + self.batch_epilogue()

    def batch_epilogue(self) -> list[str]:
        """Batched epilogues: the unit's outputs join the pending range (units in order
        cover consecutive outputs), which the epilogue runs on once it holds
        :data:`EPILOGUE_BATCH` elements, and at the end of the part."""
        if not self.batched:
            return []
        _, o, oh, ow = static_all(self.out.shape)
        start = f"((img * {o}L + oc0) * {oh}L + r0) * {ow}L"
        return flush_epilogue(self.name, start, f"(r1 - r0) * {self.plan.block * ow}L")


def _tree_sum(terms: list[str]) -> str:
    """The sum of ``terms`` as independent chains of about sqrt(n) multiply-adds, added
    pairwise: one left-to-right chain of n dependent multiply-adds is bound by their latency
    (49 x 4 cycles for a 7x7 tap), not by the multiply-add throughput. The C parentheses fix
    the order (GCC does not reassociate floating point without -ffast-math)."""
    chain = max(CHAIN_MIN, math.isqrt(len(terms) - 1) + 1) if terms else 1
    sums = [" + ".join(terms[i : i + chain]) for i in range(0, len(terms), chain)]
    while len(sums) > 1:
        sums = [
            f"({sums[i]}) + ({sums[i + 1]})" if i + 1 < len(sums) else sums[i]
            for i in range(0, len(sums), 2)
        ]
    return sums[0]


def _spans(lo: int, hi: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` as loops of whole vectors: a last loop over the last
    :data:`ROWWISE_WIDTH` indices again when the width leaves more than half a vector
    (a half vector is left to the compiler's narrower epilogue)."""
    main = hi - (hi - lo) % ROWWISE_WIDTH
    if main == hi or hi - lo < ROWWISE_WIDTH or (hi - lo) % (ROWWISE_WIDTH // 2) == 0:
        return [(lo, hi)]
    return [(lo, main), (hi - ROWWISE_WIDTH, hi)]
