"""Reductions over an outer axis (a bias gradient's sum over the batch) run the column
schedule of ``cpu/codegen/loops.py``: blocks of contiguous rows, the reduced axis outermost.
Results against numpy on shapes around the block size, with fused elementwise stores, max with
NaN, mean, and split between threads."""

import math
import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen.loops import COLUMN_BLOCK
from opgraph.backends.cpu.column_sums import BLOCK, MIN_BLOCK, MIN_COLUMNS, MIN_ROWS

SHAPES = [(256, 512), (7, COLUMN_BLOCK + 3), (300, 1), (3, 5, 2 * COLUMN_BLOCK + 1)]


def _column_kernel_used(exe) -> bool:
    return "s_a" in exe.source()  # the column kernel's stack accumulators


def _sum_as_product(exe) -> bool:
    """The CPU's column-sum rewrite took the sum (a BLAS product with ones)."""
    return re.search(r"scipy_cblas_sgem[mv]\(OG_", exe.source()) is not None


def _rewritten_to_a_product(shape: tuple[int, ...]) -> bool:
    """Whether ``backends/cpu/column_sums.py`` takes a float sum over all but the last axis."""
    rows = math.prod(shape[:-1])
    blocked = rows <= BLOCK or any(rows % b == 0 for b in range(MIN_BLOCK, BLOCK + 1))
    return rows >= MIN_ROWS and shape[-1] >= MIN_COLUMNS and blocked


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_sum_over_leading_axes_with_a_fused_select_store(cpu, parallel_cpu, shape):
    """``where(mask <= 0, 0, g)`` stored and summed over every axis but the last (ReLU's
    backward and its bias gradient), on one thread and split between three."""
    rng = np.random.default_rng(0)
    mask = rng.standard_normal(shape).astype(np.float32)
    grad = rng.standard_normal(shape).astype(np.float32)
    m, g = og.parameter(og.f32, shape), og.parameter(og.f32, shape)
    zero = og.constant(np.zeros(shape, np.float32), og.f32)
    masked = ops.select(ops.less_equal(m, zero), zero, g)
    axes = tuple(range(len(shape) - 1))
    fn = og.Function([ops.reduce_sum(masked, axes), ops.multiply(masked, masked)], [m, g])
    want = np.where(mask <= 0, 0, grad)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        total, squared = exe(mask, grad)
        np.testing.assert_allclose(total, want.sum(axis=axes), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(squared, want * want, rtol=1e-6)
        if _rewritten_to_a_product(shape):  # the CPU rewrite runs before the loop emitter
            assert _sum_as_product(exe) and not _column_kernel_used(exe)
        elif shape[-1] > 1:
            assert _column_kernel_used(exe)


def test_max_over_the_batch_propagates_nan(cpu):
    data = np.random.default_rng(1).standard_normal((64, 300)).astype(np.float32)
    data[5, 7] = np.nan
    data[60, 299] = np.nan
    x = og.parameter(og.f32, data.shape)
    exe = cpu.compile(og.Function([ops.reduce_max(x, (0,))], [x]))
    (got,) = exe(data)
    np.testing.assert_array_equal(got, data.max(axis=0))
    assert np.isnan(got[7]) and np.isnan(got[299]) and not np.isnan(got[0])
    assert _column_kernel_used(exe)


def test_mean_over_the_batch_then_scaled(cpu):
    """A row value computed from the reduction (the mean, times 3) is stored per row."""
    data = np.random.default_rng(2).standard_normal((100, 600)).astype(np.float64)
    x = og.parameter(og.f64, data.shape)
    three = og.constant(np.full((600,), 3.0), og.f64)
    (got,) = cpu.compile(og.Function([ops.multiply(ops.reduce_mean(x, (0,)), three)], [x]))(data)
    np.testing.assert_allclose(got, 3 * data.mean(axis=0), rtol=1e-12)


def test_long_reduced_axis_keeps_the_pairwise_row_kernel(cpu):
    """Beyond one pairwise block the row kernel (with its cascade) still runs."""
    data = np.ones((4096, 8), np.float32)
    x = og.parameter(og.f32, data.shape)
    exe = cpu.compile(og.Function([ops.reduce_sum(x, (0,))], [x]))
    np.testing.assert_array_equal(exe(data)[0], np.full(8, 4096, np.float32))
    assert not _column_kernel_used(exe)
