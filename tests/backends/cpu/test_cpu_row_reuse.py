"""Row kernels compute each costly value once (``codegen/row_reuse.py``): a stored value that a
reduction phase computes is stored by that phase's loop (the SiLU that a global-average pool
sums and a later step reads), and a value with a math call that a later loop needs again
(softmax's exponentials) is saved in a row buffer. Values match INTERPRETER either way."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen.row_reuse import SAVE_LIMIT


def kernel_source(exe, marker):
    """The text of the generated kernel whose label contains ``marker``."""
    source = exe.source()
    start = source.index(marker)
    return source[start : source.index("_run(void* const* T", start)]


def assert_matches(cpu, fn, *args):
    got = cpu.compile(fn)(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)


def silu_pool(shape):
    """EfficientNet's squeeze-excite input: bias, SiLU, then both a pool and the value."""
    x, b = og.parameter(og.f32, shape), og.parameter(og.f32, (shape[1],))
    y = x + ops.broadcast(b, shape, (0, 2, 3))
    s = y * ops.sigmoid(y)
    return og.Function([s, ops.reduce_mean(s, (2, 3))], [x, b])


def se_block(shape):
    """The whole squeeze-excite gate in one row kernel: pool, sigmoid, scale."""
    x = og.parameter(og.f32, shape)
    s = x * ops.sigmoid(x)
    gate = ops.sigmoid(ops.reduce_sum(s, (2, 3)))
    return og.Function([s * ops.broadcast(gate, shape, (2, 3))], [x])


def test_pooled_silu_is_stored_by_the_pooling_loop(cpu):
    fn = silu_pool((2, 16, 9, 9))
    exe = cpu.compile(fn)
    text = kernel_source(exe, "ReduceSum")
    assert text.count("expf(") == 1  # one SiLU per element, not one for the sum and one more
    rng = np.random.default_rng(0)
    assert_matches(
        cpu,
        fn,
        rng.normal(size=(2, 16, 9, 9)).astype(np.float32),
        rng.normal(size=16).astype(np.float32),
    )


def test_gated_value_is_saved_between_loops(cpu):
    fn = se_block((1, 8, 14, 14))
    text = kernel_source(cpu.compile(fn), "ReduceSum")
    assert text.count("expf(") == 2  # the SiLU once, the gate's sigmoid once per row
    assert "__attribute__((aligned(64)))" in text
    assert_matches(cpu, fn, np.random.default_rng(1).normal(size=(1, 8, 14, 14)).astype(np.float32))


@pytest.mark.parametrize("length", [7, 128, 1500, 4096])
def test_softmax_exponentials_computed_once(cpu, length):
    x = og.parameter(og.f32, (3, length))
    fn = og.Function([ops.softmax(x, 1)], [x])
    text = kernel_source(cpu.compile(fn), "ReduceMax")
    assert text.count("expf(") == 1
    values = np.random.default_rng(2).normal(0, 5, (3, length)).astype(np.float32)
    values[0, 0] = np.nan
    assert_matches(cpu, fn, values)


def test_long_rows_are_recomputed_not_saved(cpu):
    """Rows longer than SAVE_LIMIT would not fit the stack budget: recomputed, still right."""
    length = SAVE_LIMIT + 16
    x = og.parameter(og.f32, (2, length))
    fn = og.Function([ops.softmax(x, 1)], [x])
    text = kernel_source(cpu.compile(fn), "ReduceMax")
    assert text.count("expf(") == 2
    assert_matches(cpu, fn, np.random.default_rng(3).normal(0, 3, (2, length)).astype(np.float32))


def test_cheap_shared_values_are_recomputed(cpu):
    """Layer norm's ``x - mean`` has no math call: loading it would not pay."""
    x = og.parameter(og.f32, (4, 96))
    mean = ops.broadcast(ops.reduce_mean(x, (1,)), (4, 96), (1,))
    centered = x - mean
    var = ops.broadcast(ops.reduce_mean(centered * centered, (1,)), (4, 96), (1,))
    fn = og.Function([centered / ops.sqrt(var + 1e-5)], [x])
    text = kernel_source(cpu.compile(fn), "ReduceSum")
    assert "aligned(64)" not in text
    assert_matches(cpu, fn, np.random.default_rng(4).normal(2, 3, (4, 96)).astype(np.float32))


def test_value_depending_on_the_phase_result_is_not_stored_early(cpu):
    """A store that needs the row's sum stays in the store loop (after the sum)."""
    x = og.parameter(og.f32, (3, 50))
    e = ops.exp(x)
    total = ops.broadcast(ops.reduce_sum(e, (1,)), (3, 50), (1,))
    fn = og.Function([e, e / total], [x])
    assert_matches(cpu, fn, np.random.default_rng(5).normal(size=(3, 50)).astype(np.float32))


def test_threads_split_rows_with_saved_values(parallel_cpu):
    fn = se_block((2, 24, 10, 10))
    assert_matches(
        parallel_cpu, fn, np.random.default_rng(6).normal(size=(2, 24, 10, 10)).astype(np.float32)
    )
