"""The W3 MLP's per-call path (issue 17, item 3; H66): a narrow one-row product by a constant
reads one zero-padded GEMV panel instead of calling sgemv."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.linalg import GEMV_MIN_COLUMNS, GEMV_PANEL
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(66)


def _row_product(cols: int, inner: int = 96) -> tuple[og.Function, np.ndarray, np.ndarray]:
    x = og.parameter(og.f32, (1, inner), "x")
    w = RNG.standard_normal((inner, cols)).astype(np.float32)
    b = RNG.standard_normal((1, cols)).astype(np.float32)
    y = ops.add(ops.dot(x, og.constant(w)), og.constant(b))
    return og.Function([y], [x]), w, b


@pytest.mark.parametrize("cols", [GEMV_MIN_COLUMNS, 10, GEMV_PANEL - 1])
def test_narrow_row_product_reads_one_padded_panel(cpu, cols):
    fn, w, b = _row_product(cols)
    exe = cpu.compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
    assert step.panel == GEMV_PANEL
    assert "og_gemv_panels(a" in exe.source() and "sgemv(" not in exe.source().split("og_run")[-1]
    x = RNG.standard_normal((1, 96)).astype(np.float32)
    want = x.astype(np.float64) @ w.astype(np.float64) + b
    got = exe(x)[0]
    assert got.shape == (1, cols)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_narrower_row_product_stays_on_blas(cpu):
    fn, w, b = _row_product(GEMV_MIN_COLUMNS - 1)
    exe = cpu.compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
    assert step.panel == 0
    x = RNG.standard_normal((1, 96)).astype(np.float32)
    np.testing.assert_allclose(exe(x)[0], x @ w + b, rtol=1e-5, atol=1e-5)


def test_padded_panel_on_threads_and_strided_rows(parallel_cpu):
    """The padded panel in a module whose every product is split between threads, read by a
    row whose elements are every other element of the input (stride 2)."""
    x = og.parameter(og.f32, (1, 128), "x")
    w = RNG.standard_normal((64, 12)).astype(np.float32)
    row = ops.slice(x, (0, 0), (1, 128), (1, 2))
    exe = parallel_cpu.compile(og.Function([ops.dot(row, og.constant(w))], [x]))
    assert "og_gemv_panels(a, 2L, b" in exe.source()
    data = RNG.standard_normal((1, 128)).astype(np.float32)
    np.testing.assert_allclose(exe(data)[0], data[:, ::2] @ w, rtol=1e-5, atol=1e-5)
