"""The C of a GEMM step whose sizes are symbolic (``docs/dynamic-shapes.md``, "Backends").

The same products as :mod:`~opgraph.backends.cpu.codegen.blas` (OpenBLAS ``sgemm``/``dgemm``,
or the panel GEMM for a constant f32 matrix repacked at compile time), with every decision
that :class:`~opgraph.backends.cpu.codegen.blas.GemmEmitter` takes from the sizes taken in C
per call instead: whether to split between threads, into how many blocks, along rows or
columns. ``M``, ``N``, ``K`` and the batch offsets are expressions of the call's symbol
values (``codegen/dims.py``). Integer products and symbolic batches are fallback steps (see
``fused/lowering/linalg.py``), so only BLAS types and the panel GEMM reach here.
"""

from __future__ import annotations

import math

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.blas import BLOCK, PARALLEL_MACS, split_by_columns_c
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.fused.lowering.linalg import blas_layout
from opgraph.backends.fused.program import GemmStep
from opgraph.core import element_type as et


class SymbolicGemmEmitter:
    """Emits ``<name>_split``, ``static int <name>(T, A, lo, hi)`` over units (batch entry x
    block) and ``<name>_run(T, A)``."""

    def __init__(
        self, step: GemmStep, name: str, module: ModuleContext, checks: list[Check] | None = None
    ) -> None:
        assert step.a is not None and step.b is not None and step.out is not None
        assert step.out.element_type in (et.f32, et.f64), "integer GEMMs fall back on symbols"
        self.step, self.name, self.module = step, name, module
        self.a, self.b, self.out = step.a, step.b, step.out
        self.t = self.out.element_type
        self.c = dialect.storage_type(self.t)
        self.checks: list[Check] = checks if checks is not None else []
        d = module.dim
        rows, inner = self.a.shape
        self.sizes = f"  const long M = {d(rows)}, N = {d(self.b.shape[1])}, K = {d(inner)};"

    def entries(self) -> str:
        """The number of batch entries, a C expression (the grid's size, or the list's)."""
        if not self.step.grid:
            return f"{len(self.step.batch)}L"
        return self.module.dim(math.prod(size for size, _, _, _ in self.step.grid))

    def emit(self) -> str:
        nb, threads = self.entries(), self.module.num_threads
        lines = [f"/* {self.name}: {self.step.label.replace('*/', '* /')} */"]
        if self.step.epilogue is not None:
            label = "epilogue of " + self.name
            emitter = CLoopEmitter(
                self.step.epilogue, f"{self.name}_ep", self.module, label, self.checks
            )
            lines.append(emitter.emit())
        lines += self.split_function(nb, threads)
        lines += self.unit_function()
        lines += [
            f"static int {self.name}_run(void* const* T, char* A) {{",
            self.sizes,
            f"  if (M <= 0 || N <= 0 || {nb} <= 0) return 0;",
            f"  long units = {nb} * {self.name}_split(T, 0);",
        ]
        if threads > 1:
            self.module.uses_pool = True
            lines += [
                f"  if (units > 1 && M * N * K * {nb} >= {PARALLEL_MACS}L)",
                f"    return og_parallel({self.name}, T, A, units, 1L, {threads});",
            ]
        lines += [f"  return {self.name}(T, A, 0, units);", "}"]
        return "\n".join(lines)

    def split_function(self, nb: str, threads: int) -> list[str]:
        """``<name>_split(T, what)``: the number of blocks per batch entry (what 0), or 1 when
        blocks split columns (what 1), decided from this call's sizes as ``GemmEmitter``
        decides them from static ones."""
        itemsize = self.t.itemsize
        if self.step.panel:
            columns, per_thread = "1", "4L"
        else:
            columns = split_by_columns_c(threads)
            whole = "(by_columns ? M * K : N * K)"
            per_thread = f"({whole} * {itemsize}L > {1 << 18}L ? 1L : 2L)"
        return [
            f"static long {self.name}_split(void* const* T, int what) {{",
            self.sizes,
            "  (void)K;",
            f"  const int by_columns = {columns};",
            "  if (what) return by_columns;",
            "  const long extent = by_columns ? N : M;",
            f"  if ({threads} <= 1 || M * N * K * {nb} < {PARALLEL_MACS}L) return 1;",
            f"  if ({nb} >= {threads}L || extent < {2 * BLOCK}L) return 1;",
            f"  long want = {per_thread} * {threads}L, most = (extent + {BLOCK - 1}L) / {BLOCK}L;",
            "  return want < most ? want : most;",
            "}",
        ]

    def unit_function(self) -> list[str]:
        d = self.module.dim
        entries = ", ".join(f"{{{d(x)}, {d(y)}, {d(z)}}}" for x, y, z in self.step.batch)
        block = max(BLOCK, self.step.panel)
        cb = dialect.storage_type(self.b.element_type)
        return [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            self.sizes,
            *self.pointers(),
            f"  const long batch_[{len(self.step.batch)}][3] = {{{entries}}};",
            f"  const long blocks = {self.name}_split(T, 0);",
            f"  const int by_columns = (int){self.name}_split(T, 1);",
            "  for (long u_ = lo; u_ < hi; ++u_) {",
            "    long i_ = u_ / blocks, k_ = u_ % blocks;",
            *self.entry_offsets(),
            f"    const {self.c}* a = a0 + oa_;",
            f"    const {cb}* b = b0 + ob_;",
            f"    {self.c}* c = c0 + oc_;",
            "    const long extent = by_columns ? N : M;",
            "    long first = extent * k_ / blocks, last = extent * (k_ + 1) / blocks;",
            "    if (blocks > 1 && by_columns) {",
            f"      first = first / {block} * {block};",
            f"      if (k_ < blocks - 1) last = last / {block} * {block};",
            "    }",
            "    if (first >= last) continue;",
            f"    {self.call()}",
            *self.epilogue_calls(),
            "  }",
            "  (void)K;",
            "  return err;",
            "}",
        ]

    def entry_offsets(self) -> list[str]:
        """``oa_``, ``ob_``, ``oc_``: element offsets of batch entry ``i_`` in a, b, out."""
        if not self.step.grid:
            return ["    long oa_ = batch_[i_][0], ob_ = batch_[i_][1], oc_ = batch_[i_][2];"]
        d = self.module.dim
        lines = ["    long e_ = i_, oa_ = 0, ob_ = 0, oc_ = 0, q_;"]
        for size, sa, sb, sc in reversed(self.step.grid):
            lines.append(
                f"    q_ = e_ % {d(size)}; e_ /= {d(size)}; "
                f"oa_ += q_ * {d(sa)}; ob_ += q_ * {d(sb)}; oc_ += q_ * {d(sc)};"
            )
        return lines

    def pointers(self) -> list[str]:
        d, lines = self.module.dim, []
        for view, name, const in (
            (self.a, "a0", True),
            (self.b, "b0", True),
            (self.out, "c0", False),
        ):
            t = dialect.storage_type(view.element_type)
            q = "const " if const else ""
            base = self.module.base(view.buffer)
            lines.append(f"  {q}{t}* {name} = ({q}{t}*)({base}) + {d(view.offset)};")
        return lines

    def call(self) -> str:
        """The product of the block ``[first, last)`` (columns or rows)."""
        d = self.module.dim
        if self.step.panel:
            self.module.gemm_panels()
            stride = d(self.a.strides[0])
            return f"og_gemm_panels(a, {stride}, b, c, N, M, K, first, last);"
        self.module.uses_blas = True
        layout_a, layout_b = blas_layout(self.a), blas_layout(self.b)
        assert layout_a is not None and layout_b is not None
        (ta, lda), (tb, ldb) = layout_a, layout_b
        fn = "scipy_cblas_sgemm" if self.t is et.f32 else "scipy_cblas_dgemm"
        flag = {False: "OG_NOTRANS", True: "OG_TRANS"}
        la, lb = d(lda), d(ldb)

        def product(m0: str, m: str, n0: str, n: str) -> str:
            a = f"a + {m0}" + ("" if ta else f" * {la}")
            b = f"b + {n0}" + (f" * {lb}" if tb else "")
            return (
                f"{fn}(OG_ROW, {flag[ta]}, {flag[tb]}, (int)({m}), (int)({n}), (int)K, 1, {a}, "
                f"(int){la}, {b}, (int){lb}, 0, c + {m0} * N + {n0}, (int)N);"
            )

        by_columns = product("0", "M", "first", "last - first")
        by_rows = product("first", "last - first", "0", "N")
        return f"if (by_columns) {by_columns} else {by_rows}"

    def epilogue_calls(self) -> list[str]:
        """Run the epilogue on the block just computed (flat indices of the output)."""
        if self.step.epilogue is None:
            return []
        ep, base = f"{self.name}_ep", "oc_"
        return [
            "    if (by_columns) {",
            "      for (long r_ = 0; r_ < M; ++r_)",
            f"        err |= {ep}(T, A, {base} + r_ * N + first, {base} + r_ * N + last);",
            "    } else {",
            f"      err |= {ep}(T, A, {base} + first * N, {base} + last * N);",
            "    }",
        ]
