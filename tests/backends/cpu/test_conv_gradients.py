"""A convolution's data and filter gradients run as native CPU steps (GEMMs over im2col
patches, col2im) and agree with the reference kernels: every geometry the steps handle (1-D,
strides, dilations, groups, negative padding, small planes chunked over images, cotangents
read through strides), and the shapes they leave to the reference kernel."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import gradients
from opgraph.backends.fused.conv_backprop import ConvDataGradientStep, ConvFilterGradientStep
from opgraph.core import element_type as et
from opgraph.core.literals import parameter

TOLERANCE = {et.f32: 2e-5, et.f64: 1e-12}

#: (N, C, O, spatial, filter, strides, dilations, padding below, padding above, groups)
GEOMETRIES = {
    "3x3": (2, 4, 6, (9, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),
    "strided-grouped": (3, 4, 6, (9, 8), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2),
    "small-planes": (32, 8, 16, (4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),
    "chunks": (60, 3, 5, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),
    "large-plane": (3, 3, 8, (20, 20), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),
    "1x1-stride-2": (4, 6, 6, (7, 7), (1, 1), (2, 2), (1, 1), (0, 0), (0, 0), 1),
    "dilated": (2, 4, 4, (11, 10), (3, 2), (2, 3), (2, 1), (2, 0), (1, 2), 2),
    "1-d": (2, 3, 5, (17,), (3,), (2,), (1,), (1,), (1,), 1),
    "cropping": (2, 4, 4, (9, 9), (3, 3), (1, 1), (1, 1), (-1, 0), (1, -1), 1),
    "depthwise": (2, 4, 8, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 4),
}


def _gradient_function(geometry, t):
    n, c, o, spatial, kernel, strides, dilations, below, above, groups = geometry
    x = parameter(t, (n, c, *spatial))
    w = parameter(t, (o, c // groups, *kernel))
    y = ops.convolution(x, w, strides, dilations, below, above, None, groups)
    ct = parameter(t, y.shape)
    gx, gw = gradients([y], [x, w], [ct])
    return og.Function([gx, gw], [x, w, ct])


def _compare(fn, t, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.shape).astype(t.dtype) for p in fn.parameters]
    exe = og.backend("CPU").compile(fn)
    got = exe(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=TOLERANCE[t], atol=TOLERANCE[t] * np.abs(w).max())
    return exe


@pytest.mark.parametrize("t", [et.f32, et.f64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_gradients_match_the_reference_kernels(name, t):
    exe = _compare(_gradient_function(GEOMETRIES[name], t), t)
    assert exe.fallback_ops() == []
    kinds = {type(s) for s in exe.program.steps}
    assert {ConvDataGradientStep, ConvFilterGradientStep} <= kinds


def test_small_planes_are_chunked_over_images():
    exe = _compare(_gradient_function(GEOMETRIES["chunks"], et.f32), et.f32)
    steps = [s for s in exe.program.steps if isinstance(s, ConvFilterGradientStep)]
    assert steps and all(s.chunk > 1 for s in steps)
    assert any(s.chunk < s.images[0] for s in steps)  # 60 images of 49 pixels: two chunks


def test_a_strided_cotangent_is_read_as_given():
    """The cotangent arrives as a transposed view (no dense buffer of its own)."""
    x = parameter(et.f32, (3, 4, 10, 10))
    ct_t = parameter(et.f32, (3, 6, 10, 10))
    ct = ops.transpose(ct_t, (0, 1, 3, 2))
    dw = ops.convolution_backprop_filters(x, ct, (3, 3), (1, 1), None, (1, 1), (1, 1))
    w = parameter(et.f32, (6, 4, 3, 3))
    dx = ops.ConvolutionBackpropData((1, 1), (1, 1), (1, 1), (1, 1), (0, 0), 1)(ct, w)
    exe = _compare(og.Function([dw, dx], [x, ct_t, w]), et.f32)
    assert exe.fallback_ops() == []


def test_three_d_and_data_dilation_fall_back_to_the_reference_kernels():
    x = parameter(et.f32, (2, 2, 4, 4, 4))
    w = parameter(et.f32, (3, 2, 2, 2, 2))
    y = ops.convolution(x, w)
    ct = parameter(et.f32, y.shape)
    exe = _compare(og.Function(list(gradients([y], [x, w], [ct])), [x, w, ct]), et.f32)
    assert exe.fallback_ops() == ["ConvolutionBackpropData", "ConvolutionBackpropFilters"]
    x2 = parameter(et.f32, (2, 2, 5, 5))
    ct2 = parameter(et.f32, (2, 3, 9, 9))
    dw = ops.convolution_backprop_filters(x2, ct2, (1, 1), data_dilations=(2, 2))
    exe = _compare(og.Function([dw], [x2, ct2]), et.f32)
    assert exe.fallback_ops() == ["ConvolutionBackpropFilters"]


def test_empty_batches_give_zero_filter_gradients():
    x = parameter(et.f32, (0, 2, 5, 5))
    ct = parameter(et.f32, (0, 3, 5, 5))
    dw = ops.convolution_backprop_filters(x, ct, (3, 3), padding_below=(1, 1),
                                          padding_above=(1, 1))  # fmt: skip
    exe = og.backend("CPU").compile(og.Function([dw], [x, ct]))
    (got,) = exe(np.zeros((0, 2, 5, 5), np.float32), np.zeros((0, 3, 5, 5), np.float32))
    assert got.shape == (3, 2, 3, 3) and not got.any()
