"""Fused attention: ``softmax(q·k * scale [+ mask]) · v`` runs as one AttentionStep (scores
kept per block of query rows, never written whole) with INTERPRETER's values; graphs that
only look like it keep the unfused steps."""

import dataclasses
import math

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.lowering.attention import Attention, AttentionStep, block_rows
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(17)


def _heads(x: og.Output, batch: int, tokens: int, heads: int, perm: tuple[int, ...]):
    return ops.transpose(ops.reshape(x, (batch, tokens, heads, x.shape[-1] // heads)), perm)


def _bert_attention(batch, tokens, heads, width, scale="mul", mask=False):
    """BERT's layout: projections (batch, tokens, width) split into heads by views."""
    q, k, v = (og.parameter(og.f32, (batch, tokens, width), n) for n in "qkv")
    qh = _heads(q, batch, tokens, heads, (0, 2, 1, 3))
    kh = _heads(k, batch, tokens, heads, (0, 2, 3, 1))
    vh = _heads(v, batch, tokens, heads, (0, 2, 1, 3))
    scores = ops.matmul(qh, kh)
    root = math.sqrt(width // heads)
    if scale == "mul":
        scores = scores * (1.0 / root)
    elif scale == "div":
        scores = scores / root
    params = [q, k, v]
    if mask:
        m = og.parameter(og.f32, (batch, 1, 1, tokens), "mask")
        scores = ops.add(scores, ops.broadcast_to(m, scores.shape))
        params.append(m)
    context = ops.matmul(ops.softmax(scores, -1), vh)
    merged = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (batch, tokens, width))
    return og.Function([merged], params)


def _inputs(fn, mask_rows=()):
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    if len(arrays) == 4:
        arrays[3] = np.where(RNG.random(arrays[3].shape) < 0.3, -1e4, 0.0).astype(np.float32)
        for b in mask_rows:
            arrays[3][b] = -np.inf
    return arrays


def _check(backend, fn, arrays, fused=True):
    exe = backend.compile(fn)
    steps = exe.program.steps
    attention = [s for s in steps if isinstance(s, AttentionStep)]
    assert len(attention) == (1 if fused else 0)
    if fused:  # neither product runs as a GEMM step of its own
        assert not any(isinstance(s, GemmStep) for s in steps)
    (got,) = exe(*arrays)
    (want,) = og.backend("INTERPRETER").compile(fn)(*arrays)
    scale = float(np.nanmax(np.abs(want))) if np.isfinite(want).any() else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * scale)
    return exe


@pytest.mark.parametrize("scale", ["mul", "div", "none"])
def test_bert_attention_is_one_step_with_the_reference_values(cpu, scale):
    fn = _bert_attention(1, 128, 12, 768, scale)
    _check(cpu, fn, _inputs(fn))


def test_merged_heads_feed_the_projection_without_a_copy(cpu):
    attention = _bert_attention(1, 16, 4, 64, "mul")
    (merged,) = attention.results
    w = og.constant(RNG.standard_normal((64, 64)).astype(np.float32))
    fn = og.Function([ops.matmul(merged, w)], attention.parameters)
    exe = cpu.compile(fn)
    # written with the heads interleaved: merging them is a view, read by the GEMM as it is
    assert [type(s) for s in exe.program.steps] == [AttentionStep, GemmStep]
    arrays = _inputs(fn)
    (want,) = og.backend("INTERPRETER").compile(fn)(*arrays)
    np.testing.assert_allclose(exe(*arrays)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("batch", "tokens"), [(2, 37), (1, 300), (3, 5)])
def test_blocks_of_rows_split_between_threads(parallel_cpu, batch, tokens):
    fn = _bert_attention(batch, tokens, 4, 64, "mul")
    _check(parallel_cpu, fn, _inputs(fn))


def test_additive_mask_broadcast_from_keys(parallel_cpu):
    fn = _bert_attention(2, 40, 2, 32, "div", mask=True)
    _check(parallel_cpu, fn, _inputs(fn))


def test_fully_masked_rows_are_nan_as_in_the_reference(cpu):
    fn = _bert_attention(2, 16, 2, 16, "mul", mask=True)
    arrays = _inputs(fn, mask_rows=(1,))
    exe = cpu.compile(fn)
    (got,) = exe(*arrays)
    (want,) = og.backend("INTERPRETER").compile(fn)(*arrays)
    assert np.isnan(want[1]).all() and np.isnan(got[1]).all()
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_plain_rank3_operands(cpu):
    q, k, v = (og.parameter(og.f32, s) for s in [(3, 20, 8), (3, 8, 30), (3, 30, 5)])
    fn = og.Function([ops.matmul(ops.softmax(ops.matmul(q, k) * 0.5, -1), v)], [q, k, v])
    _check(cpu, fn, _inputs(fn))


def test_lookalikes_are_not_fused(cpu):
    q, k, v = (og.parameter(og.f32, s) for s in [(2, 6, 4), (2, 4, 6), (2, 6, 3)])
    across = ops.matmul(ops.softmax(ops.matmul(q, k), 1), v)  # softmax over the queries
    fn = og.Function([across], [q, k, v])
    _check(cpu, fn, _inputs(fn), fused=False)
    k1 = og.parameter(og.f32, (1, 4, 6))  # k broadcast over the batch
    shared = ops.matmul(ops.softmax(ops.matmul(q, k1), -1), v)
    fn = og.Function([shared], [q, k1, v])
    _check(cpu, fn, _inputs(fn), fused=False)
    q64, k64, v64 = (og.parameter(og.f64, s) for s in [(2, 6, 4), (2, 4, 6), (2, 6, 3)])
    fn = og.Function([ops.matmul(ops.softmax(ops.matmul(q64, k64), -1), v64)], [q64, k64, v64])
    exe = cpu.compile(fn)
    assert not any(isinstance(s, AttentionStep) for s in exe.program.steps)


def test_scores_also_used_elsewhere_stay_correct(cpu):
    q, k, v = (og.parameter(og.f32, s) for s in [(2, 6, 4), (2, 4, 6), (2, 6, 3)])
    probs = ops.softmax(ops.matmul(q, k) * 0.25, -1)
    fn = og.Function([ops.matmul(probs, v), probs], [q, k, v])
    arrays = _inputs(fn)
    got = cpu.compile(fn)(*arrays)
    want = og.backend("INTERPRETER").compile(fn)(*arrays)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_the_internal_op_checks_its_operands():
    q, k, v = (og.parameter(og.f32, s) for s in [(2, 6, 4), (2, 5, 6), (2, 6, 3)])
    with pytest.raises(og.OpTypeError, match="do not form an attention product"):
        Attention(0.5)(q, k, v)
    with pytest.raises(og.OpTypeError, match="expected 3 or 4 inputs"):
        Attention(0.5)(q, k)


def test_row_blocks_fit_the_score_budget():
    assert block_rows(128, 128, 12, 2) == 128  # a whole BERT head: 64 KiB of scores
    assert block_rows(4096, 4096, 1, 2) == 8  # 128 KiB of scores
    assert block_rows(512, 512, 1, 2) == 64  # 128 KiB, 8 units: 4 per thread already
    assert block_rows(256, 64, 1, 2) == 32  # halved until there are 4 units per thread


def test_strided_queries_and_odd_sizes(parallel_cpu):
    qt = og.parameter(og.f32, (2, 3, 5, 33))  # q read through a transpose: strided rows
    k, v = og.parameter(og.f32, (2, 3, 5, 70)), og.parameter(og.f32, (2, 3, 70, 37))
    q = ops.transpose(qt, (0, 1, 3, 2))
    fn = og.Function([ops.matmul(ops.softmax(ops.matmul(q, k) / 3.0, -1), v)], [qt, k, v])
    _check(parallel_cpu, fn, _inputs(fn))


def test_empty_operands_are_left_unfused(cpu):
    q, k, v = (og.parameter(og.f32, s) for s in [(2, 6, 0), (2, 0, 5), (2, 5, 3)])
    fn = og.Function([ops.matmul(ops.softmax(ops.matmul(q, k), -1), v)], [q, k, v])
    _check(cpu, fn, _inputs(fn), fused=False)


@pytest.mark.parametrize("backend", ["cpu", "parallel_cpu"])
@pytest.mark.parametrize(("batch", "heads"), [(1, 1), (2, 3)])
def test_packed_keys_are_never_stale(request, backend, batch, heads):
    """Each thread packs an entry's k and v once for the blocks of that entry it runs: a
    second call with other values, and entries changing between a thread's blocks, still
    give the reference values (the packed entry is forgotten at the start of every run)."""
    runner = request.getfixturevalue(backend)
    fn = _bert_attention(batch, 600, heads, 16 * heads, "mul")  # several blocks per entry
    exe = _check(runner, fn, _inputs(fn))
    interpreter = og.backend("INTERPRETER").compile(fn)
    for _ in range(2):
        arrays = _inputs(fn)
        (want,) = interpreter(*arrays)
        np.testing.assert_allclose(exe(*arrays)[0], want, rtol=1e-5, atol=1e-5)


def _guarded_causal_attention(tokens, heads, width, guard_value=0.0, mask_rows=()):
    """GPT-2 as torch exports it: a causal mask added to the scores, and the probabilities
    passed through ``Select(IsNaN(p), 0, p)`` before the product with v."""
    fn = _bert_attention(1, tokens, heads, width, "mul")
    q, k, v = fn.parameters
    d = width // heads
    qh = _heads(q, 1, tokens, heads, (0, 2, 1, 3))
    kh = _heads(k, 1, tokens, heads, (0, 2, 3, 1))
    vh = _heads(v, 1, tokens, heads, (0, 2, 1, 3))
    causal = np.triu(np.full((tokens, tokens), -np.inf, np.float32), 1)[None]
    for r in mask_rows:
        causal[0, r, :] = -np.inf
    scores = ops.matmul(qh, kh) * (1.0 / math.sqrt(d))
    scores = ops.add(scores, ops.broadcast_to(og.constant(causal), scores.shape))
    p = ops.softmax(scores, -1)
    fill = ops.broadcast_to(og.constant(np.float32(guard_value)), p.shape)
    p = ops.select(ops.is_nan(p), fill, p)
    context = ops.matmul(p, vh)
    merged = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (1, tokens, width))
    return og.Function([merged], [q, k, v])


@pytest.mark.parametrize("mask_rows", [(), (0, 5)])
def test_causal_attention_with_a_nan_guard_is_fused(parallel_cpu, mask_rows):
    """Rows whose scores are all -inf give zeros (the guard), not NaN."""
    fn = _guarded_causal_attention(40, 2, 32, mask_rows=mask_rows)
    exe = _check(parallel_cpu, fn, _inputs(fn))
    step = next(s for s in exe.program.steps if isinstance(s, AttentionStep))
    assert step.zero_nan
    (got,) = exe(*_inputs(fn))
    assert np.isfinite(got).all()
    for r in mask_rows:
        assert not got[0, r].any()


def test_a_guard_that_is_not_zero_is_not_fused(cpu):
    fn = _guarded_causal_attention(16, 2, 16, guard_value=1.0)
    _check(cpu, fn, _inputs(fn), fused=False)


@pytest.mark.parametrize("isa", ["native", "avx2"])
def test_scores_far_below_the_row_maximum_weigh_nothing(isa):
    """Masks spread over 0..-100 below each row's maximum: the scores more than
    ``EXP_FLOOR`` (87.3) below it weigh 0 (their ``exp`` is under f32's smallest normal;
    ``og_exp_sum``, codegen/attention_exp.py); the values are INTERPRETER's, so a floor
    nearer the maximum (weights the tolerance sees dropped) fails."""
    if not supports_isa(isa):
        pytest.fail(f"this CPU cannot run {isa} code")
    backend = CpuBackend(dataclasses.replace(default_config(), isa=isa, num_threads=2))
    fn = _bert_attention(2, 48, 2, 32, "mul", mask=True)
    arrays = _inputs(fn)
    arrays[3] = RNG.uniform(-100.0, 0.0, arrays[3].shape).astype(np.float32)
    exe = _check(backend, fn, arrays)
    assert "og_exp_sum(" in exe.source()
