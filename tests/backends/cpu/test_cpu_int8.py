"""Quantized (QDQ) models on the CPU: the 8-bit integer products (``QGemmStep``,
``QConvStep``) agree exactly with INTERPRETER's reference, on the VNNI path and the portable
one (``isa="avx2"``); ``fuse_quantized_products`` rewrites what it should and nothing else;
QuantizeLinear / DequantizeLinear run as fused pointwise code, not reference fallbacks."""

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest
from int8_graphs import conv_integer_graph, random_bytes  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.fused.lowering.quantized import QConvStep, QGemmStep
from opgraph.backends.fused.program import FallbackStep
from opgraph.ops.quantization import ConvInteger, DequantizeLinear, MatMulInteger
from opgraph.passes.fuse_quantized_products import fuse_quantized_products

INTERPRETER = og.backend("INTERPRETER")
HAS_AVX2 = {"avx2", "fma", "bmi2"} <= cpu_config.cpu_flags()


@pytest.fixture(scope="module", params=["native", "avx2"])
def backend(request: pytest.FixtureRequest) -> CpuBackend:
    """The CPU backend on this CPU's best path, and forced to x86-64-v3 (no VNNI: the
    portable 8-bit kernels)."""
    if request.param == "avx2" and not HAS_AVX2:
        pytest.skip("this CPU has no AVX2")
    return CpuBackend(dataclasses.replace(default_config(), isa=request.param))


def _steps(exe: og.Executable) -> list[type]:
    return [type(s) for s in exe.program.steps]  # type: ignore[attr-defined]


MATMULS = [  # (batch shape, K, N, activation type, zero point)
    ((3,), 7, 5, og.u8, 3),  # K not a multiple of 4, one partial panel
    ((2, 50), 131, 77, og.i8, -4),  # i8 activations (sign bit flipped), a batch axis
    ((128,), 768, 96, og.u8, 128),  # several k blocks, 11 row tiles
    ((1,), 300, 1000, og.u8, 0),  # one row, many panels split between units
    ((5,), 21, 50, og.i8, 7),  # last panel 18 columns: both AVX2 halves, the second partial
]


@pytest.mark.parametrize(("batch", "k", "n", "t", "zero"), MATMULS)
def test_matmul_integer_is_exact(backend, batch, k, n, t, zero):
    rng = np.random.default_rng(k)
    a = og.parameter(t, (*batch, k))
    weights = random_bytes(rng, og.i8, (k, n))
    point = og.constant(np.array(zero, t.dtype))
    y = ops.matmul_integer(a, og.constant(weights), point, og.constant(np.int8(0)))
    fn = og.Function([y], [a])
    x = random_bytes(rng, t, (*batch, k))
    exe = backend.compile(fn)
    assert QGemmStep in _steps(exe)
    np.testing.assert_array_equal(exe(x), INTERPRETER.compile(fn)(x))


CONVOLUTIONS = [  # (N, C, H, W, O, kernel, strides, padding, dilations, groups, type, zero)
    (1, 3, 20, 20, 8, (3, 3), (1, 1), (1, 1), (1, 1), 1, og.u8, 5),
    (2, 16, 17, 15, 24, (3, 3), (2, 2), (1, 1), (1, 1), 1, og.u8, 128),  # shared patches
    (1, 3, 32, 32, 16, (7, 7), (2, 2), (3, 3), (1, 1), 1, og.u8, 100),  # K = 147: a tail
    (1, 8, 9, 9, 12, (3, 3), (1, 1), (2, 2), (2, 2), 2, og.i8, -3),  # groups, dilation, i8
    (1, 64, 14, 14, 128, (1, 1), (2, 2), (0, 0), (1, 1), 1, og.u8, 17),  # 1x1 strided
    (1, 8, 40, 40, 30, (3, 3), (1, 1), (1, 1), (1, 1), 1, og.u8, 9),  # blocks of rows
    # batched (small planes, several images side by side in the panels)
    (4, 32, 4, 4, 40, (3, 3), (1, 1), (1, 1), (1, 1), 1, og.u8, 7),  # 64 columns: exact
    (3, 8, 5, 5, 26, (3, 3), (1, 1), (1, 1), (1, 1), 2, og.i8, -9),  # 75 of 96, groups
    (5, 16, 8, 8, 13, (3, 3), (2, 2), (1, 1), (1, 1), 1, og.u8, 200),  # 4x4 from 8x8
]


@pytest.mark.parametrize(
    ("n", "c", "h", "w", "o", "kernel", "strides", "padding", "dilations", "groups", "t", "zero"),
    CONVOLUTIONS,
)
def test_conv_integer_is_exact(
    backend, n, c, h, w, o, kernel, strides, padding, dilations, groups, t, zero
):
    rng = np.random.default_rng(c * o)
    fn, data = conv_integer_graph(
        rng, (n, c, h, w), o, kernel, strides, padding, dilations, groups, t, zero
    )
    exe = backend.compile(fn)
    assert QConvStep in _steps(exe)
    np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))


def test_nonzero_weight_zero_points_run_the_reference(cpu):
    """Asymmetric weights are outside the kernels' contract: the reference kernel runs them
    (and gives the exact value)."""
    rng = np.random.default_rng(3)
    a = og.parameter(og.u8, (4, 8))
    y = ops.matmul_integer(
        a, og.constant(random_bytes(rng, og.i8, (8, 3))), None, og.constant(np.int8(2))
    )
    fn = og.Function([y], [a])
    x = random_bytes(rng, og.u8, (4, 8))
    exe = cpu.compile(fn)
    assert FallbackStep in _steps(exe)
    np.testing.assert_array_equal(exe(x), INTERPRETER.compile(fn)(x))


# --------------------------------------------------------------------- QDQ graphs
def _qdq_linear(per_column: bool) -> tuple[og.Function, np.ndarray]:
    rng = np.random.default_rng(7)
    x = og.parameter(og.f32, (2, 8, 64), name="x")
    scale, zero = og.constant(np.float32(0.05)), og.constant(np.uint8(120))
    activations = ops.dequantize_linear(ops.quantize_linear(x, scale, zero), scale, zero)
    weights = og.constant(random_bytes(rng, og.i8, (64, 48)))
    if per_column:
        w_scale = og.constant((rng.random(48) * 0.01 + 0.001).astype(np.float32))
        dw = ops.dequantize_linear(weights, w_scale, og.constant(np.zeros(48, np.int8)), axis=1)
    else:
        dw = ops.dequantize_linear(weights, og.constant(np.float32(0.02)))
    y = ops.matmul(activations, dw)
    out_scale = og.constant(np.float32(0.1))
    q = ops.quantize_linear(ops.relu(y), out_scale, og.constant(np.uint8(0)))
    fn = og.Function([y, q], [x])
    return fn, (rng.standard_normal((2, 8, 64)) * 3).astype(np.float32)


def _qdq_conv() -> tuple[og.Function, np.ndarray]:
    rng = np.random.default_rng(8)
    x = og.parameter(og.f32, (1, 8, 12, 12), name="x")
    scale, zero = og.constant(np.float32(0.04)), og.constant(np.uint8(100))
    data = ops.dequantize_linear(ops.quantize_linear(x, scale, zero), scale, zero)
    w_scale = og.constant((rng.random(16) * 0.01 + 0.001).astype(np.float32))
    dw = ops.dequantize_linear(
        og.constant(random_bytes(rng, og.i8, (16, 8, 3, 3))), w_scale,
        og.constant(np.zeros(16, np.int8)), axis=0,
    )  # fmt: skip
    y = ops.convolution(data, dw, padding_below=(1, 1), padding_above=(1, 1))
    return og.Function([y], [x]), rng.standard_normal((1, 8, 12, 12)).astype(np.float32)


@pytest.mark.parametrize("per_column", [False, True])
def test_pass_rewrites_a_qdq_linear_layer(per_column):
    fn, _ = _qdq_linear(per_column)
    rewritten = fuse_quantized_products(fn)
    ops_after = {type(n.op) for n in rewritten.nodes}
    assert MatMulInteger in ops_after
    assert og.ops.MatMul not in ops_after
    assert rewritten.result_types == fn.result_types


def test_pass_rewrites_a_qdq_convolution():
    fn, _ = _qdq_conv()
    rewritten = fuse_quantized_products(fn)
    assert ConvInteger in {type(n.op) for n in rewritten.nodes}


def test_pass_leaves_products_of_two_activations():
    """Attention's products read two dequantized activations: no constant weights, no
    integer product (f32 BLAS serves them)."""
    a = og.parameter(og.u8, (4, 8))
    b = og.parameter(og.i8, (8, 4))
    s = og.constant(np.float32(0.1))
    y = ops.matmul(ops.dequantize_linear(a, s), ops.dequantize_linear(b, s))
    fn = og.Function([y], [a, b])
    assert fuse_quantized_products(fn) is fn


@pytest.mark.parametrize("per_column", [False, True])
def test_qdq_linear_layer_on_the_cpu(backend, per_column):
    fn, x = _qdq_linear(per_column)
    exe = backend.compile(fn)
    steps = _steps(exe)
    assert QGemmStep in steps and FallbackStep not in steps
    want = INTERPRETER.compile(fn)(x)
    got = exe(x)
    # the integer product is exact; the f32 reference rounds its sum (relative 1e-6)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=2e-6 * np.abs(want[0]).max())
    assert np.abs(got[1].astype(int) - want[1].astype(int)).max() <= 1


def test_qdq_convolution_on_the_cpu(backend):
    fn, x = _qdq_conv()
    exe = backend.compile(fn)
    assert QConvStep in _steps(exe)
    want = INTERPRETER.compile(fn)(x)
    np.testing.assert_allclose(exe(x), want, rtol=0, atol=2e-6 * np.abs(want).max())


def _batched_conv() -> tuple[og.Function, np.ndarray]:
    rng = np.random.default_rng(12)
    x = og.parameter(og.f32, (6, 24, 4, 4), name="x")
    scale, zero = og.constant(np.float32(0.05)), og.constant(np.uint8(90))
    data = ops.dequantize_linear(ops.quantize_linear(x, scale, zero), scale, zero)
    w_scale = og.constant((rng.random(36) * 0.01 + 0.001).astype(np.float32))
    dw = ops.dequantize_linear(
        og.constant(random_bytes(rng, og.i8, (36, 24, 3, 3))), w_scale,
        og.constant(np.zeros(36, np.int8)), axis=0,
    )  # fmt: skip
    y = ops.convolution(data, dw, padding_below=(1, 1), padding_above=(1, 1))
    bias = og.constant(rng.standard_normal(36).astype(np.float32))
    y = ops.relu(ops.add(y, ops.broadcast(bias, y.shape, (0, 2, 3))))
    q = ops.quantize_linear(y, og.constant(np.float32(0.04)), og.constant(np.uint8(0)))
    return og.Function([q], [x]), rng.standard_normal((6, 24, 4, 4)).astype(np.float32)


@pytest.mark.parametrize("threads", ["default", "three"])
def test_batched_small_planes_with_an_epilogue(backend, parallel_cpu, threads):
    """4x4 planes of several images share the panels; the copy-out per image and the
    epilogue (scale, bias, ReLU, the next quantize) land on the right elements, with the
    units on the default threads and on three (each worker its own i32 slice)."""
    fn, values = _batched_conv()
    exe = (backend if threads == "default" else parallel_cpu).compile(fn)
    assert any(getattr(s, "batched", False) for s in exe.program.steps)  # type: ignore[attr-defined]
    want = INTERPRETER.compile(fuse_quantized_products(fn))(values)
    np.testing.assert_array_equal(exe(values), want)


def test_quantize_and_dequantize_are_fused_pointwise_code(cpu):
    """No reference fallback, and the reference's edge cases: ties to even, saturation,
    NaN to the zero point, infinities saturated, per-axis parameters."""
    x = og.parameter(og.f32, (2, 3, 4))
    scale = og.constant(np.array([0.5, 0.25, 2.0], np.float32))
    zero = og.constant(np.array([3, -2, 0], np.int8))
    q = ops.quantize_linear(x, scale, zero, axis=1)
    d = ops.dequantize_linear(q, scale, zero, axis=1)
    fn = og.Function([q, d], [x])
    values = np.array([0.25, 0.75, -1.25, 1e9, -1e9, np.nan, np.inf, -np.inf], np.float32)
    data = np.resize(values, (2, 3, 4)).astype(np.float32)
    exe = cpu.compile(fn)
    assert FallbackStep not in _steps(exe)
    for got, want in zip(exe(data), INTERPRETER.compile(fn)(data), strict=True):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ ONNX
def test_onnx_import_keeps_dequantized_weights():
    """Import-time folding keeps DequantizeLinear of 8-bit constants (the pass needs it)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from opgraph.frontends.onnx import import_model

    weights = numpy_helper.from_array(np.arange(12, dtype=np.int8).reshape(4, 3), "w")
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    graph = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["w", "s"], ["wf"]),
            helper.make_node("MatMul", ["x", "wf"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [weights, scale],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    fn = import_model(onnx.ModelProto.FromString(model.SerializeToString()))
    assert DequantizeLinear in {type(n.op) for n in fn.nodes}


def test_onnxruntime_quantized_model_matches_onnxruntime(cpu):
    """A small model quantized by onnxruntime's own tool (QDQ, per-channel weights) runs on
    the 8-bit kernels and gives onnxruntime's int8 result (up to one quantization step)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    quantization = pytest.importorskip("onnxruntime.quantization")
    from onnx import TensorProto, helper, numpy_helper

    from opgraph.frontends.onnx import import_model

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
        numpy_helper.from_array(rng.standard_normal((8 * 6 * 6, 10)).astype(np.float32), "fc"),
        numpy_helper.from_array(np.array([1, -1], np.int64), "shape"),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Reshape", ["r", "shape"], ["f"]),
            helper.make_node("MatMul", ["f", "fc"], ["y"]),
        ],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)}] * 4

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.left.pop() if self.left else None

    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "f32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, source)
        quantization.quantize_static(
            str(source), str(target), Reader(), quant_format=quantization.QuantFormat.QDQ,
            per_channel=True,
        )  # fmt: skip
        quantized = onnx.load(str(target))
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    session = ort.InferenceSession(
        quantized.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (want,) = session.run(None, {"x": x})
    exe = cpu.compile(import_model(quantized))
    steps = _steps(exe)
    assert QConvStep in steps and QGemmStep in steps and FallbackStep not in steps
    step = np.abs(want).max() / 127  # the output's quantization step, about
    (got,) = exe(x)
    np.testing.assert_allclose(got, want, rtol=0, atol=1.01 * step)


def test_the_gpu_backend_runs_the_integer_products_on_the_host():
    """The shared pipeline gives the GPU backend the same 8-bit steps: it runs them by the
    reference kernel (no device kernel yet), exactly, with their epilogues."""
    from opgraph.backends.gpu import FakeDevice, GpuBackend
    from opgraph.backends.gpu.config import GpuConfig

    gpu = GpuBackend(GpuConfig(), device=FakeDevice())  # type: ignore[arg-type]
    for fn, x in (_qdq_linear(True), _qdq_conv()):
        want = INTERPRETER.compile(fn)(x)
        for got, expected in zip(gpu.compile(fn)(x), want, strict=True):
            close = 1 if expected.dtype.kind in "iu" else 2e-6 * np.abs(want[0]).max()
            np.testing.assert_allclose(got, expected, rtol=0, atol=close)
