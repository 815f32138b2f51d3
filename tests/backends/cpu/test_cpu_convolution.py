"""Native convolution and pooling: im2col blocks, the "wide" single GEMM, the 1x1 direct
path, Winograd F(2x2, 3x3), epilogues fused into them, against INTERPRETER."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering import pointwise
from opgraph.backends.fused.lowering.conv_panels import PanelConvStep
from opgraph.backends.fused.lowering.convolution import winograd_layout
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep
from opgraph.backends.fused.program import ConvStep, PoolStep, WinogradStep

RNG = np.random.default_rng(11)


def conv_graph(n, c, o, size, k, stride=1, pad=0, groups=1, t=og.f32, constant=True, epilogue=True):
    x = og.parameter(t, (n, c, size, size))
    weights = (RNG.standard_normal((o, c // groups, k, k)) * 0.3).astype(t.dtype)
    w = og.constant(weights) if constant else og.parameter(t, weights.shape)
    y = ops.convolution(x, w, (stride, stride), None, (pad, pad), (pad, pad), groups=groups)
    if epilogue:
        bias = og.constant(RNG.standard_normal(o).astype(t.dtype))
        y = ops.relu(ops.add(y, ops.broadcast(bias, y.shape, (0, 2, 3))))
    params = [x] if constant else [x, w]
    args = [RNG.standard_normal((n, c, size, size)).astype(t.dtype)]
    if not constant:
        args.append(weights)
    return og.Function([y], params), args


CASES = {
    "winograd": (dict(n=4, c=16, o=24, size=16, k=3, pad=1), WinogradStep),
    "winograd odd sizes": (dict(n=2, c=16, o=16, size=19, k=3, pad=2), WinogradStep),
    "im2col blocks, stride 2": (dict(n=2, c=8, o=16, size=33, k=3, stride=2, pad=1), ConvStep),
    "winograd, images per unit": (dict(n=20, c=16, o=16, size=6, k=3, pad=1), WinogradStep),
    "winograd, output channel blocks": (dict(n=1, c=16, o=200, size=14, k=3, pad=1), WinogradStep),
    "panels, few pixels": (dict(n=1, c=64, o=80, size=7, k=3, pad=1), PanelConvStep),
    "panels, stride 2, two images": (dict(n=2, c=64, o=64, size=9, k=3, stride=2, pad=1), PanelConvStep),
    "1x1, few pixels": (dict(n=1, c=512, o=96, size=7, k=1), PointwiseConvStep),
    "1x1, short inner dimension": (dict(n=1, c=256, o=96, size=7, k=1), PointwiseConvStep),
    "wide, small output": (dict(n=3, c=32, o=32, size=6, k=5, pad=2), ConvStep),
    "wide, one image": (dict(n=1, c=32, o=48, size=7, k=3, pad=1), ConvStep),
    "1x1, two images": (dict(n=2, c=16, o=8, size=20, k=1), PointwiseConvStep),
    "1x1, filters as a parameter": (dict(n=2, c=16, o=8, size=20, k=1, constant=False), ConvStep),
    "groups": (dict(n=2, c=12, o=6, size=10, k=3, pad=1, groups=3), ConvStep),
    "filters as a parameter": (dict(n=2, c=16, o=16, size=16, k=3, pad=1, constant=False), ConvStep),
    "f64": (dict(n=2, c=4, o=4, size=9, k=3, pad=1, t=og.f64), ConvStep),
    "f16": (dict(n=1, c=4, o=4, size=9, k=3, pad=1, t=og.f16), ConvStep),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_convolution_paths(name, backend_name, request, monkeypatch):
    backend = request.getfixturevalue(backend_name)
    params, kind = CASES[name]
    if kind is ConvStep:  # the im2col paths (else patch steps: test_cpu_conv_patches.py)
        monkeypatch.setattr(pointwise, "PATCH_FLOATS", 0)
    fn, args = conv_graph(**params)
    exe = backend.compile(fn)
    if backend_name == "cpu":
        assert any(type(s) is kind for s in exe.program.steps), exe.program.steps
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0].astype(np.float64)
    tolerance = 3e-2 if params.get("t") is og.f16 else 1e-5
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=tolerance * scale, rtol=tolerance)


@pytest.mark.parametrize(
    ("shape", "threads", "layout"),
    [
        ((1, 256, 14, 14), 2, (7, 1, 4)),  # ResNet-18 layer 3, batch 1: channel blocks
        ((1, 64, 56, 56), 2, (5, 1, 1)),  # layer 1: row blocks
        ((32, 256, 8, 8), 2, (4, 8, 1)),  # CIFAR layer 3: 8 images per unit
        ((32, 512, 4, 4), 2, (2, 32, 4)),  # CIFAR layer 4: the batch, 4 channel blocks
        ((1, 512, 7, 7), 2, None),  # 16 tiles: im2col (the panel product) measured faster
    ],
)
def test_winograd_layout(shape, threads, layout):
    n, o, oh, ow = shape
    assert winograd_layout(n, o, oh, ow, threads) == layout


def test_panel_convolution_fuses_its_epilogue(cpu):
    fn, args = conv_graph(n=1, c=64, o=96, size=7, k=3, pad=1)
    exe = cpu.compile(fn)
    (step,) = exe.program.steps
    assert type(step) is PanelConvStep and step.epilogue is not None
    want = og.backend("INTERPRETER").compile(fn)(*args)[0]
    np.testing.assert_allclose(exe(*args)[0], want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))


def test_convolution_epilogue_is_fused(cpu):
    fn, args = conv_graph(n=4, c=16, o=16, size=16, k=3, pad=1)
    exe = cpu.compile(fn)
    (step,) = exe.program.steps
    assert step.epilogue is not None
    assert exe.memory_plan().peak > 0  # only the per-thread scratch


@pytest.mark.parametrize(
    ("maximum", "kwargs"),
    [
        (True, dict(strides=(2, 2), padding_below=(1, 1), padding_above=(1, 1))),
        (True, dict(strides=(2, 2), ceil_mode=True)),
        (False, dict(strides=(1, 1), padding_below=(1, 1), padding_above=(1, 1))),
        (False, dict(strides=(2, 2), padding_below=(1, 1), padding_above=(1, 1), include_padding=True)),
    ],
)  # fmt: skip
def test_pooling(cpu, parallel_cpu, maximum, kwargs):
    x = og.parameter(og.f32, (2, 3, 11, 10))
    pool = ops.max_pool if maximum else ops.avg_pool
    fn = og.Function([pool(x, (3, 3), **kwargs)], [x])
    data = RNG.standard_normal((2, 3, 11, 10)).astype(np.float32)
    if maximum:
        data[0, 0, 4, 4] = np.nan
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        assert isinstance(exe.program.steps[0], PoolStep)
        np.testing.assert_allclose(exe(data)[0], want, rtol=1e-6, atol=1e-6)


def test_three_dimensional_convolution_falls_back(cpu):
    x = og.parameter(og.f32, (1, 2, 4, 4, 4))
    w = og.constant(np.ones((3, 2, 2, 2, 2), np.float32))
    exe = cpu.compile(og.Function([ops.convolution(x, w)], [x]))
    assert exe.fallback_ops() == ["Convolution"]
    data = RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    want = og.backend("INTERPRETER").compile(exe.function)(data)[0]
    np.testing.assert_allclose(exe(data)[0], want, rtol=1e-5)
