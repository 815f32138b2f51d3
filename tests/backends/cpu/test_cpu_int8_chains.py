"""QDQ elementwise chains on the CPU (``fold_quantized_chains`` in the fused pipeline): a
GELU quantized around each op runs as one 256-entry lookup, fused into the epilogue of the
integer product before it, and gives exactly the INTERPRETER's bytes."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.fused.lowering.quantized import QGemmStep
from opgraph.backends.fused.program import FallbackStep
from opgraph.ops.elementwise import Erf
from opgraph.ops.indexing import Gather
from opgraph.passes.fuse_quantized_products import fuse_quantized_products

INTERPRETER = og.backend("INTERPRETER")
HAS_AVX2 = {"avx2", "fma", "bmi2"} <= cpu_config.cpu_flags()
#: What a forced ISA needs of this CPU (x86-64-v4: AVX-512 without VBMI, the gather loop).
ISA_FLAGS = {"avx2": {"avx2", "fma", "bmi2"}, "avx512": {"avx512f", "avx512bw", "avx512vl"}}
SHAPE = (4, 96)


def _qdq(x: og.Output, scale: float, zero: int, t: og.ElementType = og.u8) -> og.Output:
    """Q then DQ, as onnxruntime's quantizer wraps every op."""
    s, z = og.constant(np.float32(scale)), og.constant(np.array(zero, t.dtype))
    return ops.dequantize_linear(ops.quantize_linear(x, s, z), s, z)


def _like(value: float, x: og.Output) -> og.Output:
    return ops.broadcast(og.constant(np.float32(value)), x.shape, tuple(range(x.rank)))


def gelu_chain(t: og.ElementType, shape: tuple[int, ...] = SHAPE) -> og.Function:
    """BERT's GELU as onnxruntime's quantize_static writes it (as in
    tests/passes/test_fold_quantized_chains.py)."""
    x = og.parameter(og.f32, shape, name="x")
    zero = 3 if t is og.u8 else -5
    h = _qdq(x, 0.043, zero, t)
    e = _qdq(ops.erf(ops.divide(h, _like(1.4142135, h))), 0.0078, zero, t)
    p = _qdq(ops.add(e, _like(1.0, e)), 0.0079, zero, t)
    m = _qdq(ops.multiply(h, p), 0.05, zero, t)
    s, z = og.constant(np.float32(0.021)), og.constant(np.array(zero, t.dtype))
    return og.Function([ops.quantize_linear(ops.multiply(m, _like(0.5, m)), s, z)], [x])


def _inputs(rng: np.random.Generator) -> np.ndarray:
    data = (rng.standard_normal(SHAPE) * 4).astype(np.float32)
    data.reshape(-1)[:8] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0, 0.0215]
    return data


@pytest.fixture(scope="module", params=["native", "avx2"])
def backend(request: pytest.FixtureRequest) -> CpuBackend:
    if request.param == "avx2" and not HAS_AVX2:
        pytest.skip("this CPU has no AVX2")
    return CpuBackend(dataclasses.replace(default_config(), isa=request.param))


def _lowered_kinds(exe: og.Executable) -> set[type]:
    return {type(n.op) for n in exe.lowered.nodes}  # type: ignore[attr-defined]


@pytest.mark.parametrize("t", [og.u8, og.i8])
def test_a_gelu_chain_is_one_lookup_and_exact(backend, t):
    fn = gelu_chain(t)
    exe = backend.compile(fn)
    kinds = _lowered_kinds(exe)
    assert Gather in kinds and Erf not in kinds
    data = _inputs(np.random.default_rng(9))
    np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))


@pytest.mark.parametrize("t", [og.u8, og.i8])
@pytest.mark.parametrize("shape", [(4, 96), (3, 1000), (70,)])
def test_the_lookup_runs_on_bytes_where_the_target_has_vbmi(t, shape):
    """The stored lookup is emitted as index bytes then ``og_lut256_u8`` in place (its code
    compiled where the target has AVX-512 VBMI, the gather loop elsewhere: AVX2, AVX-512
    without VBMI): rows of whole 64-byte blocks and tails, ranges entered mid-row (two
    threads), the same bytes."""
    fn = gelu_chain(t, shape)
    for isa, threads in (("native", 2), ("native", 1), ("avx2", 1), ("avx512", 1)):
        if isa != "native" and not ISA_FLAGS[isa] <= cpu_config.cpu_flags():
            continue
        config = dataclasses.replace(default_config(), isa=isa, num_threads=threads)
        exe = CpuBackend(config).compile(fn)
        assert "og_lut256_u8(" in exe.source()  # type: ignore[attr-defined]
        data = (np.random.default_rng(5).standard_normal(shape) * 4).astype(np.float32)
        data.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
        np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))


def _ffn() -> og.Function:
    """u8 activations, an integer product with per-column weights, its bias, the quantized
    GELU, and the second product reading the GELU's bytes (BERT's feed-forward block)."""
    rng = np.random.default_rng(4)
    a = og.parameter(og.u8, (8, 64), name="a")
    hidden = ops.dequantize_linear(a, og.constant(np.float32(0.05)), og.constant(np.uint8(128)))

    def dense(x: og.Output, k: int, n: int, scale: float) -> og.Output:
        w = og.constant(rng.integers(-127, 128, (k, n)).astype(np.int8))
        w_scale = og.constant((rng.random(n) * 0.004 + 0.001).astype(np.float32))
        dw = ops.dequantize_linear(w, w_scale, og.constant(np.zeros(n, np.int8)), axis=1)
        y = _qdq(ops.matmul(x, dw), scale, 120)
        bias = og.constant(rng.standard_normal(n).astype(np.float32))
        return _qdq(ops.add(y, ops.broadcast(bias, y.shape, (0,))), scale, 120)

    h = dense(hidden, 64, 96, 0.043)
    e = _qdq(ops.erf(ops.divide(h, _like(1.4142135, h))), 0.0078, 3)
    g = _qdq(ops.multiply(ops.multiply(h, _qdq(ops.add(e, _like(1.0, e)), 0.0079, 3)),
                          _like(0.5, h)), 0.03, 5)  # fmt: skip
    out = dense(g, 96, 32, 0.02)
    return og.Function([out], [a])


def test_the_lookup_fuses_into_the_product_epilogue(backend):
    fn = _ffn()
    exe = backend.compile(fn)
    steps = exe.program.steps  # type: ignore[attr-defined]
    assert not any(isinstance(s, FallbackStep) for s in steps)
    gemms = [s for s in steps if isinstance(s, QGemmStep)]
    assert len(gemms) == 2
    assert any("Gather" in s.label for s in gemms)  # the lookup is in the first's epilogue
    data = np.random.default_rng(2).integers(0, 256, (8, 64)).astype(np.uint8)
    # the oracle: INTERPRETER on the graph with exact integer products (the f32 MatMul of
    # the original rounds its sums, which can move a quantized byte by one)
    want = INTERPRETER.compile(fuse_quantized_products(fn))(data)
    np.testing.assert_array_equal(exe(data), want)


def test_shapes_other_than_the_test_shape_work(backend):
    """A scalar-shaped chain (rank 0) folds too."""
    x = og.parameter(og.f32, (), name="x")
    h = _qdq(x, 0.1, 0)
    out = ops.quantize_linear(ops.erf(h), og.constant(np.float32(0.01)), og.constant(np.uint8(0)))
    fn = og.Function([out], [x])
    for value in (np.float32(-3.0), np.float32(0.7), np.float32(np.nan)):
        np.testing.assert_array_equal(backend.compile(fn)(value), INTERPRETER.compile(fn)(value))


@pytest.mark.parametrize("t", [og.u8, og.i8])
def test_the_gpu_backend_runs_the_lookup_exactly(t):
    """The lookup is an ordinary Gather of a constant table: the GPU backend's loop kernels
    (here on its CPU stand-in device) give the INTERPRETER's bytes too."""
    from opgraph.backends.gpu import FakeDevice, GpuBackend
    from opgraph.backends.gpu.config import GpuConfig

    gpu = GpuBackend(GpuConfig(), device=FakeDevice())  # type: ignore[arg-type]
    fn = gelu_chain(t)
    data = _inputs(np.random.default_rng(3))
    np.testing.assert_array_equal(gpu.compile(fn)(data), INTERPRETER.compile(fn)(data))
