"""Generate the C of scatter steps (ScatterElements, ScatterND:
:class:`~opgraph.backends.fused.indexed.ScatterStep`).

The data is copied into the dense output (skipped at run time when the memory plan gave the
output the data's own buffer), then the updates are combined in one after the other in
row-major order, as the reference does: with duplicates the last write wins, and reductions
accumulate in that order. 16-bit floats under a reduction accumulate in an f32 copy of the
output and round once at the end (the reference widens the same way). Each index is wrapped
when negative and checked before its write: an index out of range stops the step with an
``ExecutionError`` naming the node (nothing is written outside the output). The stores run
on one thread (their order is the semantics).
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.fused.indexed import ScatterStep
from opgraph.backends.fused.loops import check_bit
from opgraph.backends.fused.views import Literal, Operand, View, row_major_strides, static_all
from opgraph.core.dim import Dim
from opgraph.core.element_type import ElementType
from opgraph.ops.indexing import ScatterReduction


def nest(shape: tuple[int, ...], names: list[str], indent: str) -> tuple[list[str], str]:
    """``for`` headers over ``shape`` (one variable per axis, named ``names``) and the
    indentation of their body."""
    lines = []
    for d, (n, v) in enumerate(zip(shape, names, strict=True)):
        lines.append(f"{indent}{'  ' * d}for (long {v} = 0; {v} < {n}L; ++{v})")
    return lines, indent + "  " * len(shape)


def position(offset: int, strides: tuple[Dim, ...], names: list[str]) -> str:
    """The element offset ``offset + sum(name * stride)`` (scatters run on static Programs
    only: they are not in ``SYMBOLIC_STEP_OPS``)."""
    terms = [f"{v} * {s}L" for v, s in zip(names, static_all(strides), strict=True) if s]
    return " + ".join([f"{offset}L", *terms])


class ScatterEmitter:
    """``static int <name>(T, A, lo, hi)``: the copy, then the indexed stores."""

    def __init__(self, step: ScatterStep, name: str, module: ModuleContext, checks: list[Check]):
        assert step.out is not None and step.index is not None
        assert step.data is not None and step.updates is not None
        self.step, self.name, self.module, self.checks = step, name, module, checks
        self.out: View = step.out
        self.t: ElementType = step.out.element_type
        self.wide = step.reduction is not ScatterReduction.NONE and self.t in (
            dialect.C.narrow_types
        )

    def emit(self) -> str:
        s, t = self.step, self.t
        st = dialect.storage_type(t)
        base = self.module.base
        size = self.out.size
        lines = [
            f"/* {self.name}: {s.label.replace('*/', '* /')} */",
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  (void)lo; (void)hi;",
            f"  {st}* y = ({st}*)({base(self.out.buffer)}) + {self.out.offset}L;",
            *self.copy(),
        ]
        if self.wide:
            lines += [
                f"  float* w = (float*)__builtin_malloc({size}UL * sizeof(float));",
                f"  if (!w) return {self.bit(f'could not allocate {4 * size} bytes')};",
                f"  for (long i = 0; i < {size}L; ++i) w[i] = {dialect.load(t, 'y[i]')};",
            ]
        lines += self.stores()
        if self.wide:
            lines += [
                f"  for (long i = 0; i < {size}L; ++i) y[i] = {dialect.store(t, 'w[i]')};",
                "  __builtin_free(w);",
            ]
        lines += [
            "  return 0;",
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            f"  return {self.name}(T, A, 0, 1);",
            "}",
        ]
        return "\n".join(lines)

    def bit(self, message: str) -> int:
        return 1 << check_bit(self.checks, self.step.node, message, 16)

    def copy(self) -> list[str]:
        """``y = data``: a block copy (none when the plan put ``y`` on the data itself), a
        strided copy, or a fill."""
        data, t = self.step.data, self.t
        st = dialect.storage_type(t)
        size = self.out.size
        if isinstance(data, Literal):
            value = dialect.store(t, dialect.literal(data.value, t))
            return [f"  for (long i = 0; i < {size}L; ++i) y[i] = {value};"]
        assert isinstance(data, View)
        source = f"(const {st}*)({self.module.base(data.buffer)}) + {data.offset}L"
        if data.is_dense:
            return [
                f"  const {st}* d = {source};",
                f"  if ((const void*)d != (const void*)y) "
                f"__builtin_memcpy(y, d, {size * t.itemsize}UL);",
            ]
        names = [f"i{a}" for a in range(len(data.shape))]
        loops, inner = nest(static_all(data.shape), names, "  ")  # static: no symbolic lowering
        dense = row_major_strides(data.shape)
        return [
            f"  const {st}* d = {source};",
            *loops,
            f"{inner}y[{position(0, dense, names)}] = d[{position(0, data.strides, names)}];",
        ]

    def stores(self) -> list[str]:
        s = self.step
        assert s.index is not None and s.updates is not None
        ist = dialect.storage_type(s.index.element_type)
        base = self.module.base
        lines = [f"  const {ist}* ix = (const {ist}*)({base(s.index.buffer)}) + {s.index.offset}L;"]
        if isinstance(s.updates, View):
            st = dialect.storage_type(self.t)
            u = s.updates
            lines.append(f"  const {st}* up = (const {st}*)({base(u.buffer)}) + {u.offset}L;")
        if s.axis >= 0:
            return lines + self.elements()
        return lines + self.tuples()

    def wrapped(self, index: str, axis: int, indent: str) -> list[str]:
        """``w<axis>``: the index at ``index`` wrapped and checked against ``axis``."""
        n = self.out.shape[axis]
        bit = self.bit(f"index out of range for axis {axis} of size {n} (valid: -{n}..{n - 1})")
        g, w = f"g{axis}", f"w{axis}"
        return [
            f"{indent}const long {g} = (long)ix[{index}];",
            f"{indent}const long {w} = {g} < 0 ? {g} + {n}L : {g};",
            f"{indent}if ((unsigned long){w} >= {n}UL) {{ {self.release()}return {bit}; }}",
        ]

    def release(self) -> str:
        return "__builtin_free(w); " if self.wide else ""

    def elements(self) -> list[str]:
        """ScatterElements: the update at ``i`` goes to ``i`` with its axis replaced by the
        index at ``i``."""
        s = self.step
        assert s.index is not None and s.updates is not None
        shape, axis = (
            static_all(s.index.shape),
            s.axis,
        )  # static: no symbolic lowering
        names = [f"i{a}" for a in range(len(shape))]
        loops, inner = nest(shape, names, "  ")
        out_strides = row_major_strides(self.out.shape)
        pairs = enumerate(zip(names, out_strides, strict=True))
        target = " + ".join(["0L", *(f"{v} * {o}L" for a, (v, o) in pairs if a != axis)])
        body = [
            *self.wrapped(position(0, s.index.strides, names), axis, inner),
            f"{inner}const long at = {target} + w{axis} * {out_strides[axis]}L;",
            *self.combine("at", self.update(s.updates, names), inner),
        ]
        return [*loops, f"{inner[:-2]}{{", *body, f"{inner[:-2]}}}"] if shape else body

    def tuples(self) -> list[str]:
        """ScatterND: each coordinate tuple of the index's last axis addresses a slice."""
        s = self.step
        assert s.index is not None and s.updates is not None
        k = s.index.shape[-1]
        outer = s.index.shape[:-1]
        names = [f"j{a}" for a in range(len(outer))]
        loops, inner = nest(static_all(outer), names, "  ")
        out_strides = row_major_strides(self.out.shape)
        body: list[str] = []
        for c in range(k):
            at = position(0, s.index.strides[:-1], names)
            body += self.wrapped(f"{at} + {c * s.index.strides[-1]}L", c, inner)
        start = " + ".join(f"w{c} * {out_strides[c]}L" for c in range(k))
        body.append(f"{inner}const long start = {start};")
        rest = self.out.shape[k:]
        slice_names = [f"r{a}" for a in range(len(rest))]
        slice_loops, deepest = nest(static_all(rest), slice_names, inner)
        at = f"start + {position(0, out_strides[k:], slice_names)}"
        update = self.update(s.updates, names + slice_names)
        combine = self.combine(at, update, deepest)
        if rest:
            combine = [*slice_loops, f"{deepest[:-2]}{{", *combine, f"{deepest[:-2]}}}"]
        body += combine
        return [*loops, f"{inner[:-2]}{{", *body, f"{inner[:-2]}}}"] if outer else body

    def update(self, updates: Operand, names: list[str]) -> str:
        """The storage element of the update at ``names`` (the updates' axes)."""
        if isinstance(updates, Literal):
            return dialect.store(self.t, dialect.literal(updates.value, self.t))
        return f"up[{position(0, updates.strides, names)}]"

    def combine(self, at: str, update: str, indent: str) -> list[str]:
        """Combine the stored update ``update`` into element ``at`` of the output."""
        t, reduction = self.t, self.step.reduction
        if reduction is ScatterReduction.NONE:
            return [f"{indent}y[{at}] = {update};"]
        ct = dialect.compute_type(t)
        cell = f"w[{at}]" if self.wide else f"y[{at}]"
        u = dialect.load(t, update)
        lines = [f"{indent}{{ const {ct} u = {u}; const {ct} a = {cell};"]
        nan = t.is_real
        value = {
            ScatterReduction.ADD: "a + u",
            ScatterReduction.MUL: "a * u",
            ScatterReduction.MAX: "(u > a || u != u) ? u : a" if nan else "u > a ? u : a",
            ScatterReduction.MIN: "(u < a || u != u) ? u : a" if nan else "u < a ? u : a",
        }[reduction]
        if self.wide:
            lines.append(f"{indent}  {cell} = (float)({value}); }}")
        else:
            lines.append(f"{indent}  {cell} = ({dialect.storage_type(t)})({value}); }}")
        return lines
