"""A training step's 3x3 stride-1 convolutions on small planes (CIFAR ResNet-18's 8x8 layers)
on the CPU: forward by computed filters and data gradient run by Winograd once a unit of
``WINOGRAD_TILES`` tiles can be made of whole images (4x4 planes too); batches too small for a unit keep the im2col GEMM. im2col filter gradients
with few output channels accumulate dWᵀ. Every path agrees with INTERPRETER."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import gradients
from opgraph.backends.fused.conv_backprop import ConvDataGradientStep, ConvFilterGradientStep
from opgraph.backends.fused.lowering.winograd_gradients import WinogradConvolution
from opgraph.backends.fused.program import WinogradStep
from opgraph.core import element_type as et
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import parameter


def _compare(fn, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    exe = og.backend("CPU").compile(fn)
    got = exe(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * np.abs(w).max())
    return [type(s) for s in exe.program.steps]


def _layer(n, c, o, h):
    """Forward (computed filters) and data gradient of one 3x3 stride-1 padding-1 layer."""
    x = parameter(et.f32, (n, c, h, h))
    w = parameter(et.f32, (o, c, 3, 3))
    y = ops.convolution(x, w, (1, 1), (1, 1), (1, 1), (1, 1))
    ct = parameter(et.f32, y.shape)
    (dx,) = gradients([y], [x], [ct])
    return og.Function([y], [x, w]), og.Function([dx], [ct, w, x])


#: (N, C, O, plane): 8x8 planes with at least three images (48 tiles) run by Winograd.
WINOGRAD_8X8 = {
    "three-images": (3, 32, 48, 8),
    "cifar-batch": (8, 64, 32, 8),
    "odd-batch": (5, 40, 32, 8),
}


@pytest.mark.parametrize("name", sorted(WINOGRAD_8X8))
def test_8x8_planes_run_by_winograd(name):
    forward, data_gradient = _layer(*WINOGRAD_8X8[name])
    assert WinogradStep in _compare(forward)
    kinds = _compare(data_gradient)
    assert WinogradStep in kinds
    assert ConvDataGradientStep not in kinds


#: (N, C, O, plane): fewer than 16 tiles per image: forward and data gradient run by
#: Winograd too, the data gradient reading the forward's transformed filters flipped.
SMALL_PLANES = {
    "4x4-plane": (16, 32, 32, 4),
    "6x6-plane": (8, 32, 32, 6),
    "4x4-more-in": (16, 48, 32, 4),
    "4x4-more-out": (16, 32, 40, 4),
    "4x4-odd-batch": (13, 48, 32, 4),
    "5x5-plane": (8, 32, 40, 5),
}


@pytest.mark.parametrize("name", sorted(SMALL_PLANES))
def test_small_planes_forward_and_data_gradient_by_winograd(name):
    forward, data_gradient = _layer(*SMALL_PLANES[name])
    assert WinogradStep in _compare(forward)
    exe = og.backend("CPU").compile(data_gradient)
    steps = [s for s in exe.program.steps if isinstance(s, WinogradStep)]
    assert [s.flipped for s in steps] == [True]
    assert ConvDataGradientStep not in _compare(data_gradient)


@pytest.mark.parametrize("shape", [(8, 32, 48, 8), (16, 40, 32, 4)])
def test_forward_and_data_gradient_share_one_filter_transform(shape):
    """In one Function (a training step's), the data gradient reads the forward's transformed
    filters: one transform product for both Winograd steps, and no transposed copy."""
    n, c, o, h = shape
    x = parameter(et.f32, (n, c, h, h))
    w = parameter(et.f32, (o, c, 3, 3))
    y = ops.convolution(x, w, (1, 1), (1, 1), (1, 1), (1, 1))
    ct = parameter(et.f32, y.shape)
    (dx,) = gradients([y], [x], [ct])
    fn = og.Function([y, dx], [x, w, ct])
    _compare(fn, seed=3)
    exe = og.backend("CPU").compile(fn)
    steps = [s for s in exe.program.steps if isinstance(s, WinogradStep)]
    assert sorted(s.flipped for s in steps) == [False, True]
    assert steps[0].u is not None and steps[1].u is not None
    assert steps[0].u.buffer == steps[1].u.buffer and steps[0].u.offset == steps[1].u.offset
    transforms = [m for m in exe.lowered.nodes if m.op.name == "Dot"]
    assert len(transforms) == 1


#: (N, C, O, plane): shapes that keep the im2col GEMM.
KEEP_GEMM = {
    "4x4-two-images": (2, 32, 32, 4),
    "8x8-two-images": (2, 32, 32, 8),
    "6x6-two-images": (2, 32, 32, 6),
}


@pytest.mark.parametrize("name", sorted(KEEP_GEMM))
def test_smaller_planes_keep_the_gemm(name):
    forward, data_gradient = _layer(*KEEP_GEMM[name])
    assert WinogradStep not in _compare(forward)
    kinds = _compare(data_gradient)
    assert WinogradStep not in kinds
    assert ConvDataGradientStep in kinds


#: (N, C, O, plane, groups, transposed): filter gradients with few output channels per group
#: accumulate dWᵀ and transpose it at the end; more keep the dW order. "blocks" splits the
#: patch rows into several units (576 rows of 961 pixels), "chunked" reads a small plane's
#: cotangent through the transposed copy (several images per product). (Odd planes: even ones
#: with 32+ channels run by Winograd, test_cpu_winograd_filters.py.)
FILTER_GRADIENTS = {
    "blocks": (2, 64, 64, 31, 1, True),
    "chunked": (8, 32, 128, 7, 1, True),
    "grouped": (2, 64, 96, 16, 2, True),
    "wide": (2, 16, 160, 12, 1, False),
    "wide-chunked": (6, 16, 192, 6, 1, False),
}


@pytest.mark.parametrize("name", sorted(FILTER_GRADIENTS))
def test_filter_gradients_in_either_order(name):
    n, c, o, h, groups, transposed = FILTER_GRADIENTS[name]
    x = parameter(et.f32, (n, c, h, h))
    w = parameter(et.f32, (o, c // groups, 3, 3))
    y = ops.convolution(x, w, (1, 1), (1, 1), (1, 1), (1, 1), None, groups)
    ct = parameter(et.f32, y.shape)
    (dw,) = gradients([y], [w], [ct])
    fn = og.Function([dw], [x, ct])
    _compare(fn)
    exe = og.backend("CPU").compile(fn)
    steps = [s for s in exe.program.steps if isinstance(s, ConvFilterGradientStep)]
    assert [s.transposed for s in steps] == [transposed]


#: (N, C, O, plane, padding below, padding above): the flipped Winograd data gradient with
#: each padding the rewrite takes (its own padding is 2 - the forward's), odd planes and
#: asymmetric padding included.
FLIPPED_PADDINGS = {
    "pad-0": (8, 32, 40, 6, (0, 0), (0, 0)),
    "pad-2": (16, 40, 32, 4, (2, 2), (2, 2)),
    "asymmetric-odd": (8, 32, 48, 7, (1, 0), (2, 1)),
}


@pytest.mark.parametrize("name", sorted(FLIPPED_PADDINGS))
def test_flipped_data_gradient_paddings(name):
    n, c, o, h, below, above = FLIPPED_PADDINGS[name]
    x = parameter(et.f32, (n, c, h, h))
    w = parameter(et.f32, (o, c, 3, 3))
    y = ops.convolution(x, w, (1, 1), (1, 1), below, above)
    ct = parameter(et.f32, y.shape)
    (dx,) = gradients([y], [x], [ct])
    fn = og.Function([dx], [ct, w, x])
    _compare(fn, seed=5)
    steps = og.backend("CPU").compile(fn).program.steps
    assert [s.flipped for s in steps if isinstance(s, WinogradStep)] == [True]


#: (strides, dilations): 3x3 data gradients the Winograd rewrite leaves to the GEMM and
#: col2im (``ConvDataGradientStep``), on odd planes.
GEMM_DATA_GRADIENTS = {"stride-2": ((2, 2), (1, 1)), "dilation-2": ((1, 1), (2, 2))}


@pytest.mark.parametrize("name", sorted(GEMM_DATA_GRADIENTS))
def test_strided_and_dilated_data_gradients_keep_the_gemm(name):
    strides, dilations = GEMM_DATA_GRADIENTS[name]
    x = parameter(et.f32, (8, 32, 9, 9))
    w = parameter(et.f32, (48, 32, 3, 3))
    y = ops.convolution(x, w, strides, dilations, (1, 1), (1, 1))
    ct = parameter(et.f32, y.shape)
    (dx,) = gradients([y], [x], [ct])
    kinds = _compare(og.Function([dx], [ct, w, x]), seed=7)
    assert WinogradStep not in kinds
    assert ConvDataGradientStep in kinds


def test_flipped_winograd_convolution_names_the_filter_layout_it_expects():
    ct = parameter(et.f32, (4, 32, 4, 4))
    u = parameter(et.f32, (16, 40, 32))  # (16, O, C) of a forward from 32 to 40 channels
    with pytest.raises(OpTypeError, match=r"filters \(16, C, O\)"):
        WinogradConvolution((1, 1), (1, 1), flipped=True)(ct, u)
    dx = WinogradConvolution((1, 1), (1, 1), flipped=True)(parameter(et.f32, (4, 40, 4, 4)), u)
    assert tuple(dx.shape) == (4, 32, 4, 4)
