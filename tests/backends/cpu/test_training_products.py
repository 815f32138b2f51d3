"""The products a training step's gradients are made of, as the CPU lowers them:

* float sums over leading axes (bias gradients) run as products with a vector of ones
  (``backends/cpu/column_sums.py``), blocked beyond 512 rows, and agree with the reference;
* ``transpose(dot(a, b))`` (a ``x @ w.T`` layer's weight gradient) is computed as
  ``dot(bᵀ, aᵀ)`` (``passes/transpose_products.py``), so nothing reads the product through a
  transpose;
* data gradients of 3x3 stride-1 convolutions with large planes run by Winograd with the
  filter transform computed at run time (``fused/lowering/winograd_gradients.py``).
"""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import gradients
from opgraph.backends.fused.conv_backprop import ConvDataGradientStep
from opgraph.backends.fused.program import GemmStep, LoopStep, WinogradStep
from opgraph.core import element_type as et
from opgraph.core.literals import parameter
from opgraph.ops.linalg import Dot
from opgraph.ops.movement import Transpose
from opgraph.passes import transpose_products

TOLERANCE = {et.f32: 2e-5, et.f64: 1e-12}


def _compare(fn, t, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.shape).astype(t.dtype) for p in fn.parameters]
    exe = og.backend("CPU").compile(fn)
    got = exe(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, w in zip(got, want, strict=True):
        scale = np.abs(w).max() if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=TOLERANCE[t], atol=TOLERANCE[t] * scale)
    return exe


def _kinds(exe):
    return [type(s) for s in exe.program.steps]


#: (shape, axes, keep_dims, runs as a product)
SUMS = {
    "rows-of-a-linear": ((300, 70), (0,), False, True),
    "two-leading-axes": ((4, 37, 33), (0, 1), False, True),
    "keep-dims": ((64, 5, 6), (0,), True, True),
    "blocked-1024": ((1024, 48), (0,), False, True),
    "blocked-twice": ((512 * 40, 20), (0,), False, True),
    "prime-rows-kept-as-loop": ((1031, 40), (0,), False, False),
    "few-rows": ((8, 4096), (0,), False, False),
    "narrow": ((4096, 8), (0,), False, False),
    "inner-axis": ((64, 64), (1,), False, False),
}


@pytest.mark.parametrize("t", [et.f32, et.f64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(SUMS))
def test_leading_axis_sums(name, t):
    shape, axes, keep, product = SUMS[name]
    x = parameter(t, shape)
    fn = og.Function([ops.reduce_sum(x * 2.0, axes, keep)], [x])
    exe = _compare(fn, t)
    assert (GemmStep in _kinds(exe)) is product
    assert exe.fallback_ops() == []


def test_a_long_sum_stays_blocked():
    """20480 rows summed in blocks of 512: as accurate as a blocked sum (a sequential f32 sum
    of these rows is off by 3.5e-6 relative; blocks of 512 by 1.5e-7)."""
    x = parameter(et.f32, (512 * 40, 16))
    exe = og.backend("CPU").compile(og.Function([ops.reduce_sum(x, (0,))], [x]))
    data = np.random.default_rng(0).random((512 * 40, 16), dtype=np.float32)
    (got,) = exe(data)
    want = data.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _weight_gradient(t, rows=12, inputs=7, outputs=5):
    """The gradient of ``x @ w.T`` with respect to ``w`` for the cotangent ``c``: the autodiff makes
    ``transpose(dot(transpose(x), g))``."""
    x = parameter(t, (rows, inputs))
    w = parameter(t, (outputs, inputs))
    c = parameter(t, (rows, outputs))
    y = ops.dot(x, ops.transpose(w, (1, 0)))
    (gw,) = gradients([y], [w], [c])
    return og.Function([gw], [x, w, c])


def _transposed_products(fn):
    return [n for n in fn.nodes if isinstance(n.op, Transpose) and isinstance(n.inputs[0].op, Dot)]


@pytest.mark.parametrize("t", [et.f32, et.f64], ids=["f32", "f64"])
def test_weight_gradients_are_products_in_the_weight_layout(t):
    fn = _weight_gradient(t)
    assert _transposed_products(fn)  # what the autodiff builds
    rewritten = transpose_products(fn)
    assert not _transposed_products(rewritten)
    (gw,) = rewritten.results
    x, _, c = rewritten.parameters
    assert isinstance(gw.op, Dot) and gw.node.inputs[1] is x  # xᵀᵀ cancelled
    assert gw.node.inputs[0].node.inputs[0] is c  # cᵀ: a BLAS operand read transposed
    exe = _compare(fn, t)
    assert all(k is not LoopStep for k in _kinds(exe))  # no transposed copy
    _compare(rewritten, t)


def test_a_product_read_elsewhere_is_left_alone():
    a = parameter(et.f32, (6, 4))
    b = parameter(et.f32, (4, 5))
    p = ops.dot(a, b)
    fn = og.Function([ops.transpose(p, (1, 0)), p * 2.0], [a, b])
    assert transpose_products(fn) is fn
    _compare(fn, et.f32)


def test_a_product_of_higher_rank_is_left_alone():
    a = parameter(et.f32, (2, 3, 4))
    b = parameter(et.f32, (4, 5))
    fn = og.Function([ops.transpose(ops.dot(a, b), (2, 1, 0))], [a, b])
    assert transpose_products(fn) is fn


#: (N, C, O, spatial, padding below, padding above): data gradients of 3x3 stride-1
#: convolutions large enough for Winograd, odd sizes and every padding 0..2.
WINOGRAD = {
    "cifar-like": (2, 16, 24, (16, 16), (1, 1), (1, 1)),
    "odd-plane": (3, 32, 16, (17, 15), (1, 1), (1, 1)),
    "unpadded": (2, 16, 16, (20, 20), (0, 0), (0, 0)),
    "padded-2": (2, 16, 16, (18, 18), (2, 2), (2, 2)),
    "asymmetric": (1, 16, 17, (19, 18), (0, 2), (1, 0)),
}


@pytest.mark.parametrize("name", sorted(WINOGRAD))
def test_data_gradients_by_winograd(name):
    n, c, o, spatial, below, above = WINOGRAD[name]
    x = parameter(et.f32, (n, c, *spatial))
    w = parameter(et.f32, (o, c, 3, 3))
    y = ops.convolution(x, w, (1, 1), (1, 1), below, above)
    ct = parameter(et.f32, y.shape)
    (dx,) = gradients([y], [x], [ct])
    exe = _compare(og.Function([dx], [ct, w, x]), et.f32)
    assert WinogradStep in _kinds(exe)
    assert ConvDataGradientStep not in _kinds(exe)


#: Data gradients Winograd does not take: they keep the GEMM and col2im step.
NOT_WINOGRAD = {
    "small-plane": ((2, 16, 16, 8, 8), et.f32, (1, 1), 1),
    "strided": ((2, 16, 16, 32, 32), et.f32, (2, 2), 1),
    "grouped": ((2, 32, 32, 16, 16), et.f32, (1, 1), 2),
    "few-channels": ((2, 3, 16, 32, 32), et.f32, (1, 1), 1),
    "f64": ((2, 16, 16, 16, 16), et.f64, (1, 1), 1),
}


@pytest.mark.parametrize("name", sorted(NOT_WINOGRAD))
def test_other_data_gradients_keep_the_gemm(name):
    (n, c, o, h, w_), t, strides, groups = NOT_WINOGRAD[name]
    x = parameter(t, (n, c, h, w_))
    w = parameter(t, (o, c // groups, 3, 3))
    y = ops.convolution(x, w, strides, (1, 1), (1, 1), (1, 1), None, groups)
    ct = parameter(t, y.shape)
    (dx,) = gradients([y], [x], [ct])
    exe = _compare(og.Function([dx], [ct, w, x]), t)
    assert WinogradStep not in _kinds(exe)
    assert ConvDataGradientStep in _kinds(exe)


@pytest.mark.parametrize("name", sorted(WINOGRAD))
def test_convolutions_by_computed_filters_run_by_winograd(name):
    """A training step's forward convolution: its filters are a parameter, transformed each
    call (constant filters are transformed at compile time by the inference lowering)."""
    n, c, o, spatial, below, above = WINOGRAD[name]
    c, o = 2 * c, 2 * o  # at least 32 channels in and out
    x = parameter(et.f32, (n, c, *spatial))
    w = parameter(et.f32, (o, c, 3, 3))
    y = ops.relu(ops.convolution(x, w, (1, 1), (1, 1), below, above))
    exe = _compare(og.Function([y], [x, w]), et.f32)
    assert WinogradStep in _kinds(exe)


def test_a_training_step_of_a_conv_layer_matches_the_reference():
    """Forward, data and filter gradients of two stacked 3x3 convolutions, together."""
    x = parameter(et.f32, (2, 32, 16, 16))
    w1 = parameter(et.f32, (48, 32, 3, 3))
    w2 = parameter(et.f32, (32, 48, 3, 3))
    h = ops.relu(ops.convolution(x, w1, (1, 1), (1, 1), (1, 1), (1, 1)))
    y = ops.convolution(h, w2, (1, 1), (1, 1), (1, 1), (1, 1))
    ct = parameter(et.f32, y.shape)
    grads = gradients([y], [x, w1, w2], [ct])
    exe = _compare(og.Function([y, *grads], [x, w1, w2, ct]), et.f32)
    assert _kinds(exe).count(WinogradStep) >= 3  # two forwards, the inner data gradient
