"""A one-row product by the transpose of a 2-D constant (ONNX ``Gemm`` with ``transB``, how
every exported ``Linear`` reads its weights) that constant folding leaves (over
``DEFAULT_MAX_ELEMENTS``: MobileNetV3's and EfficientNet-B0's classifiers, ResNet-50's) reads
the constant repacked as the panel GEMV's 16-column panels, as a product by the constant
itself does, instead of calling OpenBLAS's ``sgemv`` on the transposed matrix: the same bits
as the panel GEMV of the constant transposed beforehand, on both instruction sets; products
with more rows keep BLAS."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.linalg import GEMV_MIN_COLUMNS, GEMV_PANEL
from opgraph.backends.fused.program import GemmStep
from opgraph.ops.movement import Transpose
from opgraph.passes.fold_constants import DEFAULT_MAX_ELEMENTS

RNG = np.random.default_rng(126)


def _linear(rows, inner, cols, transposed):
    """``x @ W.T + b`` with ``W`` (cols x inner) a constant, read transposed (``transposed``)
    or stored transposed already; the weights, the function and an input."""
    w = (RNG.standard_normal((cols, inner)) / np.sqrt(inner)).astype(np.float32)
    x = og.parameter(og.f32, (rows, inner))
    right = ops.transpose(og.constant(w), (1, 0)) if transposed else og.constant(w.T.copy())
    y = ops.dot(x, right)
    bias = og.constant(RNG.standard_normal(cols).astype(np.float32))
    z = ops.add(y, ops.broadcast(bias, y.shape, (0,)))
    data = RNG.standard_normal((rows, inner)).astype(np.float32)
    return og.Function([z], [x]), data


def _panels(exe):
    """The panel width of each product step, after checking that each reads a transposed
    constant (not folded)."""
    steps = [s for s in exe.program.steps if isinstance(s, GemmStep)]
    assert all(isinstance(s.nodes[0].inputs[1].node.op, Transpose) for s in steps)
    return [s.panel for s in steps]


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("inner, cols", [(1280, 1000), (960, 1280), (1031, 1021), (131072, 9)])
def test_transposed_constant_takes_the_panel_gemv(request, backend, inner, cols):
    assert inner * cols > DEFAULT_MAX_ELEMENTS  # not folded
    cpu = request.getfixturevalue(backend)
    fn, data = _linear(1, inner, cols, True)
    exe = cpu.compile(fn)
    assert _panels(exe) == [GEMV_PANEL]
    assert "scipy_cblas_sgemv(OG_" not in exe.source()
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(exe(data)[0], want, rtol=2e-5, atol=2e-5)
    data[0, 1] = np.nan  # reaches every output
    assert np.isnan(exe(data)[0]).all()


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
def test_transposed_and_stored_weights_give_the_same_bits(request, backend):
    cpu = request.getfixturevalue(backend)
    w = (RNG.standard_normal((1000, 1100)) / np.sqrt(1100)).astype(np.float32)
    data = RNG.standard_normal((1, 1100)).astype(np.float32)
    outs = []
    for right in (ops.transpose(og.constant(w), (1, 0)), og.constant(w.T.copy())):
        x = og.parameter(og.f32, (1, 1100))
        exe = cpu.compile(og.Function([ops.dot(x, right)], [x]))
        steps = [s for s in exe.program.steps if isinstance(s, GemmStep)]
        assert [s.panel for s in steps] == [GEMV_PANEL]
        outs.append(exe(data)[0])
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    np.testing.assert_allclose(outs[0], data @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows, inner, cols", [(2, 1100, 1000), (1, 1 << 18, GEMV_MIN_COLUMNS - 1)])
def test_other_products_by_a_transposed_constant_keep_blas(cpu, rows, inner, cols):
    fn, data = _linear(rows, inner, cols, True)
    exe = cpu.compile(fn)
    assert _panels(exe) == [0]
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(exe(data)[0], want, rtol=2e-5, atol=2e-5)
