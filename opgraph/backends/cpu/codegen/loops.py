"""Generate the C of one loop kernel (see :class:`~opgraph.backends.fused.program.LoopKernel`).

The kernel's domain is its full shape with the reduced axes moved last. Axes of size 1 are
dropped and neighbouring axes that every access walks contiguously are merged, so most
kernels become one flat loop, or rows × one inner loop. Inner loops carry ``omp simd``, and
math calls vectorize through libmvec.

* A pointwise kernel is a function over a range ``[begin, end)`` of the flattened domain, so
  the parallel driver splits even a single long row between threads.
* A row kernel is a function over a range of rows; each row runs one inner loop per
  reduction phase (reductions of a phase share the loop), then one loop for the stored
  elementwise values. Values needed by several loops are recomputed (loads come from L1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.context import Check, CScalarContext, ModuleContext
from opgraph.backends.fused.lowering import REDUCTIONS, SCALAR_OPS
from opgraph.backends.fused.program import KKind, KNode, Level, LoopKernel
from opgraph.backends.fused.views import Literal, View
from opgraph.core import element_type as et

_EXPENSIVE = 8  # relative cost of a math call or helper, for the parallel decision
STREAM_BLOCK = 512  # elements computed into a stack buffer before they are streamed out


@dataclass
class Access:
    """A load or store through a pointer: per-domain-dimension strides."""

    name: str
    view: View
    level: Level
    strides: list[int]
    store: bool


@dataclass
class Dim:
    size: int
    inner: bool
    strides: dict[str, int] = field(default_factory=dict)


@dataclass
class Domain:
    rows: list[Dim]
    vector: list[Dim]

    @property
    def num_rows(self) -> int:
        return math.prod(d.size for d in self.rows)

    @property
    def row_length(self) -> int:
        return math.prod(d.size for d in self.vector)


def domain_strides(kernel: LoopKernel, view: View, level: Level) -> list[int]:
    """Strides of ``view`` along the kernel's domain axes (reduced axes last)."""
    axes = kernel.axes
    kept = [i for i in range(len(kernel.shape)) if i not in axes]
    inner_zeros = [0] * len(axes)
    if level is Level.FULL:
        return [view.strides[p] for p in kept + list(axes)]
    if len(view.shape) == len(kept):
        return list(view.strides) + inner_zeros
    return [view.strides[p] for p in kept] + inner_zeros


def build_domain(kernel: LoopKernel, accesses: list[Access]) -> Domain:
    """Drop size-1 axes and merge axes that every access walks contiguously."""
    axes = kernel.axes
    kept = [i for i in range(len(kernel.shape)) if i not in axes]
    order = kept + list(axes)
    merged: list[Dim] = []
    for position, axis in enumerate(order):
        size = kernel.shape[axis]
        inner = axis in axes
        if size == 1:
            continue
        strides = {a.name: a.strides[position] for a in accesses}
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.inner == inner
            and all(last.strides[n] == strides[n] * size for n in strides)
        ):
            last.size *= size
            last.strides = strides
            continue
        merged.append(Dim(size, inner, strides))
    if not axes:  # pointwise: the last axis is the vector loop
        vector = merged[-1:] or [Dim(1, False, {a.name: 0 for a in accesses})]
        return Domain(merged[:-1], vector)
    rows = [d for d in merged if not d.inner]
    vector = [d for d in merged if d.inner] or [Dim(1, True, {a.name: 0 for a in accesses})]
    return Domain(rows, vector)


class LoopEmitter:
    """Emits ``static int <name>(T, A, begin, end)`` and its driver ``<name>_run(T, A)``."""

    def __init__(
        self,
        kernel: LoopKernel,
        name: str,
        module: ModuleContext,
        label: str,
        checks: list[Check] | None = None,
    ) -> None:
        self.kernel = kernel
        self.name = name
        self.module = module
        self.label = label
        self.checks: list[Check] = checks if checks is not None else []
        self.accesses: dict[tuple[int, bool], Access] = {}
        self.cost = 0
        self._collect_accesses()
        self.domain = build_domain(kernel, list(self.accesses.values()))
        self.defined: set[int] = set()
        self.lines: list[str] = []
        self.pending: list[str] = []

    # ------------------------------------------------------------------ accesses
    def _collect_accesses(self) -> None:
        for node in self.kernel.nodes:
            if node.kind is KKind.LOAD and isinstance(node.operand, View):
                self._access(node.index, node.operand, node.level, store=False)
        for slot, (k, view) in enumerate(self.kernel.stores):
            self._access(slot, view, self.kernel.nodes[k].level, store=True)

    def _access(self, key: int, view: View, level: Level, store: bool) -> None:
        name = f"{'q' if store else 'p'}{key}"
        strides = domain_strides(self.kernel, view, level)
        self.accesses[(key, store)] = Access(name, view, level, strides, store)

    def pointer_declarations(self) -> list[str]:
        lines = []
        for a in self.accesses.values():
            t = dialect.storage_type(a.view.element_type)
            const = "" if a.store else "const "
            base = self.module.base(a.view.buffer)
            lines.append(
                f"  {const}{t}* restrict {a.name} = ({const}{t}*)({base}) + {a.view.offset}L;"
            )
        return lines

    # ------------------------------------------------------------------- indexing
    def row_offsets(self, row: str) -> list[str]:
        """Decompose row number ``row`` and compute every access's row offset."""
        lines = [f"    long t_ = {row};"]
        names = []
        for i, dim in reversed(list(enumerate(self.domain.rows))):
            lines.append(f"    long x{i} = t_ % {dim.size}L; t_ /= {dim.size}L;")
            names.append((i, dim))
        lines.append("    (void)t_;")
        for a in self.accesses.values():
            terms = [f"x{i} * {d.strides[a.name]}L" for i, d in names if d.strides[a.name]]
            lines.append(f"    long o_{a.name} = {' + '.join(terms) or '0'};")
        return lines

    def element(self, a: Access, level: Level) -> str:
        """The element of access ``a`` at the current loop position."""
        if level is Level.OUTER:
            return f"{a.name}[o_{a.name}]"
        terms = [f"o_{a.name}"]
        for i, dim in enumerate(self.domain.vector):
            stride = dim.strides[a.name]
            if stride == 1:
                terms.append(f"l{i}")
            elif stride:
                terms.append(f"l{i} * {stride}L")
        return f"{a.name}[{' + '.join(terms)}]"

    # ---------------------------------------------------------------- node values
    def var(self, k: int) -> str:
        node = self.kernel.nodes[k]
        if node.kind is KKind.ALIAS:
            return self.var(node.args[0])
        return f"v{k}"

    def define(self, k: int, out: list[str], indent: str) -> None:
        """Append the definition of node ``k`` (its arguments must be defined)."""
        node = self.kernel.nodes[k]
        self.defined.add(k)
        if node.kind is KKind.ALIAS:
            return
        ctype = dialect.compute_type(node.element_type)
        expr = self.load_expr(node) if node.kind is KKind.LOAD else self.op_expr(node)
        out.append(f"{indent}const {ctype} v{k} = {expr};")
        out.extend(f"{indent}{line}" for line in self.pending)
        self.pending = []

    def load_expr(self, node: KNode) -> str:
        operand = node.operand
        if isinstance(operand, Literal):
            return dialect.literal(operand.value, operand.element_type)
        access = self.accesses[(node.index, False)]
        return dialect.load(node.element_type, self.element(access, node.level))

    def op_expr(self, node: KNode) -> str:
        assert node.op is not None
        args = tuple(self.var(a) for a in node.args)
        inputs = tuple(self.kernel.nodes[a].element_type for a in node.args)
        ctx = CScalarContext(
            self.module, inputs, node.element_type, self.checks, node.source, self.pending.append
        )
        expr = SCALAR_OPS[type(node.op)](node.op, args, ctx)
        self.cost += 1 + _EXPENSIVE * ctx.calls
        return dialect.round_to(node.element_type, expr)

    def needed(self, targets: list[int], level: Level) -> list[int]:
        """Undefined nodes at ``level`` that ``targets`` need, in topological order."""
        found: set[int] = set()
        stack = list(targets)
        while stack:
            k = stack.pop()
            node = self.kernel.nodes[k]
            if k in found or k in self.defined or node.level is not level:
                continue
            if node.kind is KKind.REDUCE and level is Level.OUTER:
                continue  # defined by its phase
            found.add(k)
            stack.extend(node.args)
        return sorted(found)

    def define_outer_for(self, full_nodes: list[int], indent: str) -> None:
        outer = [a for k in full_nodes for a in self.kernel.nodes[k].args]
        for k in self.needed(outer, Level.OUTER):
            self.define(k, self.lines, indent)

    # ----------------------------------------------------------------- functions
    def emit(self) -> str:
        """The kernel function and its driver."""
        body = self.row_kernel() if self.kernel.axes else self.pointwise_kernel()
        header = f"/* {self.name}: {_comment(self.label)} */"
        signature = f"static int {self.name}(void* const* T, char* A, long begin, long end) {{"
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

    def vector_loops(self, out: list[str], indent: str, pragma: str) -> str:
        """Open the nested inner loops; returns the innermost indentation."""
        dims = self.domain.vector
        for i, dim in enumerate(dims):
            if i == len(dims) - 1:
                out.append(f"{indent}#pragma omp simd{pragma}")
            out.append(f"{indent}for (long l{i} = 0; l{i} < {dim.size}L; ++l{i}) {{")
            indent += "  "
        return indent

    def close_loops(self, out: list[str], indent: str) -> None:
        for _ in self.domain.vector:
            indent = indent[:-2]
            out.append(f"{indent}}}")

    def full_body(self, targets: list[int], indent: str) -> list[str]:
        body: list[str] = []
        for k in self.needed(targets, Level.FULL):
            self.define(k, body, indent)
        return body

    def streaming(self) -> bool:
        """Large results go straight to memory (non-temporal stores: no read for ownership,
        no cache pollution) when every store is a contiguous f32 run."""
        if not self.module.stream_bytes:
            return False
        for slot, (_, view) in enumerate(self.kernel.stores):
            access = self.accesses[(slot, True)]
            if view.element_type is not et.f32 or self.domain.vector[0].strides[access.name] != 1:
                return False
            if not self.module.streamable(view.buffer):
                return False
        return bool(self.kernel.stores)

    def pointwise_kernel(self) -> list[str]:
        """Range-split flat loop: rows × one vector dimension, entered mid-row."""
        stored = [k for k, _ in self.kernel.stores]
        length = self.domain.vector[0].size
        stream = self.streaming()
        body = self.full_body(stored, "        " if stream else "      ")
        for slot, (k, view) in enumerate(self.kernel.stores):
            access = self.accesses[(slot, True)]
            value = dialect.store(view.element_type, self.var(k))
            if stream:
                body.append(f"        s{slot}[l0 - c_] = {value};")
            else:
                body.append(f"      {self.element(access, Level.FULL)} = {value};")
        pragma = " reduction(|:err)" if self.checks else ""
        if stream:
            return self.streamed_loop(length, body, pragma)
        out = [
            f"  long r_ = begin / {length}L, i_ = begin - r_ * {length}L;",
            "  while (begin < end) {",
            f"    long n_ = {length}L - i_;",
            "    if (n_ > end - begin) n_ = end - begin;",
            *self.row_offsets("r_"),
            f"    #pragma omp simd{pragma}",
            "    for (long l0 = i_; l0 < i_ + n_; ++l0) {",
            *body,
            "    }",
            "    begin += n_; i_ = 0; ++r_;",
            "  }",
        ]
        return out

    def streamed_loop(self, length: int, body: list[str], pragma: str) -> list[str]:
        """The flat loop by blocks of ``STREAM_BLOCK``: compute into aligned stack buffers,
        then stream each buffer to its destination."""
        self.module.helper("stream_f32")
        buffers = [
            f"      float s{slot}[{STREAM_BLOCK}] __attribute__((aligned(64)));"
            for slot in range(len(self.kernel.stores))
        ]
        names = [self.accesses[(slot, True)].name for slot in range(len(self.kernel.stores))]
        flushes = [
            f"      og_stream_f32({name} + o_{name} + c_, s{slot}, e_ - c_);"
            for slot, name in enumerate(names)
        ]
        return [
            f"  long r_ = begin / {length}L, i_ = begin - r_ * {length}L;",
            "  while (begin < end) {",
            f"    long n_ = {length}L - i_;",
            "    if (n_ > end - begin) n_ = end - begin;",
            *self.row_offsets("r_"),
            f"    for (long c_ = i_; c_ < i_ + n_; c_ += {STREAM_BLOCK}L) {{",
            f"      long e_ = c_ + {STREAM_BLOCK}L < i_ + n_ ? c_ + {STREAM_BLOCK}L : i_ + n_;",
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
        for phase in sorted({n.phase for n in reductions}):
            self.reduction_phase([n for n in reductions if n.phase == phase])
        full_stores = [
            (s, k)
            for s, (k, _) in enumerate(self.kernel.stores)
            if self.kernel.nodes[k].level is Level.FULL
        ]
        if full_stores:
            self.store_loop(full_stores)
        for slot, (k, view) in enumerate(self.kernel.stores):
            if self.kernel.nodes[k].level is Level.OUTER:
                for d in self.needed([k], Level.OUTER):
                    self.define(d, self.lines, "    ")
                access = self.accesses[(slot, True)]
                value = dialect.store(view.element_type, self.var(k))
                self.lines.append(f"    {self.element(access, Level.OUTER)} = {value};")
        self.lines.append("  }")
        return self.lines

    def reduction_phase(self, reductions: list[KNode]) -> None:
        inputs = [n.args[0] for n in reductions]
        body_nodes = self.needed(inputs, Level.FULL)
        self.define_outer_for(body_nodes, "    ")
        clauses = []
        for r in reductions:
            rule = REDUCTIONS[type(r.op)]
            acc_type = dialect.compute_type(r.element_type)
            self.lines.append(f"    {acc_type} a{r.index} = {rule.identity(r.element_type)};")
            clauses.append(f" reduction({rule.omp}:a{r.index})")
            if rule.propagates_nan and r.element_type.is_real:
                self.lines.append(f"    int n{r.index} = 0;")
                clauses.append(f" reduction(|:n{r.index})")
        body: list[str] = []
        indent = self.vector_loops(body, "    ", "")
        start = len(body)
        for k in body_nodes:
            self.define(k, body, indent)
        for r in reductions:
            rule = REDUCTIONS[type(r.op)]
            x = self.var(r.args[0])
            body.append(indent + rule.combine.format(acc=f"a{r.index}", x=x))
            if rule.propagates_nan and r.element_type.is_real:
                body.append(f"{indent}n{r.index} |= ({x} != {x});")
        self.close_loops(body, indent)
        if any("err |=" in line for line in body[start:]):
            clauses.append(" reduction(|:err)")
        pragma_at = next(i for i, line in enumerate(body) if "#pragma omp simd" in line)
        body[pragma_at] += "".join(clauses)
        self.lines.extend(body)
        self.forget_full()
        for r in reductions:
            value = f"a{r.index}"
            if rule_nan(r):
                value = f"(n{r.index} ? {dialect.literal(math.nan, r.element_type)} : {value})"
            ctype = dialect.compute_type(r.element_type)
            rounded = dialect.round_to(r.element_type, value)
            self.lines.append(f"    const {ctype} v{r.index} = {rounded};")
            self.defined.add(r.index)

    def store_loop(self, stores: list[tuple[int, int]]) -> None:
        targets = [k for _, k in stores]
        self.define_outer_for(self.needed(targets, Level.FULL), "    ")
        body: list[str] = []
        indent = self.vector_loops(body, "    ", "")
        start = len(body)
        for k in self.needed(targets, Level.FULL):
            self.define(k, body, indent)
        for slot, k in stores:
            view = self.kernel.stores[slot][1]
            access = self.accesses[(slot, True)]
            value = dialect.store(view.element_type, self.var(k))
            body.append(f"{indent}{self.element(access, Level.FULL)} = {value};")
        self.close_loops(body, indent)
        if any("err |=" in line for line in body[start:]):
            pragma_at = next(i for i, line in enumerate(body) if "#pragma omp simd" in line)
            body[pragma_at] += " reduction(|:err)"
        self.lines.extend(body)
        self.forget_full()

    def forget_full(self) -> None:
        """Values of an inner loop do not outlive it: later loops recompute them."""
        self.defined = {k for k in self.defined if self.kernel.nodes[k].level is Level.OUTER}

    # --------------------------------------------------------------------- driver
    def work(self) -> tuple[int, int]:
        """(units the driver splits, estimated cost of the whole kernel)."""
        rows, length = self.domain.num_rows, self.domain.row_length
        total = rows if self.kernel.axes else rows * length
        return total, rows * length * max(self.cost, 1)

    def driver(self) -> str:
        """``<name>_run``: the whole range, split between threads when the work is large."""
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


def rule_nan(node: KNode) -> bool:
    return REDUCTIONS[type(node.op)].propagates_nan and node.element_type.is_real


def _comment(text: str) -> str:
    return text.replace("*/", "* /").replace("\n", " ")[:2000]
