"""CumSum as a native scan step: bit for bit INTERPRETER's values (sequential sums, f32
accumulation for 16-bit floats, wrapping integers), for every direction, strided inputs, long
axes, wide inner blocks, empty tensors, and split between threads."""

import itertools

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.program import ScanStep

RNG = np.random.default_rng(11)
MODES = list(itertools.product([False, True], [False, True]))


def _check(backend, fn, *args):
    exe = backend.compile(fn)
    assert exe.fallback_ops() == []
    assert any(isinstance(s, ScanStep) for s in exe.program.steps)
    got = exe(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))  # same bits


@pytest.mark.parametrize(("exclusive", "reverse"), MODES)
@pytest.mark.parametrize(
    ("shape", "axis"), [((1_000_003,), 0), ((3, 700, 5), 1), ((40, 600), 0), ((2, 3, 300), 2)]
)
def test_f32_sums_are_the_reference_bit_for_bit(parallel_cpu, shape, axis, exclusive, reverse):
    x = og.parameter(og.f32, shape)
    fn = og.Function([ops.cumsum(x, axis, exclusive, reverse)], [x])
    _check(parallel_cpu, fn, RNG.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("t", [og.f16, og.bf16, og.f64, og.i8, og.u16, og.i32, og.i64])
@pytest.mark.parametrize(("exclusive", "reverse"), MODES)
def test_other_types(cpu, t, exclusive, reverse):
    x = og.parameter(t, (5, 300))
    fn = og.Function([ops.cumsum(x, 1, exclusive, reverse)], [x])
    if t.is_real:
        data = RNG.standard_normal((5, 300)).astype(t.dtype)
    else:
        info = np.iinfo(t.dtype)
        data = RNG.integers(info.min, info.max, (5, 300), endpoint=True).astype(t.dtype)
    _check(cpu, fn, data)


def test_strided_and_fused_inputs(cpu):
    x = og.parameter(og.f32, (30, 20))
    fn = og.Function([ops.cumsum(ops.transpose(ops.exp(x), (1, 0)), 1, reverse=True) + 1.0], [x])
    data = RNG.standard_normal((30, 20)).astype(np.float32)
    got = cpu.compile(fn)(data)[0]
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)  # exp: vector libm, within an ulp


def test_infinities_and_nan(cpu):
    x = og.parameter(og.f32, (6,))
    fn = og.Function([ops.cumsum(x, 0, exclusive=True), ops.cumsum(x, 0, reverse=True)], [x])
    _check(cpu, fn, np.array([1, np.inf, -np.inf, 2, np.nan, 3], np.float32))


def test_empty(cpu):
    x, y = og.parameter(og.f32, (3, 0)), og.parameter(og.f32, (0, 4))
    fn = og.Function([ops.cumsum(x, 1, exclusive=True), ops.cumsum(y, 1)], [x, y])
    got = cpu.compile(fn)(np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32))
    assert [g.shape for g in got] == [(3, 0), (0, 4)]
