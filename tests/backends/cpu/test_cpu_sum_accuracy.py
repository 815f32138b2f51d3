"""Floating-point sums on the CPU backend are pairwise (blocked lanes, then a pairwise cascade),
so long reductions keep the accuracy of numpy's (INTERPRETER's) pairwise sums. Includes
nGraph's ``reduce_sum_large_1d_to_scalar`` and ``reduce_sum_stable_*`` cases and the
reliability reproduction ``11_cpu_f32_reduction_accuracy.py``."""

import math

import ml_dtypes
import numpy as np
import pytest

import opgraph as og
from opgraph import ops

F32_EPS = 2.0**-24  # unit roundoff of f32


def run(backend, fn, *args):
    return backend.compile(fn)(*args)


def ulps(a, b):
    """Units in the last place between f32 values (nGraph's ``all_close_f`` measure)."""
    ia = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
    ib = np.asarray(b, np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(2**31) - ia, ia)
    ib = np.where(ib < 0, -(2**31) - ib, ib)
    return np.abs(ia - ib)


def test_sum_of_2_24_plus_16_ones_is_exact(cpu):
    """One f32 accumulator stops at 2^24: adding 1 to 16777216 gives 16777216."""
    n = (1 << 24) + 16
    x = og.parameter(og.f32, (n,))
    (got,) = run(cpu, og.Function([ops.reduce_sum(x, (0,))], [x]), np.ones(n, np.float32))
    assert float(got) == 16777232.0


def test_sum_of_a_million_residues_is_within_an_ulp(cpu):
    """sum(i % 255 for i < 10^6) = 126,992,025; a sequential f32 sum gives 126,555,090."""
    n = 10**6
    data = (np.arange(n) % 255).astype(np.float32)
    truth = float(data.astype(np.float64).sum())
    assert truth == 126_992_025.0
    x = og.parameter(og.f32, (n,))
    (got,) = run(cpu, og.Function([ops.reduce_sum(x, (0,))], [x]), data)
    assert ulps(got, np.float32(truth)) <= 1


def test_ngraph_sum_large_1d_to_scalar(cpu):
    """nGraph ``reduce_sum_large_1d_to_scalar``: 10^6 random integers below 255 (here from
    numpy's generator), against the float64 sum within nGraph's default 2 tolerance bits."""
    data = (np.random.default_rng(2).integers(0, 2**32, 10**6) % 255).astype(np.float32)
    x = og.parameter(og.f32, data.shape)
    (got,) = run(cpu, og.Function([ops.reduce_sum(x, (0,))], [x]), data)
    assert ulps(got, np.float32(data.astype(np.float64).sum())) <= 4


def _against_interpreter(cpu, fn, *args):
    (want,) = og.backend("INTERPRETER").compile(fn)(*args)
    (got,) = run(cpu, fn, *args)
    return got, want


def test_ngraph_sum_stable_acc(cpu):
    """nGraph ``reduce_sum_stable_acc``: f32[10,10,10,30] uniform in [1000, 1000.1], summed over
    axes 1-3, equals INTERPRETER within 3 tolerance bits (8 ulps)."""
    data = np.random.default_rng(2112).uniform(1000.0, 1000.1, (10, 10, 10, 30))
    x = og.parameter(og.f32, data.shape)
    fn = og.Function([ops.reduce_sum(x, (1, 2, 3))], [x])
    got, want = _against_interpreter(cpu, fn, data.astype(np.float32))
    assert int(np.max(ulps(got, want))) <= 8


def test_ngraph_sum_stable_acc_double(cpu):
    """nGraph ``reduce_sum_stable_acc_double``: f64[10,10,20,300] in [1e9, 1e9 + 0.001]. nGraph
    compares with its reference's Kahan sum to 1e-5 (exact, at 6e13); opgraph's reference is
    numpy's pairwise sum, so both are held to 1 ulp of the exact sum (``math.fsum``)."""
    data = np.random.default_rng(2112).uniform(1e9, 1e9 + 0.001, (10, 10, 20, 300))
    x = og.parameter(og.f64, data.shape)
    (got,) = run(cpu, og.Function([ops.reduce_sum(x, (1, 2, 3))], [x]), data)
    exact = np.array([math.fsum(row.ravel()) for row in data])
    np.testing.assert_allclose(got, exact, rtol=0, atol=float(np.spacing(exact.max())))


def test_ngraph_sum_stable_simple_float(cpu):
    """nGraph ``reduce_sum_stable_simple_float``: 1e7 and nineteen small values."""
    values = [1e7, 0.9, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.1, 0.9, 0.5, 0.2, 0.3, 0.4, 0.5]
    data = np.array([*values, 0.6, 0.7, 0.8, 0.9, 0.1], np.float32)
    x = og.parameter(og.f32, data.shape)
    got, want = _against_interpreter(cpu, og.Function([ops.reduce_sum(x, (0,))], [x]), data)
    assert int(ulps(got, want)) <= 2


def test_ngraph_sum_stable_simple_double(cpu):
    """nGraph ``reduce_sum_stable_simple_double``: 1e16 and nineteen small values, within 2.0
    (one ulp) of the exact sum, as nGraph asks of its Kahan-summing reference (numpy's
    pairwise sum, INTERPRETER's, is three ulps off here). AVX2 builds sum the twenty values in
    four f64 lanes, not eight, and land two ulps off: still closer than INTERPRETER."""
    small = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.7, 0.9, 0.7, 0.3, 0.6, 0.8, 0.4, 0.6]
    data = np.array([1e16, *small, 0.5, 0.8, 0.7], np.float64)
    x = og.parameter(og.f64, data.shape)
    (got,) = run(cpu, og.Function([ops.reduce_sum(x, (0,))], [x]), data)
    ulps = 2 if cpu.config.panel_halves() else 1  # AVX2: 4 f64 lanes
    assert abs(float(got) - math.fsum(data)) <= 2.0 * ulps


@pytest.mark.parametrize(("n", "value"), [(10**4, 0.1), (10**6, 0.1), (10**7, 0.1), (2 * 10**7, 1)])
def test_reliability_repro_11_long_sums_and_means(cpu, n, value):
    """Reproduction 11: the sum of n copies of 0.1f was off by 9.6e-3 at 10^6 and 8.8e-2 at
    10^7, and 2e7 ones summed to 2^24. Now as close as INTERPRETER's pairwise sum."""
    data = np.full(n, value, np.float32)
    x = og.parameter(og.f32, (n,))
    fn = og.Function([ops.reduce_sum(x, (0,)), ops.reduce_mean(x, (0,))], [x])
    total, mean = run(cpu, fn, data)
    truth = float(data.astype(np.float64).sum())
    assert abs(float(total) - truth) <= 4 * F32_EPS * truth
    assert abs(float(mean) - truth / n) <= 4 * F32_EPS * truth / n


def _relative_error(got, truth):
    truth = np.asarray(truth, np.float64)
    return np.max(np.abs(np.asarray(got, np.float64) - truth) / np.abs(truth))


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((1 << 20,), (0,)),  # one long row
        ((16, 100_003), (1,)),  # rows, a length that is no multiple of the block
        ((5000, 37), (0,)),  # columns: a strided reduced axis
        ((300, 7, 300), (0, 2)),  # two reduced axes that do not merge: nested inner loops
    ],
)
def test_long_f32_sums_are_as_accurate_as_pairwise(cpu, shape, axes):
    """Positive data: the CPU sum is within 2 ulps (4 units of roundoff, relative) of the
    float64 sum, as a pairwise sum is (a sequential f32 sum of 10^5 values errs by ~1e-3)."""
    data = np.random.default_rng(7).random(shape, dtype=np.float32) + 0.5
    x = og.parameter(og.f32, shape)
    fn = og.Function([ops.reduce_sum(x, axes), ops.reduce_mean(x, axes)], [x])
    total, mean = run(cpu, fn, data)
    truth = data.astype(np.float64).sum(axis=axes)
    count = data.size // truth.size
    assert _relative_error(total, truth) <= 4 * F32_EPS
    assert _relative_error(mean, truth / count) <= 5 * F32_EPS


@pytest.mark.parametrize(
    ("element_type", "dtype"), [(og.f16, np.float16), (og.bf16, ml_dtypes.bfloat16)]
)
def test_16_bit_sums_accumulate_in_f32(cpu, element_type, dtype):
    """A 16-bit sum of 2^16 values is the f32 pairwise sum rounded once: one rounding of the
    exact sum (a 16-bit accumulator would stop growing at 2048 or 256)."""
    data = (np.random.default_rng(3).random(1 << 16) * 0.5 + 0.05).astype(dtype)
    x = og.parameter(element_type, data.shape)
    (got,) = run(cpu, og.Function([ops.reduce_sum(x, (0,))], [x]), data)
    truth = data.astype(np.float64).sum()
    assert got.dtype == dtype
    assert float(got) == float(np.float64(truth).astype(dtype))


def test_softmax_and_layer_norm_statistics_over_long_rows(cpu):
    """Softmax sums and layer-norm means and variances over rows of 200,000 values agree with
    float64 to f32 precision (a sequential f32 sum would lose three digits)."""
    rng = np.random.default_rng(11)
    data = (rng.standard_normal((3, 200_000)) * 0.1 + 100.0).astype(np.float32)
    x = og.parameter(og.f32, data.shape)
    fn = og.Function([ops.softmax(x, 1), ops.layer_norm(x, axis=1)], [x])
    soft, norm = run(cpu, fn, data)
    wide = data.astype(np.float64)
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    np.testing.assert_allclose(soft, e / e.sum(axis=1, keepdims=True), rtol=2e-6)
    centered = wide - wide.mean(axis=1, keepdims=True)
    want = centered / np.sqrt((centered**2).mean(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(norm, want, rtol=0, atol=2e-4)


def test_average_pool_over_a_large_window(cpu):
    """A 40x40 average window sums row by row: within f32 precision of float64."""
    data = (np.random.default_rng(5).random((1, 2, 80, 80), dtype=np.float32) + 1.0) * 3.0
    x = og.parameter(og.f32, data.shape)
    fn = og.Function([ops.avg_pool(x, (40, 40), strides=(40, 40))], [x])
    (got,) = run(cpu, fn, data)
    want = data.astype(np.float64).reshape(1, 2, 2, 40, 2, 40).mean(axis=(3, 5))
    assert _relative_error(got, want) <= 4 * F32_EPS
