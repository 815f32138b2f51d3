"""The AVX-512 panel GEMM's full tiles take ``a``'s floats as embedded broadcasts
(``og_mk_full`` in ``codegen/dialect.py``, in builds tuned for AMD Zen: the other builds run
the generic kernel through the same tests); partial tiles (fewer than 32 columns) keep the
generic micro-kernel. Every tile height (1 to 12 rows, and the 8-row and 5-row last tiles of
128 and 29 rows), full and partial column tiles, one inner block and two (the accumulators
reloaded from ``c``): integer-valued operands, so every sum is exact in f32 and any row,
column or inner index the kernel gets wrong shows as a difference."""

import numpy as np
import pytest
from asm_checks import compile_to_asm, innermost_loops  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.compiler import CFLAGS
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(79)
ROWS = [*range(1, 14), 29, 128]


@pytest.mark.parametrize("inner", [1, 64, 1500])
@pytest.mark.parametrize("cols", [32, 71, 96])
def test_every_tile_height_exact(cpu, parallel_cpu, inner, cols):
    w = RNG.integers(-3, 4, (inner, cols)).astype(np.float32)
    params = [og.parameter(og.f32, (rows, inner)) for rows in ROWS]
    weight = og.constant(w)
    fn = og.Function([ops.matmul(x, weight) for x in params], params)
    data = [RNG.integers(-3, 4, (rows, inner)).astype(np.float32) for rows in ROWS]
    want = [(d.astype(np.int64) @ w.astype(np.int64)).astype(np.float32) for d in data]
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        steps = [s for s in exe.program.steps if isinstance(s, GemmStep)]
        assert [s.panel for s in steps if s.a is not None and s.a.shape[0] > 1] == [32] * (
            len(ROWS) - 1
        )
        for rows, got, expected in zip(ROWS, exe(*data), want, strict=True):
            np.testing.assert_array_equal(got, expected, err_msg=f"{rows} x {inner} x {cols}")


def test_random_floats_close_to_f64(cpu, parallel_cpu):
    """Rounding as the generic kernel's: one fused multiply-add per inner index."""
    x = og.parameter(og.f32, (128, 768))
    w = (RNG.standard_normal((768, 2304)) / np.sqrt(768)).astype(np.float32)
    fn = og.Function([ops.matmul(x, og.constant(w))], [x])
    data = RNG.standard_normal((128, 768)).astype(np.float32)
    want = data.astype(np.float64) @ w.astype(np.float64)
    for backend in (cpu, parallel_cpu):
        (got,) = backend.compile(fn)(data)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_only_the_avx512_branch_broadcasts():
    """Only AVX-512 builds tuned for AMD Zen define and call the broadcasting kernel."""
    source = dialect.HELPERS["gemm_panels"]()
    avx512, rest = source.split("#elif", 1)
    assert "og_mk_full" in avx512 and "1to16" in avx512
    assert "og_mk_full" not in rest and "1to16" not in rest
    gate = f"#if {dialect.BROADCAST_TARGETS}\n"
    assert avx512.count(gate) == 2 and "__tune_znver4__" in gate


@pytest.mark.parametrize(
    ("tuning", "broadcasts"),
    [
        (("-mtune=znver3",), True),  # a Zen 4 to GCC 12 (-march=native: no AVX-VNNI)
        (("-mtune=znver3", "-mavxvnni"), False),  # a Zen 5 to GCC 12
        (("-mtune=generic",), False),
    ],
)
def test_embedded_broadcasts_on_zen_4_only(tuning, broadcasts, tmp_path):
    """The compiled AVX-512 unit multiplies by embedded broadcasts where it is tuned for Zen and
    the CPU lacks AVX-VNNI (Zen 4), and by ``vbroadcastss`` otherwise (Zen 5: full-width
    multiply-adds, where the embedded broadcasts measured 4-8 % slower)."""
    unit = dialect.HELPERS["gemm_panels"]().replace(
        "static void og_gemm_panels(", "void og_gemm_panels("
    )
    lines = [dialect.PRELUDE, unit]  # the entry exported, so that it is compiled
    asm = compile_to_asm(lines, "avx512", tmp_path, "gemm_panels", (*CFLAGS, *tuning))
    assert ("{1to16}" in asm) == broadcasts
    assert "vfmadd231ps" in asm and "vbroadcastss" in asm  # partial tiles broadcast anyway


@pytest.mark.parametrize(
    "tuning", [("-mtune=znver3",), ("-mtune=znver3", "-mavxvnni")], ids=["zen4", "zen5"]
)
def test_avx512_kernels_prefetch_their_panel_ahead(tuning, tmp_path):
    """Both AVX-512 micro-kernels (``og_mk_full`` with embedded broadcasts, Zen 4's full tiles,
    and the generic one) prefetch the panel they stream ``PANEL_PREFETCH_ROWS`` rows (128
    bytes each) ahead, both lines of a row, in their inner loop; the AVX2 and SSE kernels do
    not."""
    source = dialect.HELPERS["gemm_panels"]()
    avx512, rest = source.split("#elif", 1)
    rows = dialect.PANEL_PREFETCH_ROWS
    assert avx512.count(f"__builtin_prefetch(p + (k + {rows}) * 32") == 4
    assert "__builtin_prefetch(p + (k" not in rest
    unit = source.replace("static void og_gemm_panels(", "void og_gemm_panels(")
    flags = (*CFLAGS, *tuning)
    asm = compile_to_asm([dialect.PRELUDE, unit], "avx512", tmp_path, "gemm_panels", flags)
    loops = [body for body in innermost_loops(asm) if sum("vfmadd" in x for x in body) == 24]
    assert loops, "no 12-row multiply-add loop found"
    for body in loops:  # one panel row: a line and the next, from one address register
        fetched = sorted(x.split()[1] for x in body if x.startswith("prefetcht0"))
        assert len(fetched) == 2 and fetched[1] == "64" + fetched[0], body
