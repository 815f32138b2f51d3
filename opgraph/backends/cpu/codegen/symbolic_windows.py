"""Convolution, Winograd and pooling steps whose batch is symbolic (the other sizes are
static: ``fused/lowering/convolution.py`` sends anything else to a fallback step).

The kernels of :mod:`~opgraph.backends.cpu.codegen.windows` and
:mod:`~opgraph.backends.cpu.codegen.winograd` index images by unit, so only the unit count,
the thread split and (for a "wide" convolution, one GEMM over every image) the GEMM's column
count and blocking depend on the batch; those are computed in C per call from the batch's
value (``codegen/dims.py``).
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.windows import ConvEmitter, PoolEmitter, _pointer
from opgraph.backends.cpu.codegen.winograd import WinogradEmitter
from opgraph.core.dim import Dim


def _split(name: str, units: str, work: str, threshold: int, threads: int) -> str:
    """Run ``name`` over ``units`` (a C expression), on the pool when ``work`` is large."""
    if threads <= 1:
        return f"{name}(T, A, 0, {units})"
    return (
        f"(({units}) > 1 && ({work}) >= {threshold}L ? "
        f"og_parallel({name}, T, A, {units}, 1L, {threads}) : {name}(T, A, 0, {units}))"
    )


class SymbolicConvEmitter(ConvEmitter):
    """:class:`ConvEmitter` with the batch ``n`` known per call."""

    def work(self) -> str:
        n, oh, ow = self.step.images
        return self.module.dim(n * self.w.shape[0] * oh * ow * self.w.shape[1])

    def phase(self, fn: str, units: Dim | str) -> str:  # type: ignore[override]
        count = units if isinstance(units, str) else self.module.dim(units)
        threads = self.module.num_threads
        self.module.uses_pool = self.module.uses_pool or threads > 1
        return f"  err |= {_split(fn, count, self.work(), PARALLEL_MACS, threads)};"

    def emit_wide(self) -> str:
        """As :meth:`ConvEmitter.emit_wide`, the column count (every image's pixels) and the
        GEMM's blocking computed per call."""
        s = self.step
        assert s.scratch is not None
        c, k = self.x.shape[1], self.w.shape[1]
        n, oh, ow = s.images
        g, xs, ct = s.groups, self.x.strides, self.ctype
        lines = [
            f"static int {self.name}_patches(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, s.scratch, "scratch", False),
            f"  const long n_ = {self.module.dim(n)}, columns = n_ * {oh * ow}L;",
            "  for (long u = lo; u < hi; ++u) {",
            f"    long grp = u / {k}L, r = u % {k}L;",
            "    for (long img = 0; img < n_; ++img) {",
            f"      const {ct}* x = x0 + img * {xs[0]}L + grp * {c // g * xs[1]}L;",
            f"      {ct}* row = scratch + (grp * {k}L + r) * columns + img * {oh * ow}L;",
            f"      long oh0 = 0, oh1 = {oh}L;",
            *[f"    {line}" for line in self.patch_row()],
            "    }",
            "  }",
            "  return 0;",
            "}",
            *self.blocks_function(),
            *self.symbolic_wide_gemm(),
            f"static int {self.name}_run(void* const* T, char* A) {{",
            "  int err = 0;",
            f"  if ({self.module.dim(n)} <= 0) return 0;",
            self.phase(f"{self.name}_patches", g * k),
            self.phase(f"{self.name}_gemm", f"{g}L * {self.name}_blocks(T, 0)"),
            "  return err;",
            "}",
        ]
        return "\n".join(lines)

    def blocks_function(self) -> list[str]:
        """``<name>_blocks(T, what)``: blocks per group (what 0) or whether they split the
        columns (what 1), as :meth:`ConvEmitter.gemm_blocks` decides them statically."""
        n, oh, ow = self.step.images
        og, k = self.w.shape[0] // self.step.groups, self.w.shape[1]
        itemsize = self.out.element_type.itemsize
        threads = self.module.num_threads
        return [
            f"static long {self.name}_blocks(void* const* T, int what) {{",
            f"  const long columns = {self.module.dim(n)} * {oh * ow}L;",
            f"  const int by_columns = columns >= {og}L;",
            "  if (what) return by_columns;",
            f"  const long extent = by_columns ? columns : {og}L;",
            f"  const long other = by_columns ? {og}L : columns;",
            f"  const long per = other * {k * itemsize}L > {1 << 18}L ? 1L : 2L;",
            f"  long blocks = {threads}L * per < extent / 16 ? {threads}L * per : extent / 16;",
            "  return blocks > 1 ? blocks : 1L;",
            "}",
        ]

    def symbolic_wide_gemm(self) -> list[str]:
        s = self.step
        assert s.scratch is not None
        n, oh, ow = s.images
        og, k = self.w.shape[0] // s.groups, self.w.shape[1]
        epilogue = []
        if s.epilogue is not None:
            epilogue = [
                "    for (long q_ = 0; q_ < m1 - m0; ++q_) {",
                "      long at_ = (grp * " + f"{og}L + m0 + q_) * columns + n0;",
                f"      err |= {self.name}_ep(T, A, at_, at_ + (n1 - n0));",
                "    }",
            ]
        return [
            f"static int {self.name}_gemm(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, s.scratch, "scratch", True),
            _pointer(self.module, self.out, "y0", False),
            f"  const long columns = {self.module.dim(n)} * {oh * ow}L;",
            f"  const long blocks = {self.name}_blocks(T, 0);",
            f"  const int by_columns = (int){self.name}_blocks(T, 1);",
            "  for (long u = lo; u < hi; ++u) {",
            "    long grp = u / blocks, blk = u % blocks;",
            f"    long other = by_columns ? columns : {og}L;",
            "    long lo_ = other * blk / blocks, hi_ = other * (blk + 1) / blocks;",
            "    if (lo_ >= hi_) continue;",
            f"    long m0 = by_columns ? 0 : lo_, m1 = by_columns ? {og}L : hi_;",
            "    long n0 = by_columns ? lo_ : 0, n1 = by_columns ? hi_ : columns;",
            f"    {self.gemm}(101, 111, 111, (int)(m1 - m0), (int)(n1 - n0), {k}, 1, "
            f"w0 + (grp * {og}L + m0) * {k}L, {k}, scratch + grp * {k}L * columns + n0, "
            f"(int)columns, 0, y0 + (grp * {og}L + m0) * columns + n0, (int)columns);",
            *epilogue,
            "  }",
            "  return err;",
            "}",
        ]


class SymbolicWinogradEmitter(WinogradEmitter):
    """:class:`WinogradEmitter` with the batch known per call (units: image x tile block)."""

    shares_transform = False

    def dispatch(self, units: Dim) -> str:  # type: ignore[override]
        threads = self.module.num_threads
        count = self.module.dim(units)
        if threads <= 1:
            return f"{self.name}(T, A, 0, {count})"
        self.module.uses_pool = True
        return _split(self.name, count, count, 2, threads)


class SymbolicPoolEmitter(PoolEmitter):
    """:class:`PoolEmitter` with the batch known per call (units: image x channel)."""

    def driver(self, units: Dim, work: Dim) -> str:  # type: ignore[override]
        threads = self.module.num_threads
        if threads > 1:
            self.module.uses_pool = True
        call = _split(
            self.name, self.module.dim(units), self.module.dim(work), PARALLEL_MACS // 4, threads
        )
        return f"static int {self.name}_run(void* const* T, char* A) {{\n  return {call};\n}}"
