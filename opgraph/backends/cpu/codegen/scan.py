"""Generate the C of scan steps (CumSum, :class:`~opgraph.backends.fused.program.ScanStep`).

The data is (outer, n, inner) around the summed axis. A unit is one outer index and one block
of up to :data:`LANES` inner positions: the block's running sums live in a stack array, and
each step along the axis adds a row of the block in a vector loop (inner positions are
independent). Along the axis the sums are sequential, in the reference's order, so every
result equals INTERPRETER's bit for bit (numpy's ``cumsum`` is sequential too); f16 and bf16
accumulate in f32 and round once per stored value, integers wrap. A single long axis
(``inner == 1``) is one sequential chain: it runs on one thread.
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.context import ModuleContext
from opgraph.backends.fused.program import ScanStep
from opgraph.backends.fused.views import static_all

#: Inner positions per unit: the running sums of a block stay in L1 (1 KiB of f32).
LANES = 256


class ScanEmitter:
    """``static int <name>(T, A, lo, hi)`` over units of (outer index, block of lanes)."""

    def __init__(self, step: ScanStep, name: str, module: ModuleContext) -> None:
        assert step.x is not None and step.out is not None
        self.step, self.name, self.module = step, name, module
        self.x, self.out = step.x, step.out

    def emit(self) -> str:
        outer, n, inner = static_all(self.x.shape)  # static: no symbolic lowering
        lanes = min(inner, LANES)
        blocks = -(-inner // lanes)
        s = self.step
        t = self.x.element_type
        st, ct = dialect.storage_type(t), dialect.compute_type(t)
        xs = self.x.strides
        base = self.module.base
        order = (
            f"for (long k = {n - 1}L; k >= 0; --k)"
            if s.reverse
            else f"for (long k = 0; k < {n}L; ++k)"
        )
        element = dialect.load(t, f"x[k * {xs[1]}L + l * {xs[2]}L]")
        stored = f"y[k * {inner}L + l] = {dialect.store(t, 'acc[l]')};"
        add = f"acc[l] = ({ct})(acc[l] + {element});"
        body = [stored, add] if s.exclusive else [add, stored]
        lines = [
            f"/* {self.name}: {s.label.replace('*/', '* /')} */",
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            f"  const {st}* x0 = (const {st}*)({base(self.x.buffer)}) + {self.x.offset}L;",
            f"  {st}* y0 = ({st}*)({base(self.out.buffer)}) + {self.out.offset}L;",
            "  for (long u = lo; u < hi; ++u) {",
            f"    const long o = u / {blocks}L, b = (u % {blocks}L) * {lanes}L;",
            f"    const long m = {inner}L - b < {lanes}L ? {inner}L - b : {lanes}L;",
            f"    const {st}* x = x0 + o * {xs[0]}L + b * {xs[2]}L;",
            f"    {st}* y = y0 + o * {n * inner}L + b;",
            f"    {ct} acc[{lanes}];",
            f"    for (long l = 0; l < m; ++l) acc[l] = {dialect.literal(0, t)};",
            f"    {order} {{",
            "      #pragma omp simd",
            "      for (long l = 0; l < m; ++l) {",
            *(f"        {line}" for line in body),
            "      }",
            "    }",
            "  }",
            "  return 0;",
            "}",
            self.driver(outer * blocks, outer * n * inner),
        ]
        return "\n".join(lines)

    def driver(self, units: int, work: int) -> str:
        threads = self.module.num_threads
        if units > 1 and threads > 1 and work >= self.module.parallel_threshold:
            self.module.uses_pool = True
            call = f"og_parallel({self.name}, T, A, {units}L, 1L, {threads})"
        else:
            call = f"{self.name}(T, A, 0, {units}L)"
        return f"static int {self.name}_run(void* const* T, char* A) {{\n  return {call};\n}}"
