"""Row gathers (GatherND slices, Gather rows) compute each row's position once, outside the
vector loop, and prefetch the rows a few ahead (``codegen/gather_prefetch.py``): the values,
negative indices and out-of-range errors are as before."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen.gather_prefetch import DISTANCE

RNG = np.random.default_rng(5)


def gather_nd_fn(shape, pairs, et=og.i64):
    x = og.parameter(og.f32, shape, "x")
    i = og.parameter(et, (pairs, 2), "i")
    return og.Function([ops.gather_nd(x, i)], [x, i])


def kernel_text(exe):
    source = exe.source()
    return source[source.index("static int k0_0") : source.index("k0_0_run")]


@pytest.mark.parametrize("et", [og.i64, og.i32])
def test_gather_nd_rows_match_numpy(cpu, et):
    fn = gather_nd_fn((40, 30, 48), 300, et)
    exe = cpu.compile(fn)
    text = kernel_text(exe)
    assert "__builtin_prefetch" in text
    loop = text[text.index("#pragma omp simd") :]
    assert "err |=" not in loop  # the range checks run once per row, before the loop
    x = RNG.standard_normal((40, 30, 48), dtype=np.float32)
    i = np.stack([RNG.integers(-40, 40, 300), RNG.integers(-30, 30, 300)], 1).astype(et.dtype)
    (got,) = exe(x, i)
    np.testing.assert_array_equal(got, x[i[:, 0], i[:, 1]])


def test_parallel_rows_match_numpy(parallel_cpu):
    fn = gather_nd_fn((16, 16, 33), 500)
    x = RNG.standard_normal((16, 16, 33), dtype=np.float32)
    i = RNG.integers(0, 16, (500, 2))
    (got,) = parallel_cpu.compile(fn)(x, i)
    np.testing.assert_array_equal(got, x[i[:, 0], i[:, 1]])


@pytest.mark.parametrize("row", [0, DISTANCE, 299])
def test_out_of_range_index_fails_its_run(cpu, row):
    """A bad index is reported whether or not a prefetch looked at it first."""
    fn = gather_nd_fn((8, 8, 32), 300)
    x = RNG.standard_normal((8, 8, 32), dtype=np.float32)
    i = RNG.integers(0, 8, (300, 2))
    i[row, 1] = 8
    with pytest.raises(og.ExecutionError, match="index out of range for axis 1"):
        cpu.compile(fn)(x, i)


def test_embedding_rows_are_prefetched(cpu):
    table = RNG.standard_normal((1000, 64), dtype=np.float32)
    ids = og.parameter(og.i64, (4, 50), "ids")
    fn = og.Function([ops.gather(og.constant(table), ids, 0)], [ids])
    exe = cpu.compile(fn)
    assert "__builtin_prefetch" in kernel_text(exe)
    values = RNG.integers(-1000, 1000, (4, 50))
    (got,) = exe(values)
    np.testing.assert_array_equal(got, table[values])


def test_gathers_moving_along_the_vector_are_not_prefetched(cpu):
    """GatherElements reads a different position per element: no row run to prefetch."""
    x = og.parameter(og.f32, (64, 64), "x")
    i = og.parameter(og.i64, (64, 64), "i")
    exe = cpu.compile(og.Function([ops.gather_elements(x, i, 1)], [x, i]))
    assert "__builtin_prefetch" not in kernel_text(exe)
    xs = RNG.standard_normal((64, 64), dtype=np.float32)
    idx = RNG.integers(-64, 64, (64, 64))
    (got,) = exe(xs, idx)
    np.testing.assert_array_equal(got, np.take_along_axis(xs, idx % 64, 1))
