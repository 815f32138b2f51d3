"""Filter gradients of 3x3 stride-1 convolutions on small planes by Winograd F(3x3, 2x2)
(``backends/cpu/winograd_filters.py``): the CPU rewrites them into tile transforms and one
batched product, which agree with INTERPRETER's reference kernel; the shapes the rewrite does
not take keep the im2col step."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import gradients
from opgraph.backends.cpu.rewrites import rewrite_for_cpu
from opgraph.backends.fused.conv_backprop import ConvFilterGradientStep
from opgraph.core import element_type as et
from opgraph.core.literals import parameter
from opgraph.ops.convolution import ConvolutionBackpropFilters


def _filter_gradient(n, c, o, h, padding=(1, 1, 1, 1), stride=1, dilation=1, groups=1,
                     t=et.f32):  # fmt: skip
    x = parameter(t, (n, c, h, h), name="x")
    w = parameter(t, (o, c // groups, 3, 3), name="w")
    pb, pa = padding[:2], padding[2:]
    y = ops.convolution(x, w, (stride, stride), (dilation, dilation), pb, pa, None, groups)
    ct = parameter(t, y.shape, name="ct")
    (dw,) = gradients([y], [w], [ct])
    return og.Function([dw], [x, ct])


def _compare(fn, seed=0):
    rng = np.random.default_rng(seed)
    dtype = fn.parameters[0].element_type.dtype
    args = [rng.standard_normal(p.shape).astype(dtype) for p in fn.parameters]
    exe = og.backend("CPU").compile(fn)
    (got,) = exe(*args)
    (want,) = og.backend("INTERPRETER").compile(fn)(*args)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    return [type(s) for s in exe.program.steps]


def _rewritten(fn) -> bool:
    kinds = {type(n.op) for n in rewrite_for_cpu(fn).nodes}
    return ConvolutionBackpropFilters not in kinds


#: (N, C, O, plane, padding below/above): shapes the rewrite takes.
WINOGRAD = {
    "8x8": (2, 64, 64, 8, (1, 1, 1, 1)),
    "16x16-more-out": (2, 64, 80, 16, (1, 1, 1, 1)),
    "4x4-512": (2, 512, 64, 4, (1, 1, 1, 1)),
    "no-padding": (3, 64, 64, 10, (0, 0, 0, 0)),
    "padding-2": (1, 64, 64, 6, (2, 2, 2, 2)),
    "asymmetric": (2, 64, 64, 9, (1, 0, 0, 1)),
    "wide-not-square": (2, 64, 64, 8, (1, 2, 1, 2)),
}


@pytest.mark.parametrize("name", sorted(WINOGRAD))
def test_small_planes_run_by_winograd(name):
    n, c, o, h, padding = WINOGRAD[name]
    fn = _filter_gradient(n, c, o, h, padding)
    assert _rewritten(fn)
    assert ConvFilterGradientStep not in _compare(fn)


#: Shapes that keep the im2col filter gradient.
KEEP = {
    "32x32-plane": dict(n=1, c=64, o=64, h=32),
    "odd-plane": dict(n=2, c=64, o=64, h=7),
    "few-channels": dict(n=2, c=32, o=64, h=8),
    "few-out-channels": dict(n=2, c=64, o=48, h=8),
    "stride-2": dict(n=2, c=64, o=64, h=16, stride=2),
    "dilated": dict(n=2, c=64, o=64, h=12, dilation=2),
    "grouped": dict(n=2, c=128, o=128, h=8, groups=2),
    "f64": dict(n=2, c=64, o=64, h=8, t=et.f64),
}


@pytest.mark.parametrize("name", sorted(KEEP))
def test_other_shapes_keep_the_gemm(name):
    fn = _filter_gradient(**KEEP[name])
    assert not _rewritten(fn)
    assert ConvFilterGradientStep in _compare(fn)


def test_filter_and_data_gradient_of_one_layer_together():
    """A layer's whole backward (data gradient by Winograd F(2x2, 3x3), filter gradient by
    F(3x3, 2x2)) in one Function, against INTERPRETER."""
    x = parameter(et.f32, (4, 64, 8, 8), name="x")
    w = parameter(et.f32, (64, 64, 3, 3), name="w")
    y = ops.relu(ops.convolution(x, w, (1, 1), (1, 1), (1, 1), (1, 1)))
    ct = parameter(et.f32, y.shape, name="ct")
    dx, dw = gradients([y], [x, w], [ct])
    fn = og.Function([dx, dw], [x, w, ct])
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    got = og.backend("CPU").compile(fn)(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g, v, rtol=2e-5, atol=2e-5 * np.abs(v).max())
