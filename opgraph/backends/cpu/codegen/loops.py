"""The C schedule of the fused compiler's loop emitter
(:class:`~opgraph.backends.fused.loops.LoopEmitter`): one loop kernel as C functions.

Inner loops carry ``omp simd``, and math calls vectorize through libmvec.

* A pointwise kernel is a function over a range ``[begin, end)`` of the flattened domain, so
  the parallel driver splits even a single long row between threads.
* A row kernel is a function over a range of rows; each row runs one inner loop per
  reduction phase (reductions of a phase share the loop), then one loop for the stored
  elementwise values. A stored value that a reduction phase computes is stored by that
  phase's loop; a costly value needed by several loops is saved in a row buffer by the first
  and loaded by the others (``row_reuse.py``); other shared values are recomputed.
* A column kernel is the row kernel of a reduction over an outer axis (a bias gradient's sum
  over the batch of a row-major ``[batch, features]``): the rows are contiguous and the
  reduced axis strided, so a row loop would walk one column at a large stride (a cache line,
  and often the same cache sets, per element). It runs blocks of ``COLUMN_BLOCK`` rows instead:
  for each position of the reduced axis, one vector loop across the block, accumulating into a
  stack array (:meth:`CLoopEmitter.columnwise` says when).
"""

from __future__ import annotations

import math

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.byte_lookup import LUT256_HELPER, ByteLookup, find_byte_lookup
from opgraph.backends.cpu.codegen.context import ModuleContext
from opgraph.backends.cpu.codegen.gather_prefetch import prefetch_lines
from opgraph.backends.cpu.codegen.row_reuse import SAVE_COST, RowReuse, full_closure, plan_row_reuse
from opgraph.backends.fused.loops import Check, LoopEmitter, comment
from opgraph.backends.fused.lowering import REDUCTIONS
from opgraph.backends.fused.program import KKind, KNode, Level, LoopKernel
from opgraph.backends.fused.views import static
from opgraph.core import element_type as et
from opgraph.core.dim import Dim

#: Elements a streamed loop computes into its stack buffers before streaming them out, by
#: the lanes of the module's vectors. With 64-byte vectors every streaming store is a whole
#: line, and 32 of them in a row after each block of 512 held one Zen 5 core's W1 4096x4096
#: (three 64 MiB inputs, one streamed output) to 6.8-7.2 ms, where blocks of 64 took 5.9-6.3
#: (32: 7.3-7.5, 128: 6.4) and two threads 3.5-4.2 against 2.8-3.1 ms (docs/performance.md,
#: thirteenth session). AVX2's 32-byte streaming stores were fastest in blocks of 512
#: (64: 10-15 % slower).
STREAM_BLOCKS = {16: 64, 8: 512}
#: A flat loop streams its results only when its loads and stores together touch more bytes
#: than this (the last-level cache of the machines measured: 32 MiB per Zen 3/4 CCD). Below,
#: plain stores leave the result in that cache for its reader (the next kernel, or the same
#: loop at the next call, whose write then hits the cache too), where streaming sends every
#: line to memory: W2 (16 MiB in, 16 MiB out) took 13-18 % more CPU time per call streamed
#: in a C harness, 0-10 % more at ``exe.call`` on a loaded machine (docs/performance.md, H80).
STREAM_FOOTPRINT = 32 << 20
#: Elements per block of a pairwise sum with 16-float vectors: the vectorized loop sums a block
#: in its lanes, then blocks combine pairwise. Measured on row sums and softmax of 64 x 4096 (in
#: cache): 256 cost 6-7 %, 512 nothing. Kernels with 8-float vectors (AVX2) take blocks of
#: :data:`PAIRWISE_BLOCK_8`.
PAIRWISE_BLOCK = 512
#: Elements per block of a pairwise sum with 8-float vectors (AVX2). With 512, long sums were
#: twice as far off as with AVX-512 and past the tests' bound of 4 ulps of the total: 10^4-10^7
#: copies of 0.1f 8.6 ulps off (``OPGRAPH_CPU_ISA=avx2``), 256 4.4-5.5, 128 1.8-2.4, against
#: AVX-512's 2.3-2.9 with 512; 1e16 plus nineteen small f64 4.0 off the exact sum against 2.0.
#: Per core (one thread, thread CPU, the three alternated in one process, three runs), row sums
#: of 64 x 4096 / 256 x 1024 / one of 10^6 took 13.4-16.8 / 13.7-16.8 / 48.8-57.7 us with 512
#: and 15.0-17.0 / 16.2-16.7 / 54.5-59.9 with 128: within the runs' spread, up to ~15 % slower
#: in one of the three. Rows of at most a block (BERT's softmax over 128 keys) need no cascade.
PAIRWISE_BLOCK_8 = 128
#: Rows shorter than this that read or write bytes are vectorized 16 lanes wide (see
#: ``CLoopEmitter.short_bytes``).
SHORT_ROWS = 64
#: Rows (output columns) a column kernel accumulates at once, in stack arrays.
COLUMN_BLOCK = 256


class CLoopEmitter(LoopEmitter):
    """Emits ``static int <name>(T, A, begin, end)`` and its driver ``<name>_run(T, A)``."""

    index_suffix = "L"

    def __init__(
        self,
        kernel: LoopKernel,
        name: str,
        module: ModuleContext,
        label: str,
        checks: list[Check] | None = None,
    ) -> None:
        super().__init__(
            kernel, name, label, dialect.C, module, checks if checks is not None else []
        )
        self.module = module
        self.lines: list[str] = []
        self.reuse = RowReuse()
        self.node_cost: dict[int, int] = {}  # cost of each node defined in the current loop
        self.row_lines: list[str] | None = None  # per-row lines before a pointwise loop
        self.row_invariant: set[int] = set()  # index loads defined in them

    def define(self, k: int, out: list[str], indent: str, load: str | None = None) -> None:
        before = self.cost
        super().define(k, out, indent, load)
        self.node_cost[k] = self.cost - before

    def pointer_declarations(self) -> list[str]:
        lines = []
        for a in self.accesses.values():
            t = dialect.storage_type(a.view.element_type)
            const = "" if a.store else "const "
            base = self.module.base(a.view.buffer)
            lines.append(
                f"  {const}{t}* restrict {a.name} = ({const}{t}*)({base})"
                f" + {self.size_expr(a.view.offset)};"
            )
        return lines

    # ------------------------------------------------------------------- indexing
    def row_offsets(self, row: str) -> list[str]:
        """Decompose row number ``row`` and compute every access's row offset."""
        lines = [f"    long t_ = {row};"]
        names = []
        for i, dim in reversed(list(enumerate(self.domain.rows))):
            size = self.size_expr(dim.size)
            lines.append(f"    long x{i} = t_ % {size}; t_ /= {size};")
            names.append((i, dim))
        lines.append("    (void)t_;")
        for a in self.accesses.values():
            terms = [
                f"x{i} * {self.size_expr(d.strides[a.name])}"
                for i, d in names
                if not _zero(d.strides[a.name])
            ]
            lines.append(f"    long o_{a.name} = {' + '.join(terms) or '0'};")
        return lines

    # ----------------------------------------------------------------- functions
    def emit(self) -> str:
        """The kernel function and its driver."""
        if not self.kernel.axes:
            body = self.pointwise_kernel()
        else:
            body = self.column_kernel() if self.columnwise() else self.row_kernel()
        header = f"/* {self.name}: {comment(self.label)} */"
        # A row kernel is never specialised for its call's constant range: GCC 12, seeing one
        # row, drops the row loop and with it the vectorization of ``omp simd reduction``.
        keep = "__attribute__((noipa)) " if self.kernel.axes else ""
        signature = (
            f"{keep}static int {self.name}(void* const* T, char* A, long begin, long end) {{"
        )
        return "\n".join(
            [
                header,
                signature,
                "  int err = 0;",
                *self.pointer_declarations(),
                *body,
                "  return err;",
                "}",
                self.driver(),
            ]
        )

    def open_loops(
        self, out: list[str], indent: str, block: int = 0, enter: list[str] | None = None
    ) -> tuple[str, list[str]]:
        """Open the nested inner loops, the innermost with ``#pragma omp simd``. With
        ``block``, the innermost loop runs in blocks of at most that many iterations, and
        ``enter`` runs before each block (before each run of the innermost loop when it is
        not longer than a block). Returns the innermost indentation and the closing lines,
        innermost first (code placed after the first one runs once per block)."""
        dims = self.domain.vector
        closers: list[str] = []
        for i, dim in enumerate(dims):
            first = "0"
            if i == len(dims) - 1:
                size = self.size_expr(dim.size)
                if block and (type(dim.size) is not int or dim.size > block):
                    out.append(f"{indent}for (long b_ = 0; b_ < {size}; b_ += {block}L) {{")
                    closers.append(f"{indent}}}")
                    indent += "  "
                    out.append(
                        f"{indent}long e_ = b_ + {block}L < {size} ? b_ + {block}L : {size};"
                    )
                    first, last = "b_", "e_"
                else:
                    last = size
                out.extend(f"{indent}{line}" for line in enter or [])
                out.append(f"{indent}#pragma omp simd")
            else:
                last = self.size_expr(dim.size)
            out.append(f"{indent}for (long l{i} = {first}; l{i} < {last}; ++l{i}) {{")
            closers.append(f"{indent}}}")
            indent += "  "
        return indent, closers[::-1]

    def full_body(self, targets: list[int], indent: str) -> list[str]:
        body: list[str] = []
        for k in self.needed(targets, Level.FULL):
            self.define(k, body, indent)
        return body

    def streaming(self) -> bool:
        """Large results go straight to memory (non-temporal stores: no read for ownership,
        no cache pollution) when every store is a contiguous f32 run of a gap-free window (a
        strided window, such as a pad's interior, leaves lines partly written: other kernels
        then read them back)."""
        if not self.module.stream_bytes or self.footprint() <= STREAM_FOOTPRINT:
            return False
        for slot, (_, view) in enumerate(self.kernel.stores):
            access = self.accesses[(slot, True)]
            if view.element_type is not et.f32 or self.domain.vector[0].strides[access.name] != 1:
                return False
            if not self.module.streamable(view.buffer) or not view.is_dense:
                return False
        return bool(self.kernel.stores)

    def footprint(self) -> int:
        """Bytes the loop's loads and stores touch (an operand read twice or broadcast
        once; 0 when a size is symbolic: such loops never stream)."""
        total = 0
        for view in {a.view for a in self.accesses.values()}:
            dims = [d for d, s in zip(view.shape, view.strides, strict=True) if not _zero(s)]
            sizes = [d for d in dims if type(d) is int]
            if len(sizes) < len(dims):
                return 0
            total += math.prod(sizes) * view.element_type.itemsize
        return total

    def pointwise_kernel(self) -> list[str]:
        """Range-split flat loop: rows × one vector dimension, entered mid-row."""
        stored = [k for k, _ in self.kernel.stores]
        length = self.domain.vector[0].size
        stream = self.streaming()
        lookup = None if stream else find_byte_lookup(self)
        if lookup is not None:
            return self.byte_lookup_kernel(lookup)
        hoisted = self.row_index_loads(stored)
        body = self.full_body(stored, "        " if stream else "      ")
        for slot, (k, view) in enumerate(self.kernel.stores):
            access = self.accesses[(slot, True)]
            value = dialect.store(view.element_type, self.var(k))
            if stream:
                body.append(f"        s{slot}[l0 - c_] = {value};")
            else:
                body.append(f"      {self.element(access, Level.FULL)} = {value};")
        pragma = self.flat_pragma()
        if stream:
            return self.streamed_loop(static(length), body, pragma, hoisted)
        return self.flat_loop(hoisted, pragma, body)

    def byte_lookup_kernel(self, lookup: ByteLookup) -> list[str]:
        """The flat loop of a kernel whose one store is a byte table lookup
        (``codegen/byte_lookup.py``): under ``OG_LUT256`` it stores the index bytes, then
        looks each row's up in place."""
        self.module.helper(LUT256_HELPER)
        store = self.accesses[(0, True)]
        table = lookup.table_lines(self)
        hoisted = self.row_index_loads([lookup.index]) + lookup.row_table_lines(self)
        body = self.full_body([lookup.index], "      ")
        body += lookup.store_lines(self, store, "      ")
        after = lookup.row_lines(self, store, "    ")
        return table + self.flat_loop(hoisted, self.flat_pragma(), body, after)

    def flat_pragma(self) -> str:
        """The clauses of a flat loop's ``omp simd``."""
        pragma = " reduction(|:err)" if self.checks else ""
        if self.short_bytes(self.domain.vector[0].size):
            pragma += " simdlen(16)"
        return pragma

    def flat_loop(
        self, hoisted: list[str], pragma: str, body: list[str], after: list[str] | None = None
    ) -> list[str]:
        """The range-split loop over rows around the vector loop's ``body``; ``after`` runs
        after each row's vector loop."""
        size = self.size_expr(self.domain.vector[0].size)
        out = [
            f"  long r_ = begin / {size}, i_ = begin - r_ * {size};",
            "  while (begin < end) {",
            f"    long n_ = {size} - i_;",
            "    if (n_ > end - begin) n_ = end - begin;",
            *self.row_offsets("r_"),
            *hoisted,
            f"    #pragma omp simd{pragma}",
            "    for (long l0 = i_; l0 < i_ + n_; ++l0) {",
            *body,
            "    }",
            *(after or []),
            "    begin += n_; i_ = 0; ++r_;",
            "  }",
        ]
        return out

    def short_bytes(self, length: Dim) -> bool:
        """Whether rows shorter than ``SHORT_ROWS`` touch 1-byte elements: GCC then picks 64
        lanes (one zmm of bytes) and a 32-lane epilogue, so a row of 16 or 49 (a quantized
        convolution's 4x4 or 7x7 plane) never enters a vector loop; ``simdlen(16)`` makes it
        16 (one zmm of f32)."""
        if not isinstance(length, int) or length >= SHORT_ROWS:
            return False
        return any(a.view.element_type.itemsize == 1 for a in self.accesses.values())

    def row_index_loads(self, targets: list[int]) -> list[str]:
        """Definitions, before the vector loop, of the gathers' index loads that do not move
        along it (an embedding's id, one per row), and of those gathers' index arithmetic
        (wrap, range check, clamp: :meth:`gather_expr`): the gathered elements are then one
        contiguous vector load, not a vector gather per element."""
        lines: list[str] = []
        self.row_lines, self.row_invariant = lines, set()
        for k in self.needed(targets, Level.FULL):
            node = self.kernel.nodes[k]
            if node.kind is not KKind.GATHER:
                continue
            for a in node.args:
                access = self.accesses.get((a, False))
                still = access is not None and all(
                    d.strides[access.name] == 0 for d in self.domain.vector
                )
                if still and a not in self.defined:
                    self.define(a, lines, "    ")
                if still:
                    self.row_invariant.add(a)
        if lines:
            lines.extend(prefetch_lines(self, targets))
        return lines  # gather_expr appends the hoisted index arithmetic to this list

    def gather_expr(self, node: KNode, out: list[str], indent: str) -> str:
        """A gather whose indices are all row-invariant computes its position once per row
        (in the lines :meth:`row_index_loads` returned)."""
        if self.row_lines is not None and node.args and self.row_invariant.issuperset(node.args):
            return super().gather_expr(node, self.row_lines, "    ")
        return super().gather_expr(node, out, indent)

    def streamed_loop(
        self, length: int, body: list[str], pragma: str, hoisted: list[str] | None = None
    ) -> list[str]:
        """The flat loop by blocks (``STREAM_BLOCKS``): compute into aligned stack buffers,
        then stream each buffer to its destination. Blocks end on multiples of the block's
        bytes in the first result's address (the first block of a range is shorter), so a
        result that does not start on a cache line (``np.zeros`` of 64 MiB starts 16 bytes
        past one) is still written in whole lines, not one line in four split between a
        plain and a streaming store at every block's edges (``STREAM_BLOCKS`` are powers of
        two)."""
        self.module.helper("stream_f32")
        block = STREAM_BLOCKS[self.module.vector_lanes]
        buffers = [
            f"      float s{slot}[{block}] __attribute__((aligned(64)));"
            for slot in range(len(self.kernel.stores))
        ]
        names = [self.accesses[(slot, True)].name for slot in range(len(self.kernel.stores))]
        flushes = [
            f"      og_stream_f32({name} + o_{name} + c_, s{slot}, e_ - c_);"
            for slot, name in enumerate(names)
        ]
        first = f"{names[0]} + o_{names[0]} + c_"
        return [
            f"  long r_ = begin / {length}L, i_ = begin - r_ * {length}L;",
            "  while (begin < end) {",
            f"    long n_ = {length}L - i_;",
            "    if (n_ > end - begin) n_ = end - begin;",
            *self.row_offsets("r_"),
            *(hoisted or []),
            "    for (long c_ = i_, e_; c_ < i_ + n_; c_ = e_) {",
            f"      e_ = c_ + {block}L - (long)(((unsigned long)({first}) >> 2) & {block - 1}UL);",
            "      if (e_ > i_ + n_) e_ = i_ + n_;",
            *buffers,
            f"      #pragma omp simd{pragma}",
            "      for (long l0 = c_; l0 < e_; ++l0) {",
            *body,
            "      }",
            *flushes,
            "    }",
            "    begin += n_; i_ = 0; ++r_;",
            "  }",
            "  __sync_synchronize();  /* streamed stores are visible before the job ends */",
        ]

    def row_kernel(self) -> list[str]:
        self.lines = ["  for (long r_ = begin; r_ < end; ++r_) {", *self.row_offsets("r_")]
        reductions = [n for n in self.kernel.nodes if n.kind is KKind.REDUCE]
        phases = [
            [n for n in reductions if n.phase == p] for p in sorted({n.phase for n in reductions})
        ]
        full_stores = [
            (s, k)
            for s, (k, _) in enumerate(self.kernel.stores)
            if self.kernel.nodes[k].level is Level.FULL
        ]
        length = self.domain.row_length
        self.reuse = plan_row_reuse(
            self.kernel, phases, full_stores, length if type(length) is int else 0
        )
        for number, phase in enumerate(phases):
            self.reduction_phase(phase, number)
        moved = {s for stores in self.reuse.early.values() for s, _ in stores}
        late = [(s, k) for s, k in full_stores if s not in moved]
        if late:
            self.store_loop(late)
        for slot, (k, view) in enumerate(self.kernel.stores):
            if self.kernel.nodes[k].level is Level.OUTER:
                for d in self.needed([k], Level.OUTER):
                    self.define(d, self.lines, "    ")
                access = self.accesses[(slot, True)]
                value = dialect.store(view.element_type, self.var(k))
                self.lines.append(f"    {self.element(access, Level.OUTER)} = {value};")
        self.lines.append("  }")
        return self.lines

    def pairwise_block(self) -> int:
        """Elements per block of this module's pairwise sums: :data:`PAIRWISE_BLOCK` with
        16-float vectors, :data:`PAIRWISE_BLOCK_8` with AVX2's 8-float ones."""
        return PAIRWISE_BLOCK if self.module.vector_lanes == 16 else PAIRWISE_BLOCK_8

    def columnwise(self) -> bool:
        """Whether the column schedule fits: one row axis walked contiguously (or not at all)
        by every access, one reduced axis walked by none contiguously and by some at a stride,
        one reduction phase short enough to need no pairwise cascade, no gathers, and no
        stored element that depends on a reduction."""
        domain, nodes = self.domain, self.kernel.nodes
        if self.module.symbolic or len(domain.rows) != 1 or len(domain.vector) != 1:
            return False
        row, inner = domain.rows[0], domain.vector[0]
        if any(type(s) is not int for d in (row, inner) for s in (d.size, *d.strides.values())):
            return False
        if any(s not in (0, 1) for s in row.strides.values()) or 1 in inner.strides.values():
            return False
        if all(s == 0 for s in inner.strides.values()) or 1 not in row.strides.values():
            return False
        reductions = [n for n in nodes if n.kind is KKind.REDUCE]
        if any(n.kind is KKind.GATHER for n in nodes) or len({n.phase for n in reductions}) != 1:
            return False
        # the column schedule sums each column in order, not in lanes: the same bound on every ISA
        if any(rule_pairwise(r) for r in reductions) and static(inner.size) > PAIRWISE_BLOCK:
            return False
        reduced = {r.index for r in reductions}
        for k, _ in self.kernel.stores:
            if nodes[k].level is Level.FULL and self._reaches(k, reduced):
                return False
        return not any(self._reaches(r.args[0], reduced) for r in reductions)

    def _reaches(self, k: int, targets: set[int]) -> bool:
        """Whether node ``k`` is one of ``targets`` or depends on one."""
        stack, seen = [k], set()
        while stack:
            k = stack.pop()
            if k in targets:
                return True
            if k not in seen:
                seen.add(k)
                stack.extend(self.kernel.nodes[k].args)
        return False

    def column_offsets(self, indent: str) -> list[str]:
        """Each access's offset at row ``r_`` (the one row axis: strides 0 or 1)."""
        strides = self.domain.rows[0].strides
        return [
            f"{indent}long o_{a.name} = {'r_' if strides[a.name] else '0'};"
            for a in self.accesses.values()
        ]

    def column_kernel(self) -> list[str]:
        """Blocks of rows; per position of the reduced axis, one vector loop across the block
        accumulates each reduction into a stack array and stores the full-level values; then
        one loop over the block finishes the reductions and stores the row values."""
        reductions = [n for n in self.kernel.nodes if n.kind is KKind.REDUCE]
        block, j = COLUMN_BLOCK, "r_ - c_"
        lines = [
            f"  for (long c_ = begin; c_ < end; c_ += {block}L) {{",
            f"    long e_ = c_ + {block}L < end ? c_ + {block}L : end;",
        ]
        starts = []
        for r in reductions:
            lines.append(f"    {dialect.compute_type(r.element_type)} s_a{r.index}[{block}];")
            starts.append(f"s_a{r.index}[{j}] = {self.identity(r)};")
            if self.tracks_nan(r):
                lines.append(f"    int s_n{r.index}[{block}];")
                starts.append(f"s_n{r.index}[{j}] = 0;")
        lines.append(f"    for (long r_ = c_; r_ < e_; ++r_) {{ {' '.join(starts)} }}")
        lines += self.column_accumulation(reductions, j)
        self.defined = set()
        lines += ["    for (long r_ = c_; r_ < e_; ++r_) {", *self.column_offsets("      ")]
        for r in reductions:
            ctype = dialect.compute_type(r.element_type)
            lines.append(f"      {ctype} a{r.index} = s_a{r.index}[{j}];")
            if self.tracks_nan(r):
                lines.append(f"      int n{r.index} = s_n{r.index}[{j}];")
        self.finish_reductions(reductions, lines)
        for slot, (k, view) in enumerate(self.kernel.stores):
            if self.kernel.nodes[k].level is Level.OUTER:
                for d in self.needed([k], Level.OUTER):
                    self.define(d, lines, "      ")
                access = self.accesses[(slot, True)]
                value = dialect.store(view.element_type, self.var(k))
                lines.append(f"      {self.element(access, Level.OUTER)} = {value};")
        return [*lines, "    }", "  }"]

    def column_accumulation(self, reductions: list[KNode], j: str) -> list[str]:
        """The column kernel's loop over the reduced axis: per position, one vector loop
        across the block (row ``r_``, slot ``j`` of the stack arrays) accumulating every
        reduction and storing the full-level values."""
        full = [(s, k) for s, (k, _) in enumerate(self.kernel.stores)]
        full = [(s, k) for s, k in full if self.kernel.nodes[k].level is Level.FULL]
        body: list[str] = []
        indent = "        "
        nodes = self.needed([r.args[0] for r in reductions] + [k for _, k in full], Level.FULL)
        self.define_outer_for(nodes, body, indent)
        for k in nodes:
            self.define(k, body, indent)
        for r in reductions:
            x = self.var(r.args[0])
            body.append(indent + self.combine(r, f"s_a{r.index}[{j}]", x))
            if self.tracks_nan(r):
                body.append(f"{indent}s_n{r.index}[{j}] |= ({x} != {x});")
        for slot, _ in full:
            access = self.accesses[(slot, True)]
            body.append(f"{indent}{self.element(access, Level.FULL)} = {self.store_value(slot)};")
        pragma = " reduction(|:err)" if any("err |=" in line for line in body) else ""
        length = self.size_expr(self.domain.vector[0].size)
        return [
            f"    for (long l0 = 0; l0 < {length}; ++l0) {{",
            f"      #pragma omp simd{pragma}",
            "      for (long r_ = c_; r_ < e_; ++r_) {",
            *self.column_offsets(indent),
            *body,
            "      }",
            "    }",
        ]

    # ------------------------------------------------------------- saved row values
    def flat_index(self) -> str:
        """The element's position in its row (the inner coordinates, row-major)."""
        index = "l0"
        for i, dim in enumerate(self.domain.vector[1:], start=1):
            index = f"({index}) * {self.size_expr(dim.size)} + l{i}"
        return index

    def saved_reads(self, targets: list[int]) -> list[int]:
        """The saved values that ``targets`` reach first (marked defined: the loop loads
        them with :meth:`load_saved` instead of recomputing them)."""
        found: list[int] = []
        seen: set[int] = set()
        stack = list(targets)
        while stack:
            k = stack.pop()
            node = self.kernel.nodes[k]
            if k in seen or k in self.defined or node.level is not Level.FULL:
                continue
            seen.add(k)
            if k in self.reuse.saved:
                found.append(k)
            else:
                stack.extend(node.args)
        self.defined.update(found)
        return sorted(found)

    def load_saved(self, saved: list[int], out: list[str], indent: str) -> None:
        for k in saved:
            ctype = dialect.compute_type(self.kernel.nodes[k].element_type)
            out.append(f"{indent}const {ctype} v{k} = w{k}[{self.flat_index()}];")

    def save_values(self, number: int, out: list[str], indent: str) -> None:
        """Save the costly values of phase ``number`` that later loops need (its loop has
        just defined them) into row buffers declared before the row loop's phases."""
        length = self.domain.row_length
        for k in self.reuse.candidates.get(number, []):
            if k in self.reuse.saved or k not in self.node_cost or type(length) is not int:
                continue
            cost = sum(self.node_cost.get(n, 0) for n in full_closure(self.kernel, [k]))
            if cost < SAVE_COST or self.reuse.budget < length:
                continue
            self.reuse.budget -= length
            self.reuse.saved.add(k)
            ctype = dialect.compute_type(self.kernel.nodes[k].element_type)
            self.lines.append(f"    {ctype} w{k}[{length}] __attribute__((aligned(64)));")
            out.append(f"{indent}w{k}[{self.flat_index()}] = v{k};")

    def store_lines(self, stores: list[tuple[int, int]], indent: str) -> list[str]:
        lines = []
        for slot, k in stores:
            view = self.kernel.stores[slot][1]
            access = self.accesses[(slot, True)]
            value = dialect.store(view.element_type, self.var(k))
            lines.append(f"{indent}{self.element(access, Level.FULL)} = {value};")
        return lines

    def reduction_phase(self, reductions: list[KNode], number: int = 0) -> None:
        early = self.reuse.early.get(number, [])
        targets = [n.args[0] for n in reductions] + [k for _, k in early]
        saved = self.saved_reads(targets)
        body_nodes = self.needed(targets, Level.FULL)
        self.define_outer_for(body_nodes, self.lines)
        clauses = self.declare_accumulators(reductions)
        pairwise = [r for r in reductions if rule_pairwise(r)]
        length = self.domain.row_length
        block = self.pairwise_block()
        cascade = bool(pairwise) and (type(length) is not int or length > block)
        phase = f"_{pairwise[0].index}" if pairwise else ""
        if cascade:
            self.lines.append(
                f"    int h{phase} = 0; long k{phase} = 0;  /* cascade height, blocks */"
            )
            self.lines += [
                f"    {dialect.compute_type(r.element_type)} c{r.index}[64];" for r in pairwise
            ]
        resets = [f"a{r.index} = {self.identity(r)};" for r in pairwise] if cascade else []
        body: list[str] = []
        indent, closers = self.open_loops(body, "    ", block if cascade else 0, resets)
        start = len(body)
        self.node_cost = {}
        self.load_saved(saved, body, indent)
        for k in body_nodes:
            self.define(k, body, indent)
        for r in reductions:
            rule = REDUCTIONS[type(r.op)]
            x = self.var(r.args[0])
            body.append(indent + rule.combine.format(acc=f"a{r.index}", x=x))
            if rule.propagates_nan and r.element_type.is_real:
                body.append(f"{indent}n{r.index} |= ({x} != {x});")
        body += self.store_lines(early, indent)
        self.save_values(number, body, indent)
        body.append(closers[0])
        if cascade:
            body += _cascade_push(pairwise, phase, closers[0][: closers[0].index("}")])
        body += closers[1:]
        if any("err |=" in line for line in body[start:]):
            clauses.append(" reduction(|:err)")
        pragma_at = next(i for i, line in enumerate(body) if "#pragma omp simd" in line)
        body[pragma_at] += "".join(clauses)
        self.lines.extend(body)
        if cascade:
            self.lines += _cascade_drain(pairwise, phase, [self.identity(r) for r in pairwise])
        self.forget_full()
        self.finish_reductions(reductions, self.lines)

    def declare_accumulators(self, reductions: list[KNode]) -> list[str]:
        """Declare each reduction's accumulator (and NaN flag); returns the simd clauses."""
        clauses = []
        for r in reductions:
            rule = REDUCTIONS[type(r.op)]
            acc_type = dialect.compute_type(r.element_type)
            self.lines.append(f"    {acc_type} a{r.index} = {self.identity(r)};")
            clauses.append(f" reduction({rule.omp}:a{r.index})")
            if self.tracks_nan(r):
                self.lines.append(f"    int n{r.index} = 0;")
                clauses.append(f" reduction(|:n{r.index})")
        return clauses

    def store_loop(self, stores: list[tuple[int, int]]) -> None:
        targets = [k for _, k in stores]
        saved = self.saved_reads(targets)
        self.define_outer_for(self.needed(targets, Level.FULL), self.lines)
        body: list[str] = []
        indent, closers = self.open_loops(body, "    ")
        start = len(body)
        self.load_saved(saved, body, indent)
        for k in self.needed(targets, Level.FULL):
            self.define(k, body, indent)
        body += self.store_lines(stores, indent)
        body += closers
        if any("err |=" in line for line in body[start:]):
            pragma_at = next(i for i, line in enumerate(body) if "#pragma omp simd" in line)
            body[pragma_at] += " reduction(|:err)"
        self.lines.extend(body)
        self.forget_full()

    # --------------------------------------------------------------------- driver
    def work(self) -> tuple[int, int]:
        """(units the driver splits, estimated cost of the whole kernel)."""
        rows, length = self.domain.static_rows, self.domain.static_length
        total = rows if self.kernel.axes else rows * length
        return total, rows * length * max(self.cost, 1)

    def size_expr(self, d: Dim) -> str:
        return self.module.dim(d)

    def driver(self) -> str:
        """``<name>_run``: the whole range, split between threads when the work is large."""
        if self.module.symbolic:
            return self.symbolic_driver()
        total, cost = self.work()
        lines = [f"static int {self.name}_run(void* const* T, char* A) {{"]
        threads = self.module.num_threads
        if total == 0:
            lines.append("  return 0;")
        elif threads > 1 and cost >= self.module.parallel_threshold and total >= 2:
            unit = max(cost // total, 1)
            grain = max(self.module.parallel_threshold // (2 * unit), 1)
            lines.append(f"  return og_parallel({self.name}, T, A, {total}L, {grain}L, {threads});")
            self.module.uses_pool = True
        else:
            lines.append(f"  return {self.name}(T, A, 0, {total}L);")
        lines.append("}")
        return "\n".join(lines)

    def symbolic_driver(self) -> str:
        """The driver of a kernel with symbolic sizes: the split is decided per call, as
        :meth:`driver` decides it at compile time."""
        rows, length = self.domain.num_rows, self.domain.row_length
        total = rows if self.kernel.axes else rows * length
        unit = (length if self.kernel.axes else 1) * max(self.cost, 1)
        threads = self.module.num_threads
        lines = [
            f"static int {self.name}_run(void* const* T, char* A) {{",
            f"  long total_ = {self.size_expr(total)};",
            "  if (total_ <= 0) return 0;",
        ]
        if threads > 1:
            threshold = self.module.parallel_threshold
            lines += [
                f"  long unit_ = {self.size_expr(unit)};",
                f"  if (total_ >= 2 && total_ * unit_ >= {threshold}L) {{",
                f"    long grain_ = {threshold}L / (2 * unit_);",
                f"    return og_parallel({self.name}, T, A, total_, grain_ > 0 ? grain_ : 1L,"
                f" {threads});",
                "  }",
            ]
            self.module.uses_pool = True
        lines += [f"  return {self.name}(T, A, 0, total_);", "}"]
        return "\n".join(lines)


def _zero(d: Dim) -> bool:
    return type(d) is int and d == 0


def rule_pairwise(node: KNode) -> bool:
    return REDUCTIONS[type(node.op)].pairwise and node.element_type.is_real


def _cascade_push(pairwise: list[KNode], phase: str, indent: str) -> list[str]:
    """After a block: add its partial sums to the cascade, a binary counter of partials of
    1, 2, 4, … blocks; equal-sized partials merge as they meet (pairwise summation)."""
    h, k = f"h{phase}", f"k{phase}"
    merges = " ".join(f"a{r.index} += c{r.index}[{h}];" for r in pairwise)
    pushes = " ".join(f"c{r.index}[{h}] = a{r.index};" for r in pairwise)
    return [
        f"{indent}for (long m_ = ++{k}; !(m_ & 1L); m_ >>= 1) {{ --{h}; {merges} }}",
        f"{indent}{pushes} ++{h};",
    ]


def _cascade_drain(pairwise: list[KNode], phase: str, identities: list[str]) -> list[str]:
    """The row's sums: the cascade's partials added from the smallest up (``identities``:
    each pairwise reduction's first accumulator value)."""
    h = f"h{phase}"
    resets = " ".join(f"a{r.index} = {i};" for r, i in zip(pairwise, identities, strict=True))
    adds = " ".join(f"a{r.index} += c{r.index}[{h}];" for r in pairwise)
    return [f"    {resets}", f"    while ({h} > 0) {{ --{h}; {adds} }}"]
