"""The BERT layer's CPU paths (issue 17, items 3 and 5): a panel GEMM whose rows of ``a``
are a multiple of 4 KiB apart reads them from a padded copy (``row_padding.py``); sibling
products by constant weights (attention's Q, K, V) are one packed product
(``packed_products.py``) with the separate products' values; the whole layer agrees with
INTERPRETER in f32 and within its documented bound in bf16."""

import dataclasses

import ml_dtypes
import numpy as np
import pytest
import scipy.special
from bf16_support import needs_bf16  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.packed_products import pack_sibling_products
from opgraph.backends.fused.lowering.row_padding import ALIASING, PAD
from opgraph.backends.fused.program import GemmStep, LoopStep
from opgraph.ops.linalg import MatMul

RNG = np.random.default_rng(53)


def _product(rows: int, inner: int, cols: int) -> tuple[og.Function, np.ndarray, np.ndarray]:
    x = og.parameter(og.f32, (1, rows, inner))
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    fn = og.Function([ops.matmul(ops.relu(x), og.constant(w))], [x])
    data = RNG.standard_normal((1, rows, inner)).astype(np.float32)
    return fn, data, np.maximum(data, 0).astype(np.float64) @ w.astype(np.float64)


#: Whether the configured build is AVX2's (half panels, an AVX2-only CPU or
#: ``OPGRAPH_CPU_ISA=avx2``), which keeps rows unpadded (``TargetFeatures.padded_rows``).
HALVES = cpu_config.default_config().panel_halves()
needs_padded_rows = pytest.mark.skipif(HALVES, reason="AVX2 builds keep rows unpadded")


@pytest.mark.parametrize(
    ("rows", "inner", "padded"),
    [(128, 3072, True), (37, 1024, True), (128, 2048, True), (12, 3072, False),
     (128, 768, False), (64, 1536, False)],
)  # fmt: skip
def test_aliased_rows_are_padded(cpu, parallel_cpu, rows, inner, padded):
    fn, data, want = _product(rows, inner, 96)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        (gemm,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
        assert gemm.panel == 32
        assert gemm.a is not None
        stride = gemm.a.strides[0]
        assert (stride == inner + PAD) is (padded and not HALVES)
        assert stride % ALIASING != 0 or not padded or HALVES
        (got,) = exe(data)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        reference = og.backend("INTERPRETER").compile(fn)(data)[0]
        np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize(("rows", "inner"), [(128, 3072), (37, 1024)])
def test_half_panel_products_read_aliased_rows_in_place(threads, rows, inner):
    """AVX2's 6-row tile (half panels) reads rows 4 KiB apart where they are: no copy."""
    if not cpu_config.supports_isa("avx2"):
        pytest.skip("this CPU cannot run avx2 code")
    config = dataclasses.replace(cpu_config.default_config(), isa="avx2", num_threads=threads)
    fn, data, want = _product(rows, inner, 96)
    exe = CpuBackend(config).compile(fn)
    steps = exe.program.steps
    index = next(i for i, s in enumerate(steps) if isinstance(s, GemmStep))
    gemm = steps[index]
    assert isinstance(gemm, GemmStep) and gemm.panel == 32 and gemm.a is not None
    assert gemm.a.strides[0] == inner
    assert [type(s) for s in steps[:index]] == [LoopStep]  # the ReLU alone, no copy
    (got,) = exe(data)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    reference = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)


def test_padding_copy_is_one_loop_step(cpu):
    fn, data, want = _product(128, 3072, 64)
    exe = cpu.compile(fn)
    steps = exe.program.steps
    index = next(i for i, s in enumerate(steps) if isinstance(s, GemmStep))
    assert any(isinstance(s, LoopStep) for s in steps[:index])
    np.testing.assert_allclose(exe(data)[0], want, rtol=1e-4, atol=1e-4)


def _ffn(rows: int, hidden: int, inner: int) -> tuple[og.Function, og.Function]:
    """``gelu(x W1 + b) W2`` (BERT's FFN), whose second product's rows are ``inner`` floats
    apart, and the same with the GELU a result too, which keeps the padded copy a step of its
    own (what the fused layout replaces)."""
    x = og.parameter(og.f32, (1, rows, hidden))
    bias = RNG.standard_normal(inner).astype(np.float32)
    mid = ops.gelu(_linear(x, _weights(hidden, inner), bias))
    out = ops.matmul(mid, og.constant(_weights(inner, 96)))
    return og.Function([out], [x]), og.Function([out, mid], [x])


@needs_padded_rows
@pytest.mark.parametrize(("rows", "inner"), [(40, 1024), (600, 2048)])
def test_padded_rows_are_written_by_the_first_product(cpu, parallel_cpu, rows, inner):
    """The padded copy of FFN 2's left operand merges into FFN 1's epilogue, and FFN 1 writes
    its result straight into the padded rows (``row_padding.padded_output``): no copy step,
    no dense buffer, the values bitwise those of the build with the copy (600 rows: the
    product's blocks of rows on three threads)."""
    fn, apart = _ffn(rows, 64, inner)
    data = RNG.standard_normal((1, rows, 64)).astype(np.float32)
    (want,) = og.backend("INTERPRETER").compile(fn)(data)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        first, second = _gemms(exe)
        assert first.out is not None and second.a is not None and first.epilogue is not None
        assert first.out.buffer == second.a.buffer
        assert first.out.strides == second.a.strides == (inner + PAD, 1)
        steps = exe.program.steps
        assert steps.index(second) == steps.index(first) + 1  # nothing between them
        (got,) = exe(data)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        copied = backend.compile(apart)
        assert len(copied.program.steps) == len(steps) + 1  # the copy, on its own
        np.testing.assert_array_equal(got, copied(data)[0])


@needs_padded_rows
def test_a_pointwise_step_writes_the_padded_rows(cpu):
    """A pointwise kernel before the product (here a ReLU of the argument) computes into the
    padded rows: the copy merges into it (same shape as the copy)."""
    fn, data, want = _product(128, 3072, 64)
    exe = cpu.compile(fn)
    (relu, gemm) = exe.program.steps
    assert isinstance(relu, LoopStep) and isinstance(gemm, GemmStep) and gemm.a is not None
    ((_, store),) = relu.kernels[0].stores
    assert store.buffer == gemm.a.buffer and gemm.a.strides == (3072 + PAD, 1)
    np.testing.assert_allclose(exe(data)[0], want, rtol=1e-4, atol=1e-4)


def _weights(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def _linear(x: og.Output, w: np.ndarray, b: np.ndarray | None) -> og.Output:
    y = ops.matmul(x, og.constant(w))
    if b is None:
        return y
    return ops.add(y, ops.broadcast(og.constant(b), y.shape, tuple(range(y.rank - 1))))


def _gemms(exe: object) -> list[GemmStep]:
    return [s for s in exe.program.steps if isinstance(s, GemmStep)]  # type: ignore[attr-defined]


def _split(y: og.Output) -> og.Output:
    """Attention's split into heads: views of ``y`` (1, 40, n) as (1, 2, 40, n / 2)."""
    n = y.shape[-1]
    return ops.transpose(ops.reshape(y, (1, 40, 2, n // 2)), (0, 2, 1, 3))


@pytest.mark.parametrize("biases", [True, False])
def test_sibling_products_are_one_product(cpu, parallel_cpu, biases):
    x = og.parameter(og.f32, (1, 40, 96))
    ws = [_weights(96, n) for n in (64, 64, 48)]
    bs = [RNG.standard_normal(w.shape[1]).astype(np.float32) if biases else None for w in ws]
    outs = [_split(_linear(x, w, b)) for w, b in zip(ws, bs, strict=True)]
    fn = og.Function(outs, [x])
    packed = pack_sibling_products(fn)
    assert sum(type(n.op) is MatMul for n in packed.nodes) == 1
    data = RNG.standard_normal((1, 40, 96)).astype(np.float32)
    reference = og.backend("INTERPRETER").compile(fn)(data)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        (gemm,) = _gemms(exe)
        assert gemm.b is not None and gemm.b.shape == (96, 176)
        assert (gemm.epilogue is not None) is biases
        got = exe(data)
        for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
            xi = og.parameter(og.f32, (1, 40, 96))
            (single,) = backend.compile(og.Function([_split(_linear(xi, w, b))], [xi]))(data)
            np.testing.assert_array_equal(got[i], single)  # each column computed as before
            np.testing.assert_allclose(got[i], reference[i], rtol=1e-5, atol=1e-5)


def test_products_that_differ_are_not_packed(cpu):
    x = og.parameter(og.f32, (16, 64))
    other = og.parameter(og.f32, (64, 32))
    y = og.parameter(og.f32, (16, 32))
    outs = [
        ops.matmul(x, og.constant(_weights(64, 32))),  # alone: nothing to pack it with
        ops.matmul(x, other),  # weights not constant
        ops.matmul(y, og.constant(_weights(32, 16))),  # another input
    ]
    fn = og.Function([ops.reshape(o, (-1,)) for o in outs], [x, other, y])
    assert pack_sibling_products(fn) is fn


def test_products_with_work_after_them_stay_apart(cpu):
    """An activation per sibling, or a sibling that is a result, keeps the products apart
    (each keeps its epilogue)."""
    x = og.parameter(og.f32, (24, 32))
    w1, w2 = _weights(32, 40), _weights(32, 40)
    b = RNG.standard_normal(40).astype(np.float32)
    activated = og.Function([ops.relu(_linear(x, w, b)) for w in (w1, w2)], [x])
    assert pack_sibling_products(activated) is activated
    first = _linear(x, w1, b)
    results = og.Function([first, ops.reshape(_linear(x, w2, b), (-1,))], [x])
    assert pack_sibling_products(results) is results
    data = RNG.standard_normal((24, 32)).astype(np.float32)
    exe = cpu.compile(activated)
    assert all(g.epilogue is not None for g in _gemms(exe)) and len(_gemms(exe)) == 2
    want = og.backend("INTERPRETER").compile(activated)(data)
    for got, expected in zip(exe(data), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


HIDDEN, HEADS, FFN, TOKENS = 128, 2, 1024, 40


def _layer() -> og.Function:
    """A post-LN encoder layer of the bench's form (``bench/bert.py``), small: hidden 128,
    2 heads, FFN 1024 (so FFN 2's rows are 4 KiB apart), 40 tokens."""
    x = og.parameter(og.f32, (1, TOKENS, HIDDEN), "hidden")
    head = HIDDEN // HEADS

    def vec(n: int, base: float = 0.0) -> og.Output:
        return og.constant((base + 0.1 * RNG.standard_normal(n)).astype(np.float32))

    def lin(v: og.Output, i: int, o: int) -> og.Output:
        b = RNG.standard_normal(o).astype(np.float32) * 0.1
        return _linear(v, _weights(i, o), b)

    def heads(v: og.Output, perm: tuple[int, ...]) -> og.Output:
        return ops.transpose(ops.reshape(v, (1, TOKENS, HEADS, head)), perm)

    q = heads(lin(x, HIDDEN, HIDDEN), (0, 2, 1, 3))
    k = heads(lin(x, HIDDEN, HIDDEN), (0, 2, 3, 1))
    v = heads(lin(x, HIDDEN, HIDDEN), (0, 2, 1, 3))
    probs = ops.softmax(ops.matmul(q, k) * (1.0 / np.sqrt(head)), -1)
    merged = ops.reshape(ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3)), x.shape)
    h1 = ops.layer_norm(ops.add(lin(merged, HIDDEN, HIDDEN), x), vec(HIDDEN, 1.0), vec(HIDDEN))
    inner = ops.gelu(lin(h1, HIDDEN, FFN))
    out = ops.layer_norm(ops.add(lin(inner, FFN, HIDDEN), h1), vec(HIDDEN, 1.0), vec(HIDDEN))
    return og.Function([out], [x], name="layer")


def test_the_layer_agrees_with_interpreter(cpu, parallel_cpu):
    fn = _layer()
    data = RNG.standard_normal((1, TOKENS, HIDDEN)).astype(np.float32)
    (want,) = og.backend("INTERPRETER").compile(fn)(data)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        kinds = [type(s).__name__ for s in exe.program.steps]
        assert kinds.count("GemmStep") == 4  # Q, K and V packed in one
        assert "AttentionStep" in kinds
        (got,) = exe(data)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_bf16
def test_the_layer_in_bf16_stays_within_the_bound(cpu):
    fn = _layer()
    data = RNG.standard_normal((1, TOKENS, HIDDEN)).astype(np.float32)
    (f32,) = cpu.compile(fn)(data)
    (low,) = cpu.compile(fn, precision="bf16")(data)
    assert np.abs(low - f32).max() / np.abs(f32).max() < 1e-2  # docs/cpu.md's bf16 bound


def _bf16(a: np.ndarray) -> np.ndarray:
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


@needs_bf16
@pytest.mark.parametrize(
    ("heads", "tokens", "head", "mask"),
    [(2, 40, 64, False), (3, 37, 33, True), (1, 70, 7, False), (2, 5, 96, True)],
)
def test_attention_in_bf16_is_the_product_of_bf16_operands(
    cpu, parallel_cpu, heads, tokens, head, mask
):
    """Both products of the fused step read bf16-rounded operands (q, k; probabilities, v)
    and accumulate in f32: an oracle with the same roundings agrees to f32 accuracy."""
    q, k, v = (og.parameter(og.f32, (1, heads, tokens, n)) for n in (head, head, head))
    scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * 0.125
    params = [q, k, v]
    if mask:
        m = og.parameter(og.f32, (1, heads, tokens, tokens))
        scores = ops.add(scores, m)
        params.append(m)
    fn = og.Function([ops.matmul(ops.softmax(scores, -1), v)], params)
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in params]
    qa, ka, va = arrays[:3]
    s = _bf16(qa) @ _bf16(ka).transpose(0, 1, 3, 2) * 0.125
    if mask:
        s = s + arrays[3]
    e = np.exp(s - s.max(-1, keepdims=True))
    p = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    want = _bf16(p) @ _bf16(va)
    # a probability within a few f32 ulps of a bf16 tie may round to the other bf16 (2^-9 of
    # it) and move its whole output row by that: such rows (about 1 %) are held to the bound
    # of a moved probability only
    tie = np.abs((p.view(np.uint32) & 0xFFFF).astype(np.int64) - 0x8000) < 8
    steady = ~tie.any(-1)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn, precision="bf16")
        assert [type(s).__name__ for s in exe.program.steps].count("Bf16AttentionStep") == 1
        (got,) = exe(*arrays)
        # the other rows agree to f32 accuracy (f32 products instead would be 2-6e-3 off
        # nearly everywhere)
        error = np.abs(got - want) / np.abs(want).max()
        assert np.quantile(error[steady], 0.99) < 1e-5
        assert error.max() < 2e-3


@needs_bf16
def test_erf_in_a_bf16_product_epilogue_is_the_fast_form(cpu):
    """bf16 mode's product epilogues compute erf by ``og_erf_fast`` (erf_bf16.py: within
    3.8e-7 absolute); f32 compiles keep ``erff`` (``og_erff`` in FMA builds, vector_math.py)."""
    x = og.parameter(og.f32, (24, 64))
    w = (RNG.standard_normal((64, 96)) * 0.4).astype(np.float32)
    fn = og.Function([ops.erf(ops.matmul(x, og.constant(w)))], [x])
    data = RNG.standard_normal((24, 64)).astype(np.float32)
    data[0, :] = np.inf * np.sign(w[:, 0])  # row 0: +inf in column 0, NaN or ±inf elsewhere
    data[1, :] = np.nan
    exe = cpu.compile(fn, precision="bf16")
    assert "og_erf_fast(" in exe.source() and "erff(" not in exe.source()
    assert "og_erf_fast(" not in cpu.compile(fn).source()
    (got,) = exe(data)
    product = _bf16(data[2:]) @ _bf16(w)
    np.testing.assert_allclose(got[2:], scipy.special.erf(product), rtol=0, atol=2e-6)
    assert np.isnan(got[1]).all()
    assert got[0, 0] == 1.0
    spread = np.linspace(-6, 6, 24 * 96, dtype=np.float32).reshape(24, 96)
    (back,) = cpu.compile(
        og.Function([ops.erf(ops.matmul(x, og.constant(np.eye(64, 96, dtype=np.float32))))], [x]),
        precision="bf16",
    )(spread[:, :64])
    want = scipy.special.erf(_bf16(spread[:, :64]))
    np.testing.assert_allclose(back[:, :64], want, rtol=0, atol=4e-7)
