"""A QDQ model's 3x3 convolutions stay integer products: the CPU's Winograd rewrite for
computed filters (``winograd_forward``) took every convolution whose filters were not a
Constant, and a QDQ model's filters are ``DequantizeLinear(constant)``, so ResNet-18's
quantized 3x3 convolutions with 32 channels or more ran as f32 Winograd with the filter
transform recomputed on every call (CIFAR batch 32: 2.2x onnxruntime's CPU time on one thread
instead of 1.2x, and no longer the integer result)."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.quantized import QConvStep
from opgraph.backends.fused.program import WinogradStep


def _qdq_conv(n: int, c: int, size: int, o: int) -> tuple[og.Function, np.ndarray]:
    rng = np.random.default_rng(c + size)
    x = og.parameter(og.f32, (n, c, size, size), name="x")
    scale, zero = og.constant(np.float32(0.04)), og.constant(np.uint8(100))
    data = ops.dequantize_linear(ops.quantize_linear(x, scale, zero), scale, zero)
    w_scale = og.constant((rng.random(o) * 0.01 + 0.001).astype(np.float32))
    weights = og.constant(rng.integers(-128, 128, (o, c, 3, 3)).astype(np.int8))
    dw = ops.dequantize_linear(weights, w_scale, og.constant(np.zeros(o, np.int8)), axis=0)
    y = ops.relu(ops.convolution(data, dw, padding_below=(1, 1), padding_above=(1, 1)))
    fn = og.Function([y], [x], name="qconv")
    return fn, rng.standard_normal((n, c, size, size)).astype(np.float32)


@pytest.mark.parametrize(
    ("n", "c", "size", "o"),
    [(1, 64, 32, 64), (4, 32, 16, 48), (2, 128, 16, 128)],
    ids=["64ch-32x32", "32ch-batch4", "128ch-16x16"],
)
def test_qdq_3x3_convolutions_are_integer_products(n, c, size, o):
    fn, x = _qdq_conv(n, c, size, o)
    exe = og.backend("CPU").compile(fn)
    kinds = [type(s) for s in exe.program.steps]  # type: ignore[attr-defined]
    assert QConvStep in kinds and WinogradStep not in kinds
    want = og.backend("INTERPRETER").compile(fn)(x)[0]
    # the integer product is exact; the f32 reference rounds its sum (as test_cpu_int8)
    np.testing.assert_allclose(exe(x)[0], want, rtol=0, atol=2e-6 * np.abs(want).max())


def test_computed_f32_filters_still_take_winograd():
    """The rewrite keeps its own case: filters that are a Parameter (a training step)."""
    x = og.parameter(og.f32, (1, 64, 32, 32), name="x")
    w = og.parameter(og.f32, (64, 64, 3, 3), name="w")
    y = ops.convolution(x, w, padding_below=(1, 1), padding_above=(1, 1))
    exe = og.backend("CPU").compile(og.Function([y], [x, w], name="train"))
    assert WinogradStep in [type(s) for s in exe.program.steps]  # type: ignore[attr-defined]
