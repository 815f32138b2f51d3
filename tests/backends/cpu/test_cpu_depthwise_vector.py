"""The vector tap loops of the direct depthwise kernel (``codegen/depthwise_vector.py``: 5x5
and larger f32 filters, one pass; AVX-512 builds shift each loaded pair of vectors with a
permute, other builds go weight by weight, loading every input vector where it is used)
against INTERPRETER: rows in place and flat outputs,
strides, dilations, channel multipliers, widths that are not a multiple of the vector,
fused epilogues, several threads, the AVX2 build; and the scratch slack the pair of loads
reads into. The narrow planes here would run channel-blocked (test_cpu_depthwise_blocked.py):
every test switches that form off, to run the row-wise vector loops."""

import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import depthwise as emitter
from opgraph.backends.fused.lowering import convolution
from opgraph.backends.fused.lowering.convolution import (
    DIRECT_SLACK,
    DIRECT_TOGETHER_LARGE,
    direct_plan,
)
from opgraph.backends.fused.program import ConvStep

RNG = np.random.default_rng(23)


@pytest.fixture(autouse=True)
def rows_only(monkeypatch):
    """The row-wise vector loops on every plane (no channel-blocked narrow planes)."""
    monkeypatch.setattr(convolution, "DIRECT_BLOCKED_WIDTH", 0)


def depthwise(shape, kernel, strides=(1, 1), dilations=(1, 1), multiplier=1, epilogue=False):
    """A depthwise convolution (``same`` padding for stride 1) with constant filters."""
    c = shape[1]
    (kh, kw), (dh, dw) = kernel, dilations
    below = ((kh - 1) * dh // 2, (kw - 1) * dw // 2)
    above = ((kh - 1) * dh - below[0], (kw - 1) * dw - below[1])
    weights = (RNG.standard_normal((c * multiplier, 1, kh, kw)) * 0.2).astype(np.float32)
    x = og.parameter(og.f32, shape)
    y = ops.convolution(x, og.constant(weights), strides, dilations, below, above, groups=c)
    if epilogue:
        bias = og.constant(RNG.standard_normal(c * multiplier).astype(np.float32))
        y = ops.relu(ops.add(y, ops.broadcast(bias, y.shape, (0, 2, 3))))
    return og.Function([y], [x]), [RNG.standard_normal(shape).astype(np.float32)]


CASES = {
    "7x7 rows in place, 56 wide": dict(shape=(1, 3, 20, 56), kernel=(7, 7)),
    "7x7 rows in place, 20 wide (tail)": dict(shape=(2, 4, 17, 20), kernel=(7, 7)),
    "7x7 flat, 7x7 planes": dict(shape=(1, 6, 7, 7), kernel=(7, 7)),
    "7x7 flat, 14x14 planes": dict(shape=(1, 5, 14, 14), kernel=(7, 7), epilogue=True),
    "5x5 rows in place, 28 wide": dict(shape=(1, 4, 28, 28), kernel=(5, 5), epilogue=True),
    "5x5 flat, 7x7 planes": dict(shape=(1, 9, 7, 7), kernel=(5, 5)),
    "5x5 row stride 2": dict(shape=(1, 3, 29, 40), kernel=(5, 5), strides=(2, 1)),
    "5x5 dilation 2": dict(shape=(1, 2, 24, 33), kernel=(5, 5), dilations=(2, 2)),
    "5x5 multiplier 2": dict(shape=(1, 3, 18, 18), kernel=(5, 5), multiplier=2),
    "7x5 filter": dict(shape=(1, 2, 20, 20), kernel=(7, 5)),
    "7x9 filter": dict(shape=(1, 2, 21, 30), kernel=(7, 9)),
}


def check(backend, fn, args):
    exe = backend.compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, ConvStep)]
    assert step.direct
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=1e-5)
    return exe


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_vector_taps(name, backend_name, request):
    fn, args = depthwise(**CASES[name])
    exe = check(request.getfixturevalue(backend_name), fn, args)
    assert "og_dw_shift(" in exe.source()  # the vector tap loops ran


@pytest.mark.parametrize("name", list(CASES))
def test_avx2_build(name, avx2_cpu):
    """The AVX2 branch: 8 lanes, the multiply-adds weight by weight, each input vector
    loaded where it is used (no permutes)."""
    fn, args = depthwise(**CASES[name])
    source = check(avx2_cpu, fn, args).source()
    assert re.search(r"#else\n *\{ const float wv_ = ", source)
    assert "wv_ * og_dw_load(p_ + " in source


STRIDED = {
    "5x5 stride 2": dict(shape=(1, 3, 56, 56), kernel=(5, 5), strides=(2, 2)),
    "5x5 stride 2, odd size": dict(shape=(1, 3, 15, 15), kernel=(5, 5), strides=(2, 2)),
    "7x7 stride 2": dict(shape=(1, 2, 40, 40), kernel=(7, 7), strides=(2, 2)),
}


@pytest.mark.parametrize("name", list(STRIDED))
def test_column_strides_keep_the_simd_loops(name, cpu):
    """A column stride of 2 leaves two or three shifts per phase row: loads, not permutes
    (four rows together still, for the large filters)."""
    fn, args = depthwise(**STRIDED[name])
    assert "og_dw_shift(" not in check(cpu, fn, args).source()


def test_small_filters_keep_the_simd_loops(cpu):
    """3x3 filters measured as fast or faster with the ``omp simd`` loops."""
    fn, args = depthwise((1, 4, 20, 20), (3, 3))
    assert "og_dw_shift(" not in check(cpu, fn, args).source()


def test_tall_filters_run_four_rows_together(cpu):
    fn, _ = depthwise((1, 2, 28, 28), (7, 7))
    (step,) = cpu.compile(fn).program.steps
    assert isinstance(step, ConvStep)
    assert direct_plan(step, 1).together == DIRECT_TOGETHER_LARGE


def test_pair_loads_stay_inside_the_scratch(cpu):
    """The second vector of each phase row's pair (read for the permutes) may end one vector
    past the last element the taps use: it stays inside the thread's scratch (the plan's
    slack), whichever set of phases and loop position reads it."""
    lanes = 16
    for params in (*CASES.values(), *STRIDED.values()):
        fn, _ = depthwise(**params)
        for step in cpu.compile(fn).program.steps:
            if not (isinstance(step, ConvStep) and step.direct):
                continue
            for threads in (1, 3):
                plan = direct_plan(step, threads)
                (kh, kw), (sh, sw), (dh, dw) = step.kernel, step.strides, step.dilations
                ow = step.images[2]
                span = plan.together * sh
                down = (plan.together - 1) * sh + (kh - 1) * dh
                sets = 2 if plan.pipelined else 1
                if plan.in_place:
                    base = (plan.rows // plan.together - 1) * plan.pitch + ow - lanes
                else:
                    base = plan.flat - lanes
                row = (plan.phases - 1) * plan.phase_size + down // span * plan.pitch
                last = (sets - 1) * plan.phases * plan.phase_size + base + row + 2 * lanes - 1
                assert last < plan.per_thread, params
                assert plan.per_thread >= DIRECT_SLACK
                assert (kw - 1) * dw // sw < lanes  # every shift within the pair


def test_vector_taps_switch(cpu, monkeypatch):
    """``VECTOR_TAPS`` chooses the path; both give the same result within rounding."""
    fn, args = depthwise((1, 3, 16, 24), (5, 5))
    fast = cpu.compile(fn)(*args)[0]
    monkeypatch.setattr(emitter, "VECTOR_TAPS", 10**6)
    exe = check(CpuBackend(default_config()), fn, args)
    assert "og_dw_shift(" not in exe.source()
    np.testing.assert_allclose(exe(*args)[0], fast, rtol=1e-5, atol=1e-5)


def test_small_filters_on_narrow_planes_run_one_row_at_a_time(cpu):
    """3x3 filters on rows narrower than a vector (the flat loop) take one row per group;
    wide rows keep two."""
    for shape, together in (((1, 8, 7, 7), 1), ((1, 8, 14, 14), 1), ((1, 8, 28, 28), 2)):
        fn, args = depthwise(shape, (3, 3))
        exe = check(cpu, fn, args)
        (step,) = exe.program.steps
        assert isinstance(step, ConvStep)
        assert direct_plan(step, 1).together == together, shape


def test_large_filters_on_planes_no_taller_than_them_run_one_row_at_a_time(cpu):
    fn, args = depthwise((1, 8, 7, 7), (7, 7))
    exe = check(cpu, fn, args)
    (step,) = exe.program.steps
    assert isinstance(step, ConvStep)
    assert direct_plan(step, 1).together == 1
    assert "og_dw_shift(" in exe.source()
