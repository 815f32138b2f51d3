"""One loop emitter for every target: a fused :class:`~opgraph.backends.fused.program.LoopKernel`
as code of a C-like :class:`~opgraph.backends.fused.dialect.Dialect`.

The kernel's domain is its full shape with the reduced axes moved last. Axes of size 1 are
dropped and neighbouring axes that every access walks contiguously are merged, so most
kernels become one flat loop, or rows × one inner loop. :class:`LoopEmitter` writes what
every target shares — the accesses and their strides, each node's value (loads, scalar ops
through ``SCALAR_OPS`` and the dialect, reductions' identities, combines and results), which
nodes a loop needs, run-time checks — and a target subclasses it with its parallel schedule
(the CPU's OpenMP-vectorized range functions in ``cpu/codegen/loops.py``, the GPU's
grid-stride and block-per-row kernels in ``gpu/cuda/loops.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from opgraph.backends.fused.dialect import Dialect
from opgraph.backends.fused.lowering import REDUCTIONS, SCALAR_OPS
from opgraph.backends.fused.program import KKind, KNode, Level, LoopKernel
from opgraph.backends.fused.views import Literal, View, static
from opgraph.core import element_type as et
from opgraph.core.dim import Dim as DimValue
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpgraphError
from opgraph.core.node import Node

EXPENSIVE = 8  # relative cost of a math call or helper, for the parallel decision


@dataclass
class Access:
    """A load or store through a pointer: per-domain-dimension strides."""

    name: str
    view: View
    level: Level
    strides: list[DimValue]
    store: bool


@dataclass
class Dim:
    size: DimValue
    inner: bool
    strides: dict[str, DimValue] = field(default_factory=dict)


@dataclass
class Domain:
    rows: list[Dim]
    vector: list[Dim]

    @property
    def num_rows(self) -> DimValue:
        return math.prod(d.size for d in self.rows)

    @property
    def row_length(self) -> DimValue:
        return math.prod(d.size for d in self.vector)

    @property
    def static_rows(self) -> int:
        """:attr:`num_rows` of a static kernel (targets without symbolic sizes)."""
        return static(self.num_rows)

    @property
    def static_length(self) -> int:
        """:attr:`row_length` of a static kernel (targets without symbolic sizes)."""
        return static(self.row_length)


def domain_strides(kernel: LoopKernel, view: View, level: Level) -> list[DimValue]:
    """Strides of ``view`` along the kernel's domain axes (reduced axes last)."""
    axes = kernel.axes
    kept = [i for i in range(len(kernel.shape)) if i not in axes]
    inner_zeros: list[DimValue] = [0] * len(axes)
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


# ------------------------------------------------------------------------- checks
@dataclass(frozen=True)
class Check:
    """A run-time check of a step: ``message`` about ``node`` when its bit is set."""

    node: Node | None
    message: str


def check_bit(checks: list[Check], node: Node | None, message: str, limit: int | None) -> int:
    """The bit of the check ``message`` about ``node`` in ``checks`` (added when new).

    Raises:
        OpgraphError: more than ``limit`` distinct checks.
    """
    key = Check(node, message)
    if key not in checks:
        if limit is not None and len(checks) >= limit:
            raise OpgraphError(f"a generated kernel needs more than {limit} run-time checks")
        checks.append(key)
    return checks.index(key)


class Uses(Protocol):
    """Where a target records the helpers and math functions its code calls."""

    def helper(self, name: str) -> None: ...

    def use_math(self, name: str, t: ElementType) -> None: ...


class KernelScalarContext:
    """:class:`~opgraph.backends.fused.lowering.ScalarContext` for one op inside one kernel,
    written in ``dialect``; a failed check becomes the dialect's ``flag`` statement, passed to
    ``emit``."""

    def __init__(
        self,
        dialect: Dialect,
        uses: Uses,
        checks: list[Check],
        check_limit: int | None,
        inputs: tuple[ElementType, ...],
        output: ElementType,
        node: Node | None,
        emit: Callable[[str], None],
        constants: tuple[bool | int | float | None, ...] = (),
    ) -> None:
        self.dialect = dialect
        self._constants = constants
        self.uses = uses
        self._checks = checks
        self._limit = check_limit
        self._inputs = inputs
        self._output = output
        self._node = node
        self._emit = emit
        self.calls = 0  # math calls and helpers used: a cost hint

    @property
    def inputs(self) -> tuple[ElementType, ...]:
        return self._inputs

    @property
    def output(self) -> ElementType:
        return self._output

    def math(self, name: str, *args: str) -> str:
        return self.math_in(name, self._output, *args)

    def math_in(self, name: str, t: ElementType, *args: str) -> str:
        self.uses.use_math(name, t)
        self.calls += name not in ("fabs", "sqrt")
        return self.dialect.math_call(name, t, *args)

    def literal(self, value: bool | int | float, t: ElementType | None = None) -> str:
        return self.dialect.literal(value, t or self._output)

    def constant(self, i: int) -> bool | int | float | None:
        return self._constants[i] if i < len(self._constants) else None

    def ctype(self, t: ElementType | None = None) -> str:
        return self.dialect.compute_type(t or self._output)

    def narrow(self, t: ElementType, expr: str) -> str:
        return self.dialect.narrow(t, expr)

    def helper(self, name: str) -> None:
        self.calls += 1
        self.uses.helper(name)

    def check(self, condition: str, message: str) -> None:
        bit = check_bit(self._checks, self._node, message, self._limit)
        self._emit(self.dialect.flag(condition, 1 << bit))


# ------------------------------------------------------------------------ emitter
class LoopEmitter:
    """What every target's emitter of one LoopKernel shares (see the module docstring).

    Args:
        kernel: the fused loop nest.
        name: the function's symbol.
        label: the graph nodes it computes (a comment, and error messages).
        dialect: the target's language.
        uses: where helpers and math functions in use are recorded.
        checks: the run-time checks of the step (shared with the step's other kernels).
        check_limit: the most distinct checks a kernel can report (None: no limit).
    """

    #: Suffix of integer constants in index arithmetic (``L``: long).
    index_suffix = ""

    def __init__(
        self,
        kernel: LoopKernel,
        name: str,
        label: str,
        dialect: Dialect,
        uses: Uses,
        checks: list[Check],
        check_limit: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.name = name
        self.label = label
        self.dialect = dialect
        self.uses = uses
        self.checks = checks
        self.check_limit = check_limit
        self.accesses: dict[tuple[int, bool], Access] = {}
        for node in kernel.nodes:
            if node.kind is KKind.LOAD and isinstance(node.operand, View):
                self._access(node.index, node.operand, node.level, store=False)
            elif node.kind is KKind.GATHER and isinstance(node.table, View):
                self._access(node.index, node.table, node.level, store=False)
        for slot, (k, view) in enumerate(kernel.stores):
            self._access(slot, view, kernel.nodes[k].level, store=True)
        self.domain = build_domain(kernel, list(self.accesses.values()))
        self.defined: set[int] = set()
        self.pending: list[str] = []
        self.cost = 0

    def _access(self, key: int, view: View, level: Level, store: bool) -> None:
        name = f"{'q' if store else 'p'}{key}"
        strides = domain_strides(self.kernel, view, level)
        self.accesses[(key, store)] = Access(name, view, level, strides, store)

    # ---------------------------------------------------------------------- indexing
    def size_expr(self, d: DimValue) -> str:
        """A size, stride or offset in index arithmetic (targets with symbolic sizes render
        expressions; this base renders ints only)."""
        if not isinstance(d, int):
            raise OpgraphError(f"{type(self).__name__} cannot render the symbolic size {d}")
        return f"{d}{self.index_suffix}"

    def element(self, a: Access, level: Level, extra: tuple[str, ...] = ()) -> str:
        """Access ``a``'s element at the current loop position (``o_<name>``: its row
        offset; ``l0, l1, …``: the inner coordinates), plus the ``extra`` offsets."""
        if level is Level.OUTER:
            return f"{a.name}[{' + '.join([f'o_{a.name}', *extra])}]"
        terms = [f"o_{a.name}", *extra]
        for i, dim in enumerate(self.domain.vector):
            stride = dim.strides[a.name]
            if stride == 1:
                terms.append(f"l{i}")
            elif not (type(stride) is int and stride == 0):
                terms.append(f"l{i} * {self.size_expr(stride)}")
        return f"{a.name}[{' + '.join(terms)}]"

    # ------------------------------------------------------------------- node values
    def source(self, k: int) -> int:
        """The node whose value node ``k`` is: ``k`` itself, or what its aliases name."""
        while self.kernel.nodes[k].kind is KKind.ALIAS:
            k = self.kernel.nodes[k].args[0]
        return k

    def var(self, k: int) -> str:
        return f"v{self.source(k)}"

    def define(self, k: int, out: list[str], indent: str, load: str | None = None) -> None:
        """Append the definition of node ``k`` (its arguments must be defined); ``load``
        overrides a view load's source."""
        node = self.kernel.nodes[k]
        self.defined.add(k)
        if node.kind is KKind.ALIAS:
            return
        ctype = self.dialect.compute_type(node.element_type)
        if node.kind is KKind.GATHER:
            expr = self.gather_expr(node, out, indent)
        elif node.kind is KKind.LOAD:
            expr = self.load_expr(node, load)
        else:
            expr = self.op_expr(node)
        out.append(f"{indent}const {ctype} v{k} = {expr};")
        out.extend(f"{indent}{line}" for line in self.pending)
        self.pending = []

    def load_expr(self, node: KNode, source: str | None = None) -> str:
        operand = node.operand
        if isinstance(operand, Literal):
            return self.dialect.literal(operand.value, operand.element_type)
        if source is None:
            source = self.element(self.accesses[(node.index, False)], node.level)
        return self.dialect.load(node.element_type, source)

    def gather_expr(self, node: KNode, out: list[str], indent: str) -> str:
        """The element a GATHER node reads; appends to ``out`` each index wrapped when
        negative, its range check (a failed check reads position 0 of the axis instead:
        never outside the table) and the clamped index ``c<k>_<j>``."""
        d = self.dialect
        wide, unsigned = d.compute_type(et.i64), d.compute_type(et.u64)
        extra = []
        for j, (arg, term) in enumerate(zip(node.args, node.terms, strict=True)):
            size = (
                d.literal(term.size, et.i64)
                if type(term.size) is int
                else self.size_expr(term.size)
            )
            g, c = f"g{node.index}_{j}", f"c{node.index}_{j}"
            out.append(f"{indent}const {wide} {g} = ({wide}){self.var(arg)};")
            out.append(f"{indent}const {wide} w{g} = {g} < 0 ? {g} + {size} : {g};")
            bad = f"({unsigned})w{g} >= ({unsigned}){size}"
            message = f"index out of range for {term.what} of size {term.size}"
            message += f" (valid: -{term.size}..{term.size - 1})"
            bit = check_bit(self.checks, node.source, message, self.check_limit)
            out.append(f"{indent}{d.flag(bad, 1 << bit)}")
            out.append(f"{indent}const {wide} {c} = {bad} ? 0 : w{g};")
            if not (type(term.stride) is int and term.stride == 0):
                extra.append(c if term.stride == 1 else f"{c} * {self.size_expr(term.stride)}")
        table = node.table
        if isinstance(table, Literal):
            return d.literal(table.value, table.element_type)
        if table is None or _zero(table.size) or any(_zero(t.size) for t in node.terms):
            return d.literal(0, node.element_type)  # every index is out of range: no read
        self.cost += 2
        access = self.accesses[(node.index, False)]
        read = d.load(node.element_type, self.element(access, node.level, tuple(extra)))
        sizes = [x for x in (table.size, *(t.size for t in node.terms)) if type(x) is not int]
        if not sizes:
            return read
        # a symbolic table or indexed axis may be empty at some binding: then no index is
        # valid (the check fails the run) and nothing may be read
        nonempty = " && ".join(f"{self.size_expr(x)} > 0" for x in sizes)
        return f"({nonempty} ? {read} : {d.literal(0, node.element_type)})"

    def op_expr(self, node: KNode) -> str:
        assert node.op is not None
        args = tuple(self.var(a) for a in node.args)
        inputs = tuple(self.kernel.nodes[a].element_type for a in node.args)
        ctx = KernelScalarContext(
            self.dialect,
            self.uses,
            self.checks,
            self.check_limit,
            inputs,
            node.element_type,
            node.source,
            self.pending.append,
            tuple(self.constant_of(a) for a in node.args),
        )
        expr = SCALAR_OPS[type(node.op)](node.op, args, ctx)
        self.cost += 1 + EXPENSIVE * ctx.calls
        return self.dialect.round_to(node.element_type, expr)

    def constant_of(self, k: int) -> bool | int | float | None:
        """The value of node ``k`` where it loads a literal (through aliases), else None."""
        node = self.kernel.nodes[self.source(k)]
        if node.kind is KKind.LOAD and isinstance(node.operand, Literal):
            return node.operand.value
        return None

    def store_value(self, slot: int) -> str:
        """The stored element of store ``slot``."""
        k, view = self.kernel.stores[slot]
        return self.dialect.store(view.element_type, self.var(k))

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

    def define_outer_for(self, full_nodes: list[int], out: list[str], indent: str = "    ") -> None:
        """Define the row values that the full-level nodes ``full_nodes`` read."""
        outer = [a for k in full_nodes for a in self.kernel.nodes[k].args]
        for k in self.needed(outer, Level.OUTER):
            self.define(k, out, indent)

    def forget_full(self) -> None:
        """Values of an inner loop do not outlive it: later loops recompute them."""
        self.defined = {k for k in self.defined if self.kernel.nodes[k].level is Level.OUTER}

    # -------------------------------------------------------------------- reductions
    def tracks_nan(self, node: KNode) -> bool:
        """A max/min of floats: a NaN flag beside the accumulator."""
        return REDUCTIONS[type(node.op)].propagates_nan and node.element_type.is_real

    def identity(self, node: KNode) -> str:
        """The reduction's identity, its accumulator's first value."""
        t = node.element_type
        return self.dialect.literal(REDUCTIONS[type(node.op)].identity(t), t)

    def combine(self, node: KNode, acc: str, x: str) -> str:
        """The statement accumulating ``x`` into ``acc`` (or merging two accumulators)."""
        return REDUCTIONS[type(node.op)].combine.format(acc=acc, x=x)

    def finish_reductions(self, reductions: list[KNode], out: list[str]) -> None:
        """Define each reduction's value from its accumulator (NaN when one was seen)."""
        for r in reductions:
            value = f"a{r.index}"
            if self.tracks_nan(r):
                value = f"(n{r.index} ? {self.dialect.literal(math.nan, r.element_type)} : {value})"
            ctype = self.dialect.compute_type(r.element_type)
            rounded = self.dialect.round_to(r.element_type, value)
            out.append(f"    const {ctype} v{r.index} = {rounded};")
            self.defined.add(r.index)


def _zero(d: DimValue) -> bool:
    """Whether ``d`` is 0 at every binding."""
    return type(d) is int and d == 0


def comment(text: str) -> str:
    """``text`` made safe inside a C comment, on one line."""
    return text.replace("*/", "* /").replace("\n", " ")[:2000]
