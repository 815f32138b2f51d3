"""The narrow panel GEMM (``codegen/narrow_gemm.py``): a product of several rows by a
constant f32 matrix of ``NARROW_MIN_COLUMNS`` to 16 columns reads the matrix as one
zero-padded 16-column panel instead of calling OpenBLAS's ``sgemm``: it agrees with
INTERPRETER and with float64 products for every width 1..16 (the threshold lowered to 1),
ragged row counts around the tiles (12 rows AVX-512, 6 AVX2, 3 and 1 in the tails), one,
two and three threads, native and AVX2 code; a NaN reaches its own row only; the transposed
constant (ONNX ``transB``) gives the same bits as the stored one; wider and narrower products
keep their own paths."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering import linalg
from opgraph.backends.fused.lowering.linalg import GEMV_PANEL, NARROW_MIN_COLUMNS
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(137)
BACKENDS = ["cpu", "avx2_cpu", "parallel_cpu"]


def _linear(rows, inner, cols, transposed=False):
    """``x @ W + b`` with ``W`` (inner x cols) a constant (read through a transpose of its
    transpose where ``transposed``); the function, an input and ``W``."""
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    x = og.parameter(og.f32, (rows, inner))
    right = ops.transpose(og.constant(w.T.copy()), (1, 0)) if transposed else og.constant(w)
    y = ops.dot(x, right)
    bias = og.constant(RNG.standard_normal(cols).astype(np.float32))
    z = ops.add(y, ops.broadcast(bias, y.shape, (0,)))
    data = RNG.standard_normal((rows, inner)).astype(np.float32)
    return og.Function([z], [x]), data, w


def _panels(exe):
    return [s.panel for s in exe.program.steps if isinstance(s, GemmStep)]


def _check(exe, fn, data):
    got = exe(data)[0]
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    return got


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cols", range(1, GEMV_PANEL + 1))
def test_every_width_takes_the_narrow_gemm(request, monkeypatch, backend, cols):
    monkeypatch.setattr(linalg, "NARROW_MIN_COLUMNS", 1)
    cpu = request.getfixturevalue(backend)
    rows = 12 + cols * 7  # 19..124: whole tiles and every tail
    fn, data, w = _linear(rows, 67, cols)
    exe = cpu.compile(fn)
    assert _panels(exe) == [GEMV_PANEL]
    assert "og_gemm_narrow(a" in exe.source() and "scipy_cblas_sgemm(OG" not in exe.source()
    got = _check(exe, fn, data)
    exact = data.astype(np.float64) @ w.astype(np.float64)
    assert np.abs(got - exact - (got - exact).mean(0)).max() < 1e-4 * np.abs(exact).max() + 1e-3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows, inner", [(2, 1), (3, 5), (13, 512), (37, 33), (256, 512)])
def test_ragged_rows_and_depths(request, backend, rows, inner):
    cpu = request.getfixturevalue(backend)
    fn, data, _ = _linear(rows, inner, 10)
    exe = cpu.compile(fn)
    assert _panels(exe) == [GEMV_PANEL]
    _check(exe, fn, data)


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
def test_a_nan_reaches_its_own_row_only(request, backend):
    cpu = request.getfixturevalue(backend)
    fn, data, _ = _linear(29, 40, 13)
    exe = cpu.compile(fn)
    data[25, 3] = np.nan  # the tail past two 12-row tiles
    got = exe(data)[0]
    assert np.isnan(got[25]).all()
    assert np.isfinite(np.delete(got, 25, axis=0)).all()


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
def test_transposed_and_stored_weights_give_the_same_bits(request, backend):
    cpu = request.getfixturevalue(backend)
    w = RNG.standard_normal((300, 10)).astype(np.float32)
    data = RNG.standard_normal((50, 300)).astype(np.float32)
    bits = []
    for right in (og.constant(w), ops.transpose(og.constant(w.T.copy()), (1, 0))):
        x = og.parameter(og.f32, (50, 300))
        exe = cpu.compile(og.Function([ops.dot(x, right)], [x]))
        assert _panels(exe) == [GEMV_PANEL]
        bits.append(exe(data)[0].view(np.uint32))
    assert np.array_equal(bits[0], bits[1])


@pytest.mark.parametrize("cols, panel", [(NARROW_MIN_COLUMNS - 1, 0), (17, 0), (32, 32)])
def test_other_widths_keep_their_paths(cpu, cols, panel):
    fn, data, _ = _linear(40, 64, cols)
    exe = cpu.compile(fn)
    assert _panels(exe) == [panel]
    assert "og_gemm_narrow(a" not in exe.source()
    _check(exe, fn, data)


def test_one_row_keeps_the_panel_gemv(cpu):
    fn, data, _ = _linear(1, 64, 10)
    exe = cpu.compile(fn)
    assert _panels(exe) == [GEMV_PANEL]
    assert "og_gemv_panels(a" in exe.source() and "og_gemm_narrow(a" not in exe.source()
    _check(exe, fn, data)
