"""The W3 MLP's per-call path (issue 17, item 3; H66): a narrow one-row product by a constant
reads one zero-padded GEMV panel instead of calling sgemv."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

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


def test_calls_reuse_their_slots_after_errors_and_from_threads(cpu):
    """``exe.call`` passes the pointer table, arena and callback to ``og_run`` as ctypes
    pointers (no argtypes): results stay right from several threads at once, a failed
    run-time check still gives its slot back, and the module's shared ``og_run`` attribute
    keeps its own signature (another Executable of the same module)."""
    x, y = og.parameter(og.i64, (8,)), og.parameter(og.i64, (8,))
    fn = og.Function([ops.add(ops.divide(x, y), x)], [x, y])
    exe = cpu.compile(fn)
    ones = np.ones(8, np.int64)
    zero = ones.copy()
    zero[3] = 0
    for _ in range(3):
        with pytest.raises(og.ExecutionError, match="division by zero"):
            exe(ones, zero)
    assert len(exe._pool.free) == 1  # one slot, taken and given back by every call
    assert exe(ones * 7, ones * 2)[0].tolist() == [10] * 8
    again = cpu.compile(fn)  # the same cached module: both call it
    assert again(ones * 9, ones * 3)[0].tolist() == [12] * 8
    assert exe(ones * 9, ones * 2)[0].tolist() == [13] * 8

    def work(k: int) -> bool:
        a = np.full(8, 6 * k + 6, np.int64)
        return all(exe(a, ones * 3)[0].tolist() == [8 * k + 8] * 8 for _ in range(200))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(8)))
    assert 1 <= len(exe._pool.free) <= 4
