"""The BERT layer's CPU paths of the H64 round (issue 17, items 3 and 5): the bf16 panel
GEMM's activations rounded by ``vcvtne2ps2bf16`` in row chunks of up to 132 rows (one chunk
for a transformer's 128 tokens) and equal inner blocks of up to 768, with the integer
rounding on each row's tail, or, split into column blocks between threads or deeper than 768,
rounded once into an arena buffer of their own (``with_rounded_rows``); aliasing rows read in place (no padded
copy); the bf16 attention's packing by vectors; results
against an oracle of bf16-rounded operands (ties to even included), on one thread and split
between threads."""

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from bf16_support import needs_bf16  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import bf16
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.fused.lowering.row_padding import PAD
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(64)
#: How a product over the rows rounded once calls its kernel (the helper defines it always).
ROWS_CALL = "og_gemm_bf16_rows((const uint16_t*)"


@pytest.fixture(scope="module")
def one_thread() -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), num_threads=1))


def _rounded(a: np.ndarray) -> np.ndarray:
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


def _check(
    exe: og.Executable, x: np.ndarray, w: np.ndarray, product_of: np.ndarray | None = None
) -> None:
    """``exe(x)`` is ``a @ w`` (``a``: ``product_of``, else ``x``) on bf16-rounded operands
    with f32 accumulation."""
    (got,) = exe(x.reshape(exe.function.parameters[0].shape))
    a = x if product_of is None else product_of
    exact = _rounded(a) @ _rounded(w)
    scale = np.abs(_rounded(a)) @ np.abs(_rounded(w))
    assert np.all(np.abs(got.reshape(exact.shape) - exact) <= 1e-5 * scale + 1e-30)


@needs_bf16
@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        (128, 768, 96),  # BERT's tokens: one chunk
        (bf16.CHUNK + 5, 67, 45),  # two chunks, the second a partial tile
        (2 * bf16.CHUNK + 1, 800, 64),  # three chunks, a one-row tail, two blocks of 400
        (30, 2 * bf16.PANEL_DEPTH + 3, 40),  # three inner blocks of 516, 516 and 507 (odd)
        (16, bf16.PANEL_DEPTH - 1, 32),  # one odd block
        (7, 31, 33),  # a row shorter than one vector: the integer rounding only
        (20, 95, 40),  # two vectors and a tail of 31 per row
    ],
)
def test_activations_rounded_by_vectors_and_tails(one_thread, parallel_cpu, m, k, n):
    x = og.parameter(og.f32, (m, k), name="x")
    w = RNG.standard_normal((k, n)).astype(np.float32)
    fn = og.Function([ops.dot(x, og.constant(w))], [x], name="linear")
    data = RNG.standard_normal((m, k)).astype(np.float32)
    for backend in (one_thread, parallel_cpu):
        exe = backend.compile(fn, precision="bf16")
        assert "og_bf16_row(" in exe.source()
        # split into column blocks (3 threads, enough work) or deeper than the panel GEMM's
        # blocks, the rows are rounded once
        split = backend is parallel_cpu and m * k * n >= PARALLEL_MACS
        assert (ROWS_CALL in exe.source()) is (split or k > bf16.PANEL_DEPTH)
        _check(exe, data, w)


@needs_bf16
def test_ties_round_to_even_in_vectors_and_tails(cpu):
    """Activations exactly halfway between two bf16 values (1 + 2^-8 + j 2^-7) round to the
    even neighbour, as ml_dtypes does, in the vector part (first 32 of each row) and the
    tail (the last 3); a weight of identity picks each rounded value out."""
    k = 35
    x = og.parameter(og.f32, (12, k), name="x")
    eye = np.eye(k, dtype=np.float32)
    fn = og.Function([ops.dot(x, og.constant(eye))], [x], name="ties")
    j = np.arange(12 * k, dtype=np.float32).reshape(12, k) % 128
    data = ((1 + 2.0**-8 + j * 2.0**-7) * np.where(j % 3 == 0, -1, 1)).astype(np.float32)
    data[3, 5], data[4, 33] = np.float32(3.0e38), np.float32(-1.5e-20)
    (got,) = cpu.compile(fn, precision="bf16")(data)
    np.testing.assert_array_equal(got, _rounded(data).astype(np.float32))


@needs_bf16
def test_bf16_products_read_aliasing_rows_in_place(cpu, parallel_cpu):
    """FFN 2's rows of 3072 f32 alias in L1: the f32 product reads a padded copy, the bf16
    product (which rounds its rows into a chunk of its own) reads them in place: no copy step,
    the same values as the oracle."""
    x = og.parameter(og.f32, (1, 40, 3072), name="x")
    w = (RNG.standard_normal((3072, 64)) / 55).astype(np.float32)
    fn = og.Function([ops.matmul(ops.relu(x), og.constant(w))], [x], name="ffn2")
    data = RNG.standard_normal((1, 40, 3072)).astype(np.float32)
    f32 = [s for s in cpu.compile(fn).program.steps if isinstance(s, GemmStep)]
    assert f32[0].a is not None and f32[0].a.strides[0] == 3072 + PAD
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn, precision="bf16")
        kinds = [type(s).__name__ for s in exe.program.steps]
        assert kinds == ["LoopStep", "Bf16GemmStep"]  # the ReLU, then the product
        (gemm,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
        assert gemm.a is not None and gemm.a.strides[0] == 3072
        _check(exe, data.reshape(40, 3072), w, np.maximum(data, 0).reshape(40, 3072))


def _attention_oracle(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(q kᵀ / 8) v with the bf16 step's roundings (q, k; probabilities, v)."""
    s = _rounded(q) @ _rounded(k).swapaxes(-1, -2) * 0.125
    e = np.exp(s - s.max(-1, keepdims=True))
    p = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    return _rounded(p) @ _rounded(v)


@needs_bf16
@pytest.mark.parametrize(
    ("tokens", "head", "keys_transposed"),
    [(40, 64, False), (37, 33, False), (70, 7, False), (45, 20, True), (33, 64, True)],
)
def test_attention_packs_contiguous_heads_by_vectors(
    cpu, parallel_cpu, tokens, head, keys_transposed
):
    """Keys and values whose head values are contiguous per key (a transformer's heads) are
    rounded 32 at a time (``og_bf16_row``); keys given transposed (each head dimension's
    values contiguous) take the element-wise packing. Both agree with the oracle of the same
    roundings; odd head sizes and key counts leave zero padding that must stay zero."""
    heads = 2
    q = og.parameter(og.f32, (1, heads, tokens, head))
    v = og.parameter(og.f32, (1, heads, tokens, head))
    if keys_transposed:
        kt = og.parameter(og.f32, (1, heads, head, tokens))
        scores = ops.matmul(q, kt)
    else:
        kt = og.parameter(og.f32, (1, heads, tokens, head))
        scores = ops.matmul(q, ops.transpose(kt, (0, 1, 3, 2)))
    fn = og.Function([ops.matmul(ops.softmax(scores * 0.125, -1), v)], [q, kt, v])
    qa, ka, va = (RNG.standard_normal(p.shape).astype(np.float32) for p in (q, kt, v))
    keys = ka.swapaxes(-1, -2) if keys_transposed else ka
    want = _attention_oracle(qa, keys, va)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn, precision="bf16")
        assert [type(s).__name__ for s in exe.program.steps].count("Bf16AttentionStep") == 1
        assert ("og_bf16_row(k0" in exe.source()) is not keys_transposed
        assert "og_bf16_row(x, lo" in exe.source()
        (got,) = exe(qa, ka, va)
        # a probability within a few f32 ulps of the oracle's may round to the other bf16
        # and move its row of the output by up to 2^-9 of it (with 33 rows, one such row is
        # 3 % of the elements); f32 products are 5e-4 off at the median, 1.3e-3 at 90 %
        error = np.abs(got - want) / np.abs(want).max()
        assert np.median(error) < 1e-6
        assert np.quantile(error, 0.9) < 1e-5
        assert error.max() < 2e-3


@needs_bf16
def test_rows_rounded_once_live_past_the_planned_arena(one_thread, parallel_cpu):
    """The rounded rows are one arena buffer past the f32 plan's peak, as large as the
    largest product's rows (K rounded up to even), shared by every split product; one thread
    keeps the plan as it was. Two products in a row (the second reading the first's result)
    check that the buffer is rewritten for each."""
    x = og.parameter(og.f32, (50, 301), name="x")
    w1 = RNG.standard_normal((301, 96)).astype(np.float32)
    w2 = RNG.standard_normal((96, 64)).astype(np.float32)
    h = ops.dot(x, og.constant(w1))
    fn = og.Function([ops.dot(h, og.constant(w2))], [x], name="two")
    data = RNG.standard_normal((50, 301)).astype(np.float32)
    single = one_thread.compile(fn, precision="bf16")
    split = parallel_cpu.compile(fn, precision="bf16")
    rounded = [b for b in split.program.buffers if b.label == "bf16 rows"]
    assert len(rounded) == 1 and rounded[0].size == 50 * 302
    plan = split.memory_plan()
    assert plan.offsets[rounded[0].id] >= max(
        o + plan.sizes[b] for b, o in plan.offsets.items() if b != rounded[0].id
    )
    assert plan.peak == plan.offsets[rounded[0].id] + 2 * 50 * 302
    assert not any(b.label == "bf16 rows" for b in single.program.buffers)
    assert split.source().count(ROWS_CALL) == 2
    (want,) = single(data)
    (got,) = split(data)
    np.testing.assert_array_equal(got, want)  # the same roundings, the same sums
    hidden = (_rounded(data) @ _rounded(w1)).astype(np.float32)
    exact = _rounded(hidden) @ _rounded(w2)
    scale = np.abs(_rounded(hidden)) @ np.abs(_rounded(w2))
    assert np.all(np.abs(got - exact) <= 1e-4 * scale + 1e-30)


@needs_bf16
@pytest.mark.parametrize(("m", "k", "n"), [(30, 3075, 70), (128, 2 * bf16.PANEL_DEPTH, 96)])
def test_a_deep_product_on_one_thread_reads_its_rows_rounded_once(
    one_thread, parallel_cpu, m, k, n
):
    """Deeper than ``PANEL_DEPTH`` on one thread, the rows are rounded once too (into the
    arena buffer, no chunk on the stack) and ``og_gemm_bf16_rows`` runs blocks of up to
    ``ROWS_DEPTH``: the same sums in the same order as split between threads (bitwise)."""
    x = og.parameter(og.f32, (m, k), name="x")
    w = RNG.standard_normal((k, n)).astype(np.float32)
    fn = og.Function([ops.dot(x, og.constant(w))], [x], name="deep")
    data = RNG.standard_normal((m, k)).astype(np.float32)
    single = one_thread.compile(fn, precision="bf16")
    assert ROWS_CALL in single.source() and "og_gemm_bf16_panels(a, " not in single.source()
    assert [b.size for b in single.program.buffers if b.label == "bf16 rows"] == [m * (k + k % 2)]
    _check(single, data, w)
    (want,) = single(data)
    np.testing.assert_array_equal(parallel_cpu.compile(fn, precision="bf16")(data)[0], want)
