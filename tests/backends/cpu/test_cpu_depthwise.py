"""The direct convolution kernel (depthwise and small grouped convolutions) against
INTERPRETER: channel multipliers, strides, dilations, asymmetric and negative padding, 1-D,
tall filters (one pass per filter row), fused epilogues, several threads."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfigError, default_config
from opgraph.backends.fused.lowering import convolution
from opgraph.backends.fused.lowering.convolution import DirectPlan, direct_plan
from opgraph.backends.fused.program import ConvStep

RNG = np.random.default_rng(17)


def depthwise(
    shape,
    kernel,
    groups=None,
    multiplier=1,
    strides=None,
    dilations=None,
    below=None,
    above=None,
    t=og.f32,
    constant=True,
    epilogue=False,
):
    n, c = shape[:2]
    groups = groups or c
    o = c * multiplier if groups == c else groups * multiplier
    weights = (RNG.standard_normal((o, c // groups, *kernel)) * 0.3).astype(t.dtype)
    x = og.parameter(t, shape)
    w = og.constant(weights) if constant else og.parameter(t, weights.shape)
    y = ops.convolution(x, w, strides, dilations, below, above, groups=groups)
    if epilogue:
        bias = og.constant(RNG.standard_normal(o).astype(t.dtype))
        axes = tuple(i for i in range(len(shape)) if i != 1)
        y = ops.relu(ops.add(y, ops.broadcast(bias, y.shape, axes)))
    params = [x] if constant else [x, w]
    args = [RNG.standard_normal(shape).astype(t.dtype)]
    if not constant:
        args.append(weights)
    return og.Function([y], params), args


def check(backend, fn, args, direct=True, tolerance=1e-5):
    exe = backend.compile(fn)
    steps = [s for s in exe.program.steps if isinstance(s, ConvStep)]
    assert any(s.direct for s in steps) == direct, exe.program.steps
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=tolerance * scale, rtol=tolerance)
    return exe


CASES = {
    "3x3 same": dict(shape=(1, 8, 12, 13), kernel=(3, 3), below=(1, 1), above=(1, 1)),
    "3x3 stride 2": dict(shape=(2, 6, 15, 14), kernel=(3, 3), strides=(2, 2), below=(1, 1), above=(1, 1)),
    "5x5 stride 2": dict(shape=(1, 4, 17, 17), kernel=(5, 5), strides=(2, 2), below=(2, 2), above=(2, 2)),
    "5x5 same": dict(shape=(2, 5, 9, 11), kernel=(5, 5), below=(2, 2), above=(2, 2)),
    "multiplier 2": dict(shape=(2, 6, 11, 9), kernel=(3, 3), multiplier=2, strides=(2, 2)),
    "multiplier 3": dict(shape=(1, 4, 10, 10), kernel=(3, 3), multiplier=3, below=(1, 1), above=(1, 1)),
    "one channel, 16 filters": dict(shape=(2, 1, 12, 12), kernel=(3, 3), multiplier=16, below=(1, 1), above=(1, 1)),
    "unequal strides": dict(shape=(1, 3, 13, 16), kernel=(3, 3), strides=(1, 3), below=(1, 2), above=(0, 1)),
    "row stride 3": dict(shape=(1, 3, 16, 9), kernel=(3, 2), strides=(3, 1)),
    "dilation 2": dict(shape=(1, 4, 14, 14), kernel=(3, 3), dilations=(2, 2), below=(2, 2), above=(2, 2)),
    "dilation (1, 3), stride 2": dict(shape=(1, 4, 14, 19), kernel=(3, 3), strides=(2, 2), dilations=(1, 3), below=(1, 3)),
    "asymmetric padding": dict(shape=(1, 4, 10, 10), kernel=(3, 3), below=(2, 0), above=(0, 3)),
    "negative padding": dict(shape=(1, 4, 12, 12), kernel=(3, 3), below=(-1, 2), above=(1, -2)),
    "padding wider than the image": dict(shape=(1, 2, 3, 3), kernel=(3, 3), below=(4, 4), above=(4, 4)),
    "kernel as wide as the image": dict(shape=(1, 3, 5, 7), kernel=(5, 7)),
    "1x1": dict(shape=(2, 8, 6, 6), kernel=(1, 1)),
    "tall filter, one pass per row": dict(shape=(1, 3, 20, 20), kernel=(11, 9), below=(5, 4), above=(5, 4)),
    "7x7 small plane": dict(shape=(4, 16, 7, 7), kernel=(7, 7), below=(3, 3), above=(3, 3)),
    "many channels, small planes": dict(shape=(2, 64, 4, 5), kernel=(3, 3), below=(1, 1), above=(1, 1)),
    "1-D": dict(shape=(2, 6, 40), kernel=(5,), strides=(2,), below=(2,), above=(1,)),
    "grouped, 2 per group": dict(shape=(2, 16, 10, 10), kernel=(3, 3), groups=8, multiplier=2, below=(1, 1), above=(1, 1)),
    "grouped, 4 per group": dict(shape=(1, 16, 9, 11), kernel=(3, 3), groups=4, multiplier=4, strides=(2, 2)),
    "grouped, multiplier 3": dict(shape=(1, 12, 8, 8), kernel=(3, 3), groups=4, multiplier=3, below=(1, 1), above=(1, 1)),
    "tall filter, multiplier 2": dict(shape=(1, 4, 14, 14), kernel=(9, 9), multiplier=2, below=(4, 4), above=(4, 4)),
    "epilogue": dict(shape=(2, 8, 12, 12), kernel=(3, 3), below=(1, 1), above=(1, 1), epilogue=True),
    "grouped epilogue": dict(shape=(1, 8, 9, 9), kernel=(3, 3), groups=4, multiplier=2, epilogue=True),
    "filters as a parameter": dict(shape=(1, 6, 10, 10), kernel=(3, 3), below=(1, 1), above=(1, 1), constant=False),
    "f64": dict(shape=(1, 4, 9, 9), kernel=(3, 3), strides=(2, 2), below=(1, 1), above=(1, 1), t=og.f64),
    "f16": dict(shape=(1, 4, 9, 9), kernel=(3, 3), below=(1, 1), above=(1, 1), t=og.f16),
    "rows in place, odd height": dict(shape=(1, 3, 17, 32), kernel=(3, 3), below=(1, 1), above=(1, 1)),
    "rows in place, vector tail": dict(shape=(2, 3, 6, 28), kernel=(5, 5), below=(2, 2), above=(2, 2)),
    "rows in place, half vector tail": dict(shape=(1, 2, 7, 24), kernel=(3, 3), below=(1, 1), above=(1, 1)),
    "rows in place, stride 2": dict(shape=(1, 3, 15, 45), kernel=(3, 3), strides=(2, 2), below=(1, 1), above=(1, 1)),
    "rows in place, multiplier 2": dict(shape=(1, 3, 9, 19), kernel=(3, 3), multiplier=2, below=(0, 1), above=(2, 1)),
    "rows in place, dilation": dict(shape=(1, 2, 12, 40), kernel=(3, 3), dilations=(2, 3), below=(2, 3), above=(2, 3)),
    "rows in place, epilogue": dict(shape=(1, 4, 11, 20), kernel=(7, 7), below=(3, 3), above=(3, 3), epilogue=True),
    "rows in place, f64": dict(shape=(1, 2, 5, 21), kernel=(3, 3), below=(1, 1), above=(1, 1), t=og.f64),
    "rows in place, f16": dict(shape=(1, 2, 6, 30), kernel=(3, 3), below=(1, 1), above=(1, 1), t=og.f16),
    "rows in place, many row blocks": dict(shape=(1, 2, 160, 112), kernel=(3, 3), below=(1, 1), above=(1, 1)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_direct_convolution(name, backend_name, request):
    params = CASES[name]
    fn, args = depthwise(**params)
    check(
        request.getfixturevalue(backend_name),
        fn,
        args,
        tolerance=3e-2 if params.get("t") is og.f16 else 1e-5,
    )


def test_epilogue_is_fused_into_the_direct_step(cpu):
    fn, args = depthwise((2, 8, 12, 12), (3, 3), below=(1, 1), above=(1, 1), epilogue=True)
    exe = check(cpu, fn, args)
    (step,) = exe.program.steps
    assert isinstance(step, ConvStep) and step.direct and step.epilogue is not None


def test_residual_add_is_fused(parallel_cpu):
    x = og.parameter(og.f32, (1, 8, 10, 10))
    w = og.constant((RNG.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32))
    y = ops.add(ops.convolution(x, w, None, None, (1, 1), (1, 1), groups=8), x)
    fn = og.Function([ops.relu(y)], [x])
    exe = check(parallel_cpu, fn, [RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)])
    assert [type(s) for s in exe.program.steps] == [ConvStep]


def test_strided_input_view(cpu):
    """The data read through a transpose: the direct kernel gets a dense copy."""
    x = og.parameter(og.f32, (1, 9, 11, 6))
    w = og.constant((RNG.standard_normal((6, 1, 3, 3)) * 0.3).astype(np.float32))
    data = ops.transpose(x, (0, 3, 1, 2))
    fn = og.Function([ops.convolution(data, w, None, None, (1, 1), (1, 1), groups=6)], [x])
    check(cpu, fn, [RNG.standard_normal((1, 9, 11, 6)).astype(np.float32)])


def test_large_grouped_convolution_keeps_gemm(cpu):
    """Many channels per group on a large output: one GEMM per group measured faster."""
    fn, args = depthwise((1, 64, 40, 40), (3, 3), groups=2, below=(1, 1), above=(1, 1))
    check(cpu, fn, args, direct=False)


def test_very_wide_filter_keeps_gemm(cpu):
    fn, args = depthwise((1, 2, 80), (70,), below=(3,), above=(3,))
    check(cpu, fn, args, direct=False)


def test_data_dilation_keeps_the_reference_path(cpu):
    x = og.parameter(og.f32, (1, 3, 5, 5))
    w = og.constant((RNG.standard_normal((3, 1, 3, 3)) * 0.3).astype(np.float32))
    y = ops.convolution(x, w, None, None, (1, 1), (1, 1), data_dilations=(2, 2), groups=3)
    fn = og.Function([y], [x])
    exe = check(cpu, fn, [RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)], direct=False)
    assert "Convolution" in exe.fallback_ops()


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_plan_covers_every_read(threads, monkeypatch):
    """The padded phases hold every element the flat loop reads, and units cover the rows
    (the row-wise plans: the channel-blocked ones are checked in
    test_cpu_depthwise_blocked.py)."""
    monkeypatch.setattr(convolution, "DIRECT_BLOCKED_WIDTH", 0)
    for params in CASES.values():
        fn, _ = depthwise(**params)
        exe = og.backend("CPU").compile(fn)
        for step in exe.program.steps:
            if isinstance(step, ConvStep) and step.direct:
                plan: DirectPlan = direct_plan(step, threads)
                (kh, kw), (sh, sw), (dh, dw) = step.kernel, step.strides, step.dilations
                span = plan.together * sh
                down = (plan.together - 1) * sh + (kh - 1) * dh
                last = plan.flat - 1 + down // span * plan.pitch + (kw - 1) * dw // sw
                assert last < plan.phase_size
                assert plan.rows % plan.together == 0 or plan.together == 1
                assert plan.pitch >= step.images[2]
                assert plan.flat >= plan.rows // plan.together * plan.pitch


def test_wide_depthwise_rows_are_written_in_place():
    """The cases named "rows in place" (and the 1-D one, 20 outputs wide) take the row-wise
    kernel; narrow, tall-filter and grouped ones keep the flat outputs."""
    for name, params in CASES.items():
        fn, _ = depthwise(**params)
        exe = og.backend("CPU").compile(fn)
        (step,) = [s for s in exe.program.steps if isinstance(s, ConvStep)]
        assert step.direct
        in_place = direct_plan(step, 1).in_place
        assert in_place == (name.startswith("rows in place") or name == "1-D"), name


@pytest.mark.parametrize(
    "name", ["5x5 stride 2", "grouped, 4 per group", "rows in place, vector tail"]
)
def test_avx2_code(name):
    """The AVX2 build (16 vector registers: the weights of a pass no longer all fit)."""
    try:
        backend = CpuBackend(dataclasses.replace(default_config(), isa="avx2"))
        fn, args = depthwise(**CASES[name])
        check(backend, fn, args)
    except CpuConfigError as error:  # pragma: no cover - a CPU without AVX2
        pytest.skip(f"this CPU cannot run AVX2 code: {error}")
