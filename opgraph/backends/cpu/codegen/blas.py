"""Generate the C of a GEMM step: OpenBLAS (``scipy_cblas_*``) for f32/f64, a wrapping loop
for integers.

OpenBLAS runs single-threaded; the step is a function over *units* — batch entries, each
split into column (or row) blocks when the batch is too small to feed every thread — that
the runtime's thread pool shares out. So one pool serves the whole module, OpenBLAS's own
threads never compete with it, and a batch of small products (attention heads) runs one
product per thread. A product with one row or one column is a GEMV.
"""

from __future__ import annotations

from collections.abc import Callable

from opgraph.backends.cpu.codegen import dialect, narrow_gemm
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.fused.lowering.linalg import blas_layout
from opgraph.backends.fused.program import GemmStep
from opgraph.backends.fused.views import View, static, static_all
from opgraph.core import element_type as et

PROTOTYPES = """enum { OG_ROW = 101, OG_NOTRANS = 111, OG_TRANS = 112 };
extern void scipy_cblas_sgemm(int, int, int, int, int, int, float, const float*, int,
                              const float*, int, float, float*, int);
extern void scipy_cblas_dgemm(int, int, int, int, int, int, double, const double*, int,
                              const double*, int, double, double*, int);
extern void scipy_cblas_sgemv(int, int, int, int, float, const float*, int, const float*, int,
                              float, float*, int);
extern void scipy_cblas_dgemv(int, int, int, int, double, const double*, int, const double*,
                              int, double, double*, int);"""

#: Multiply-adds below which a product runs on one thread.
PARALLEL_MACS = 1 << 17
BLOCK = 16  # columns per block: whole AVX-512 vectors
#: A panel product with at least this many rows (Whisper's 1500 frames, ConvNeXt's pixels)
#: is split into blocks of rows, not of columns (see ``GemmEmitter.row_split``).
ROW_SPLIT = 512
#: Rows per block are a multiple of this (whole tiles of the panel GEMM: 12 rows on
#: AVX-512, 6 on AVX2 and without).
ROW_TILE = 12
#: A tall product (``row_split``) is cut into blocks of at most about this many
#: multiply-adds (and at least ``blocks_per_thread`` a thread), each of at least
#: ``ROW_UNIT_TILES`` whole row tiles (``GemmEmitter.tall_blocks``).
ROW_UNIT_MACS = 1 << 25
ROW_UNIT_TILES = 4
#: A panel product under ``ROW_SPLIT`` rows with at most this many columns per row of ``a``,
#: at least ``BAND_ROWS`` rows per thread and at most ``BAND_BYTES`` of ``a`` per thread is
#: split into one band of rows per thread, every column in each (``GemmEmitter.band_split``).
#: ``BAND_BYTES``: a band of ``a`` beside a panel group (``dialect.PANEL_GROUP_BYTES``, 384
#: KiB) within a 1 MiB L2.
BAND_COLUMNS_PER_ROW = 2
BAND_ROWS = 64
BAND_BYTES = 512 << 10
#: A band is shared as this many units of rows (whole ``ROW_TILE`` tiles twice over at
#: least) where the product's constant fits ``dialect.NEXT_GROUP_L2_BYTES`` (a share of
#: the L2 read from sysfs), else as one (``GemmEmitter.band_units``).
BAND_UNITS = 4


def _pointer(module: ModuleContext, view: View, name: str, const: bool) -> str:
    t = dialect.storage_type(view.element_type)
    q = "const " if const else ""
    return f"  {q}{t}* {name} = ({q}{t}*)({module.base(view.buffer)}) + {view.offset}L;"


Call = Callable[[str, str], str]  # (first, count) -> one BLAS call over that sub-range


def split_by_columns(rows: int, cols: int, threads: int) -> bool:
    """Whether a BLAS product's thread blocks are blocks of columns (else of rows).

    Every block packs the whole operand it does not split: all of ``a`` (rows x inner) in
    column blocks, all of ``b`` (inner x cols) in row blocks. Where both splits have whole
    vectors for each thread, the blocks split the larger side, so that the operand packed
    again by each block is the smaller one (one thread, OpenBLAS, two blocks: BERT's 1024 x
    768 products 0.97-0.98x of column blocks, a 32768 x 64 x 576 product 0.75x;
    docs/torch.md, 2026-11-26, H91); otherwise columns where there are enough of them, rows
    where there are fewer columns than threads' vectors and at least a row per thread.
    :func:`split_by_columns_c` is the same rule in C for symbolic sizes."""
    wide, tall = cols >= 32 * threads, rows >= 32 * threads
    if wide and tall:
        return cols >= rows
    return wide or rows < threads


def split_by_columns_c(threads: int) -> str:
    """:func:`split_by_columns` as a C expression of ``M`` (rows) and ``N`` (cols)."""
    wide = f"{32 * threads}L"
    return f"((N >= {wide} && M >= {wide}) ? N >= M : (N >= {wide} || M < {threads}L))"


class GemmEmitter:
    """Emits ``static int <name>(T, A, lo, hi)`` over units and ``<name>_run(T, A)``."""

    #: Whether a tall product may be split by blocks of rows (:meth:`row_split`); variants
    #: with a product of their own (bf16) keep column blocks.
    row_blocks = True

    def __init__(
        self, step: GemmStep, name: str, module: ModuleContext, checks: list[Check] | None = None
    ) -> None:
        assert step.a is not None and step.b is not None and step.out is not None
        self.step = step
        self.name = name
        self.module = module
        self.a, self.b, self.out = step.a, step.b, step.out
        self.rows, self.inner = static_all(self.a.shape)  # symbolic modules: symbolic_blas.py
        self.cols = static(self.b.shape[1])
        self.t = self.out.element_type
        self.c = dialect.storage_type(self.t)
        self.cb = dialect.storage_type(self.b.element_type)  # bf16 panels in bf16 mode
        self.checks: list[Check] = checks if checks is not None else []
        self.blocks = 1
        self.bands = 1  # blocks of rows, one per thread (band_split)

    def work(self) -> int:
        return self.rows * self.cols * self.inner * len(self.step.batch)

    def emit(self) -> str:
        batch = self.step.batch
        threads = self.module.num_threads
        parallel = threads > 1 and self.work() >= PARALLEL_MACS
        extent, call = self.split()
        blocks = 1
        if parallel and len(batch) < threads and self.row_split():
            self.split_columns = False
            extent = self.rows
            blocks = self.tall_blocks(threads)
        elif parallel and len(batch) < threads and self.band_split(threads):
            self.split_columns = False
            extent = self.rows
            blocks = self.bands = threads * self.band_units(threads)
        elif parallel and len(batch) < threads and extent >= 2 * BLOCK:
            blocks = min(self.blocks_per_thread() * threads, -(-extent // BLOCK))
        self.blocks = blocks  # for the calls that split() returned
        lines = [f"/* {self.name}: {self.step.label.replace('*/', '* /')} */"]
        lines += self.epilogue_function()
        rows = ", ".join(f"{{{a}L, {b}L, {c}L}}" for a, b, c in batch)
        lines.append(f"static const long {self.name}_batch[{len(batch)}][3] = {{{rows}}};")
        lines += [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.a, "a0", True),
            _pointer(self.module, self.b, "b0", True),
            _pointer(self.module, self.out, "c0", False),
            "  for (long u_ = lo; u_ < hi; ++u_) {",
            f"    long i_ = u_ / {blocks}L, k_ = u_ % {blocks}L;",
            f"    const {self.c}* a = a0 + {self.name}_batch[i_][0];",
            f"    const {self.cb}* b = b0 + {self.name}_batch[i_][1];",
            f"    {self.c}* c = c0 + {self.name}_batch[i_][2];",
            f"    long first = {extent}L * k_ / {blocks}L;",
            f"    long last = {extent}L * (k_ + 1) / {blocks}L;",
            *self.aligned(blocks),
            "    if (first >= last) continue;",
            f"    {call('first', '(int)(last - first)')}",
            *self.epilogue_calls(),
            "  }",
            "  return err;",
            "}",
        ]
        lines.insert(lines.index("  for (long u_ = lo; u_ < hi; ++u_) {"), "  int err = 0;")
        units = len(batch) * blocks
        definitions, statements = self.run_prologue(parallel and units > 1)
        lines += definitions
        lines.append(f"static int {self.name}_run(void* const* T, char* A) {{")
        lines += statements
        if parallel and units > 1:
            self.module.uses_pool = True
            lines.append(f"  return og_parallel({self.name}, T, A, {units}L, 1L, {threads});")
        else:
            lines.append(f"  return {self.name}(T, A, 0, {units}L);")
        lines.append("}")
        return "\n".join(lines)

    def run_prologue(self, split: bool) -> tuple[list[str], list[str]]:
        """C functions to define before ``<name>_run`` and statements that open it, for a
        variant's pass over the operands before the product (``split``: the product is
        shared between threads); none here."""
        return [], []

    def blocks_per_thread(self) -> int:
        """How finely to split. A BLAS block packs the whole operand it does not split, so
        one block per thread when that operand is large, two when it is small. Panel kernels
        pack nothing at run time: four blocks per thread, so that work a preempted thread has
        not started yet goes to the others (a loaded machine)."""
        if self.step.panel:
            return 4
        whole = self.rows * self.inner if self.split_columns else self.cols * self.inner
        return 1 if whole * self.out.element_type.itemsize > (1 << 18) else 2

    def tall_blocks(self, threads: int) -> int:
        """How many blocks of rows a tall product (:meth:`row_split`) is shared out as:
        ``blocks_per_thread`` a thread, more where the product is large, so that no block
        holds more than about ``ROW_UNIT_MACS`` multiply-adds (a whole number a thread), but
        none under ``ROW_UNIT_TILES`` row tiles (each block reads every panel again: 48 rows
        a panel line at least); never more blocks than row tiles.

        Whisper-tiny's FFN products (1500 x 384 x 1536 and back, 885 M multiply-adds) were
        8 blocks of 1.5 ms a core like its 384-column products' (221 M, 8 blocks of 0.35 ms):
        the call waits at the end for whichever block a slower or preempted core holds,
        a fifth of the FFN step against a twentieth of the others. Now 28 blocks of 48-60
        rows; one thread, thread CPU, blocks of 188, 94 and 47 rows run level (each block
        streams the 2.4 MB of panels again, from L3: 23 flops a byte)."""
        tiles = -(-self.rows // ROW_TILE)
        least = self.blocks_per_thread() * threads
        by_work = -(-self.work() // (ROW_UNIT_MACS * threads)) * threads
        most = max(least, tiles // ROW_UNIT_TILES)
        return min(max(least, min(by_work, most)), tiles)

    def f32_panels(self) -> bool:
        """Whether this is the f32 panel GEMM (of ``GemmEmitter``, not a variant's)."""
        return self.row_blocks and self.step.panel == 32 and self.t is et.f32

    def band_split(self, threads: int) -> bool:
        """Whether the blocks are bands of rows, one per thread, every column in each (the
        f32 panel product of an ``a`` under ``ROW_SPLIT`` rows with few columns per row).

        Column blocks over every row each read all of ``a`` again (the W3 MLP's 256 x 784,
        784 KiB, beside a 1 MiB L2, for each of a thread's four blocks), and the next
        product's ``a`` was written half by the other core; a band reads its own rows once,
        written by its own core, and all the panels. That pays where the panels are small
        beside ``a`` (few columns per row) and a band stays in L2 beside a panel group
        (ConvNeXt's 196 x 1536 -> 384, 602 KiB a band, measured no faster). The rows are
        split evenly (``rows * t / threads``: 128 + 128, each ten 12-row tiles and one of 8,
        where whole tiles would give 120 + 136). One block per thread: four column blocks a
        band (each thread's home its band) ran 0.6-3 % slower on two threads (their panel
        groups of 3 + 1 panels), at the cost of what a preempted thread holds. AVX2's half
        panels keep column blocks (their 6-row tiles in bands measured 2-4 % slower).

        The narrow GEMM (``narrow_gemm.py``) always splits into bands: its ``a`` was written
        in bands by the product before it (the W3 MLP's 256 x 512 @ 512 x 10: 9.5-10.3 µs
        against 11.0 in four 12-row-aligned blocks a thread, two threads, step minima)."""
        if self.step.panel == narrow_gemm.WIDTH:
            return self.rows > 1
        return (
            self.f32_panels()
            and not self.module.panel_halves
            and self.rows < ROW_SPLIT
            and self.rows >= BAND_ROWS * threads
            and self.cols <= BAND_COLUMNS_PER_ROW * self.rows
            and -(-self.rows // threads) * self.inner * self.t.itemsize <= BAND_BYTES
        )

    def band_units(self, threads: int) -> int:
        """Units of rows per band (:meth:`band_split`): ``BAND_UNITS`` where the product's
        constant (``inner x cols``) fits the panel GEMM's share of the L2
        (``dialect.NEXT_GROUP_L2_BYTES``) and each unit keeps two whole tiles, else one.

        The pool gives each thread its band's units first (its home) and lets the other take
        those it has not started: a worker that joins late or is preempted inside its band no
        longer holds the call for the whole band. Each unit reads all the panels again, which
        stay in the L2 only where they fit it: the W3 MLP's 784 x 512 (1.6 MB) and 512 x 512
        (1 MB) in a 2 MiB L2 (Intel Xeon, model 207), not in Zen 5's 1 MiB, whose bands stay
        one unit as h123 measured them. W3 b256 on two threads, four units a band against one
        (in-process A/B, load 3.6-6.7): paired call minima 0.964-0.992, medians 0.82-0.98; the
        same units on one core level (1.006, n.s.); two units a band level (1.00-1.03). The
        narrow GEMM keeps one unit a band (its ``a`` written by the product before it, h137)."""
        if self.step.panel == narrow_gemm.WIDTH:
            return 1
        weights = self.inner * self.cols * self.b.element_type.itemsize
        rows_per_unit = self.rows // (threads * BAND_UNITS)
        fits = weights <= dialect.NEXT_GROUP_L2_BYTES and rows_per_unit >= 2 * ROW_TILE
        return BAND_UNITS if fits else 1

    def row_split(self) -> bool:
        """Whether the blocks are rows of ``a`` (the f32 panel product of a tall ``a``).

        Column blocks each read all of ``a`` (Whisper's 1500 x 384 rows, 2.3 MB, once per
        block, both threads streaming it from L3); row blocks read their own rows once and
        the packed panels, which both threads share. ``_panel_rows`` calls the panel GEMM on
        a block of rows, the epilogue runs on those rows."""
        return self.f32_panels() and self.rows >= ROW_SPLIT

    def epilogue_function(self) -> list[str]:
        if self.step.epilogue is None:
            return []
        label = "epilogue of " + self.name
        emitter = CLoopEmitter(
            self.step.epilogue, f"{self.name}_ep", self.module, label, self.checks
        )
        return [emitter.emit()]

    def epilogue_calls(self) -> list[str]:
        """Run the epilogue on the block just computed (flat indices of the output)."""
        if self.step.epilogue is None:
            return []
        ep, base, cols = f"{self.name}_ep", f"{self.name}_batch[i_][2]", self.cols
        if self.split_columns:
            return [
                f"    for (long r_ = 0; r_ < {self.rows}L; ++r_)",
                f"      err |= {ep}(T, A, {base} + r_ * {cols}L + first, "
                f"{base} + r_ * {cols}L + last);",
            ]
        return [f"    err |= {ep}(T, A, {base} + first * {cols}L, {base} + last * {cols}L);"]

    def aligned(self, blocks: int) -> list[str]:
        if self.bands > 1:  # bands of rows (band_split): split evenly
            return []
        if blocks > 1 and self.step.panel == 32 and not self.split_columns:  # row blocks
            return [
                f"    first = first / {ROW_TILE} * {ROW_TILE};",
                f"    if (k_ < {blocks - 1}L) last = last / {ROW_TILE} * {ROW_TILE};",
            ]
        if blocks == 1 or not self.split_columns:
            return []
        block = max(BLOCK, self.step.panel)  # column blocks start on a panel
        return [
            f"    first = first / {block} * {block};",
            f"    if (k_ < {blocks - 1}L) last = last / {block} * {block};",
        ]

    # ---------------------------------------------------------------------- splitting
    def split(self) -> tuple[int, Call]:
        """(extent of the split dimension, the call over a sub-range of it)."""
        self.split_columns = True
        if self.t not in (et.f32, et.f64):
            return self.loops()
        self.module.uses_blas = True
        if self.step.panel == narrow_gemm.WIDTH:
            return self.panel_gemv() if self.rows == 1 else self.narrow_gemm()
        if self.step.panel == 32:
            return self.panel_gemm()
        if self.rows == 1 or self.cols == 1:
            self.split_columns = self.rows == 1
            return self.gemv()
        return self.gemm()

    def gemm(self) -> tuple[int, Call]:
        layout_a, layout_b = blas_layout(self.a), blas_layout(self.b)
        assert layout_a is not None and layout_b is not None
        (ta, lda), (tb, ldb) = layout_a, layout_b
        fn = "scipy_cblas_sgemm" if self.t is et.f32 else "scipy_cblas_dgemm"
        flag = {False: "OG_NOTRANS", True: "OG_TRANS"}
        cols, rows, k = self.cols, self.rows, self.inner
        by_columns = split_by_columns(rows, cols, self.module.num_threads)
        self.split_columns = by_columns

        def call(first: str, count: str) -> str:
            m0, m, n0, n = (
                ("0", str(rows), first, count) if by_columns else (first, count, "0", str(cols))
            )
            a = f"a + {m0}" + ("" if ta else f" * {lda}L")
            b = f"b + {n0}" + (f" * {ldb}L" if tb else "")
            return (
                f"{fn}(OG_ROW, {flag[ta]}, {flag[tb]}, {m}, {n}, {k}, 1, {a}, {lda}, {b}, "
                f"{ldb}, 0, c + {m0} * {cols}L + {n0}, {cols});"
            )

        return (cols if by_columns else rows), call

    def panel_gemm(self) -> tuple[int, Call]:
        """Rows times a matrix repacked as 32-column panels: register-blocked (12 rows x 32
        columns of accumulators), blocked over the inner dimension for L1."""
        self.module.gemm_panels()
        lda = self.a.strides[0] if self.rows > 1 else self.inner
        ldc = self.ldc()
        self.split_columns = True

        def call(first: str, count: str) -> str:
            if not self.split_columns:  # a block of rows (row_split, band_split), every column
                return (
                    f"og_gemm_panels(a + {first} * {lda}L, {lda}L, b, c + {first} * "
                    f"{ldc}L, {ldc}L, {count}, {self.inner}L, 0, {self.cols}L);"
                )
            return (
                f"og_gemm_panels(a, {lda}L, b, c, {ldc}L, {self.rows}L, {self.inner}L, "
                f"{first}, {first} + {count});"
            )

        return self.cols, call

    def ldc(self) -> int:
        """The result's row stride: its columns, or more where an epilogue's result has
        padded rows (``row_padding.padded_output``)."""
        return static(self.out.strides[0]) if self.rows > 1 else self.cols

    def panel_gemv(self) -> tuple[int, Call]:
        """One row times a matrix repacked as column panels (see ``GemmStep.panels``)."""
        self.module.helper("gemv_panels")
        inc = self.a.strides[1] if self.inner > 1 else 1
        self.split_columns = True

        def call(first: str, count: str) -> str:
            return f"og_gemv_panels(a, {inc}L, b, c, {self.inner}L, {first}, {first} + {count});"

        return self.cols, call

    def narrow_gemm(self) -> tuple[int, Call]:
        """Rows times a constant matrix of at most 16 columns stored as one 16-column panel
        (``narrow_gemm.py``): split into bands of rows (``band_split``), every column in
        each."""
        self.module.helper("gemm_narrow")
        lda, ldc = self.a.strides[0], self.ldc()
        self.split_columns = False

        def call(first: str, count: str) -> str:
            return (
                f"og_gemm_narrow(a + {first} * {lda}L, {lda}L, b, c + {first} * {ldc}L, "
                f"{ldc}L, {count}, {self.inner}L, {self.cols}L);"
            )

        return self.rows, call

    def gemv(self) -> tuple[int, Call]:
        """One row (x @ B) or one column (A @ x): y over ``length`` outputs."""
        layout_a, layout_b = blas_layout(self.a), blas_layout(self.b)
        assert layout_a is not None and layout_b is not None
        fn = "scipy_cblas_sgemv" if self.t is et.f32 else "scipy_cblas_dgemv"
        if self.rows == 1:  # y[cols] = x B, x = the row of a
            (transposed, ld), length = layout_b, self.cols
            inc = self.a.strides[1] if self.inner > 1 else 1
            matrix, vector, other_major = "b", "a", not transposed
        else:  # y[rows] = A x, x = the column of b
            (transposed, ld), length = layout_a, self.rows
            inc = self.b.strides[0] if self.inner > 1 else 1
            matrix, vector, other_major = "a", "b", transposed
        other = self.inner

        def call(first: str, count: str) -> str:
            if other_major:  # stored other x length: BLAS Trans, outputs are columns
                return (
                    f"{fn}(OG_ROW, OG_TRANS, {other}, {count}, 1, {matrix} + {first}, {ld}, "
                    f"{vector}, {inc}, 0, c + {first}, 1);"
                )
            return (  # stored length x other: BLAS NoTrans, outputs are rows
                f"{fn}(OG_ROW, OG_NOTRANS, {count}, {other}, 1, {matrix} + {first} * {ld}L, "
                f"{ld}, {vector}, {inc}, 0, c + {first}, 1);"
            )

        return length, call

    def loops(self) -> tuple[int, Call]:
        """Integers: a loop accumulating in 64 bits, keeping the low bits (wrap-around)."""
        (ars, acs), (brs, bcs) = self.a.strides, self.b.strides
        cols, k, c = self.cols, self.inner, self.c

        def call(first: str, count: str) -> str:
            return (
                f"for (long m = {first}; m < {first} + {count}; ++m) "
                f"for (long n = 0; n < {cols}L; ++n) {{ uint64_t acc = 0; "
                f"for (long k = 0; k < {k}L; ++k) acc += (uint64_t)a[m * {ars}L + k * {acs}L] * "
                f"(uint64_t)b[k * {brs}L + n * {bcs}L]; c[m * {cols}L + n] = ({c})acc; }}"
            )

        self.split_columns = False
        return self.rows, call
