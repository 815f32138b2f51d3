"""Panel products under ``blas.ROW_SPLIT`` rows with few columns per row (the W3 MLP's 256 x
784 -> 512) are shared between threads as one band of rows per thread (split evenly, not in
whole row tiles), every column in each, with the fused epilogue on the band's rows: exact
against INTERPRETER and bitwise the same on any thread count; wider products, and AVX2's half
panels,
keep column blocks over every row (no timing). The banded cases band on a CPU whose native
build reads whole panels (AVX-512); on an AVX2-only CPU they must keep column blocks, checked
against INTERPRETER the same way."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import blas, dialect
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(123)


def _backend(threads: int) -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), num_threads=threads))


#: Whether the native build reads whole panels (AVX-512), so that bands apply.
WHOLE_PANELS = not default_config().panel_halves()


def _layer(rows: int, inner: int, cols: int):
    """relu(x @ w + b), w and b constant: a panel GEMM with a bias/ReLU epilogue."""
    x = og.parameter(og.f32, (rows, inner), name="x")
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    b = RNG.standard_normal(cols).astype(np.float32)
    y = ops.matmul(x, og.constant(w))
    y = ops.relu(ops.add(y, ops.broadcast(og.constant(b), y.shape, (0,))))
    data = RNG.standard_normal((rows, inner)).astype(np.float32)
    return og.Function([y], [x]), data


def _source(exe) -> tuple[str, str]:
    """The module's C and the product step's function name."""
    (step,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
    assert step.panel == 32 and step.epilogue is not None
    return exe.source(), f"g{exe.program.steps.index(step)}"


def _band_units(rows: int, inner: int, cols: int, threads: int) -> int:
    """``GemmEmitter.band_units``'s rule: ``BAND_UNITS`` a band where the constant fits the
    L2 share and each unit keeps two whole tiles, else one."""
    fits = 4 * inner * cols <= dialect.NEXT_GROUP_L2_BYTES
    return blas.BAND_UNITS if fits and rows // (threads * blas.BAND_UNITS) >= 24 else 1


CASES = {  # name: (rows, inner, cols)
    "the MLP's first layer": (256, 784, 512),
    "rows not a multiple of the tile, columns not of the panel": (203, 70, 45),
    "as many columns as the rule allows": (200, 16, 2 * 200),
    "the tallest banded product": (blas.ROW_SPLIT - 1, 33, 96),
    "bands of BAND_BYTES, rows of a 4 KiB apart": (256, blas.BAND_BYTES // (4 * 128), 256),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [2, 3])
def test_bands_match_the_interpreter_and_one_thread(name, threads):
    rows, inner, cols = CASES[name]
    assert rows >= blas.BAND_ROWS * threads  # a band per thread
    fn, data = _layer(rows, inner, cols)
    exe = _backend(threads).compile(fn)
    source, name_ = _source(exe)
    banded = "og_gemm_panels(a + first * " in source  # each unit a block of rows
    assert banded is WHOLE_PANELS
    # band_units units a thread where banded (column blocks can give the same count: AVX2's
    # 45 columns on three threads are three blocks of one half-panel pair or less)
    units = threads * _band_units(rows, inner, cols, threads)
    assert not banded or f"og_parallel({name_}, T, A, {units}L, 1L, {threads});" in source
    assert f"first = first / {blas.ROW_TILE} * {blas.ROW_TILE};" not in source  # split evenly
    want = og.backend("INTERPRETER").compile(fn)(data)[0].astype(np.float64)
    got = exe(data)[0]
    tolerance = 2e-5 * (np.max(np.abs(want)) + 1)
    np.testing.assert_allclose(got.astype(np.float64), want, atol=tolerance, rtol=1e-5)
    np.testing.assert_array_equal(got, _backend(1).compile(fn)(data)[0])


#: A band of 128 rows one float per row over BAND_BYTES (ConvNeXt's 196 x 1536 -> 384).
WIDE_INNER = blas.BAND_BYTES // (4 * 128) + 1


@pytest.mark.parametrize(
    ("rows", "inner", "cols", "why"),
    [
        (128, 24, 768, "more columns per row than BAND_COLUMNS_PER_ROW (BERT's products)"),
        (200, 24, 2 * 200 + 32, "one panel more than the rule allows"),
        (2 * blas.BAND_ROWS - 1, 24, 64, "too few rows for a band per thread"),
        (256, WIDE_INNER, 256, "a band of a over BAND_BYTES"),
    ],
)
def test_other_products_keep_column_blocks(rows, inner, cols, why):
    fn, data = _layer(rows, inner, cols)
    exe = _backend(2).compile(fn)
    source, _ = _source(exe)
    assert "og_gemm_panels(a + first * " not in source, why
    assert f"for (long r_ = 0; r_ < {rows}L; ++r_)" in source  # column blocks, every row
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(exe(data)[0], want, atol=2e-5 * (np.max(np.abs(want)) + 1))


def test_half_panels_keep_column_blocks():
    """AVX2's half panels: column blocks over every row, the same product."""
    fn, data = _layer(256, 784, 512)
    exe = CpuBackend(dataclasses.replace(default_config(), num_threads=2, isa="avx2")).compile(fn)
    source, _ = _source(exe)
    assert "og_gemm_panels(a, " in source and "og_gemm_panels(a + first * " not in source
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(exe(data)[0], want, atol=2e-5 * (np.max(np.abs(want)) + 1))


def test_bands_need_several_threads():
    """One thread runs the whole product in one call: no bands, no column blocks."""
    fn, _ = _layer(256, 784, 512)
    source, name_ = _source(_backend(1).compile(fn))
    assert f"og_parallel({name_}," not in source and "og_gemm_panels(a, " in source


@pytest.mark.skipif(not WHOLE_PANELS, reason="bands need whole panels (AVX-512)")
@pytest.mark.parametrize("share, units", [(1 << 30, blas.BAND_UNITS), (896 << 10, 1)])
def test_band_units_follow_the_l2_share(monkeypatch, share, units):
    """The MLP's 784 x 512 constant (1.6 MB) fits a 2 MiB L2's share: four units a band; in a
    1 MiB L2's (Zen 5) one, as before. Either way the bits of one thread."""
    monkeypatch.setattr(dialect, "NEXT_GROUP_L2_BYTES", share)
    fn, data = _layer(256, 784, 512)
    exe = _backend(2).compile(fn)
    source, name = _source(exe)
    assert f"og_parallel({name}, T, A, {2 * units}L, 1L, 2);" in source
    np.testing.assert_array_equal(exe(data)[0], _backend(1).compile(fn)(data)[0])
