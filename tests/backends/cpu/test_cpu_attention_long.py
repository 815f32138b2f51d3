"""Fused attention with long keys (Whisper-tiny's encoder: 1500 positions, 6 heads of 64):
the division by each row's sum is applied to the output rows after the product by ``v``
(``AttentionEmitter.deferred``), except where the NaN guard needs each probability; the
values are INTERPRETER's within the attention tests' tolerance."""

import dataclasses
import math
from unittest import mock

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.attention import AttentionEmitter
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.lowering.attention import AttentionStep

RNG = np.random.default_rng(86)


def _heads(x: og.Output, tokens: int, heads: int, perm: tuple[int, ...]) -> og.Output:
    return ops.transpose(ops.reshape(x, (1, tokens, heads, x.shape[-1] // heads)), perm)


def _attention(tokens: int, heads: int, width: int, guard: bool = False) -> og.Function:
    """Whisper's self-attention between its projections ((1, tokens, width) each)."""
    q, k, v = (og.parameter(og.f32, (1, tokens, width), n) for n in "qkv")
    scores = ops.matmul(
        _heads(q, tokens, heads, (0, 2, 1, 3)), _heads(k, tokens, heads, (0, 2, 3, 1))
    )
    p = ops.softmax(scores * (1.0 / math.sqrt(width // heads)), -1)
    if guard:  # GPT-2's export: NaN probabilities become 0 (zero_nan: the division stays)
        p = ops.select(ops.is_nan(p), ops.broadcast_to(og.constant(np.float32(0)), p.shape), p)
    context = ops.matmul(p, _heads(v, tokens, heads, (0, 2, 1, 3)))
    merged = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (1, tokens, width))
    return og.Function([merged], [q, k, v])


def _run(backend: og.Backend, fn: og.Function, arrays: list[np.ndarray]) -> tuple[str, np.ndarray]:
    exe = backend.compile(fn)
    step = [s for s in exe.program.steps if isinstance(s, AttentionStep)]
    assert len(step) == 1
    (got,) = exe(*arrays)
    (want,) = og.backend("INTERPRETER").compile(fn)(*arrays)
    scale = float(np.nanmax(np.abs(want)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * scale)
    return exe.source(), got


@pytest.mark.parametrize("fixture", ["cpu", "parallel_cpu"])
def test_whisper_attention_normalizes_the_output_rows(request, fixture):
    fn = _attention(1500, 6, 384)
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    source, _ = _run(request.getfixturevalue(fixture), fn, arrays)
    assert "inv[r] = 1.0f / total;" in source  # the deferred division
    assert "x[j] / total" not in source


@pytest.mark.parametrize("tokens", [1, 13, 100])
def test_short_and_odd_blocks(parallel_cpu, tokens):
    """Blocks of fewer rows than the block size (the last one, one row, one block)."""
    fn = _attention(tokens, 2, 64)
    arrays = [(4 * RNG.standard_normal(p.shape)).astype(np.float32) for p in fn.parameters]
    _run(parallel_cpu, fn, arrays)


def test_nan_scores_stay_nan_as_in_the_reference(cpu):
    fn = _attention(64, 2, 64)
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    arrays[0][0, 3, :32] = np.nan  # row 3 of head 0: every score NaN
    _, got = _run(cpu, fn, arrays)
    assert np.isnan(got[0, 3, :32]).all()
    assert np.isfinite(got[0, 3, 32:]).all() and np.isfinite(got[0, :3]).all()


def test_the_nan_guard_keeps_the_division_on_the_scores(cpu):
    fn = _attention(64, 2, 64, guard=True)
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    arrays[0][0, 3, :32] = np.nan
    source, got = _run(cpu, fn, arrays)
    assert "x[j] / total" in source and "inv[r]" not in source
    assert not got[0, 3, :32].any()  # the guard's zeros


@pytest.mark.parametrize(("tokens", "heads", "width"), [(1500, 2, 128), (37, 3, 96), (100, 2, 32)])
def test_keys_transposed_in_registers_are_the_scalar_pack(tokens, heads, width):
    """AVX-512 packs k (each key's head values contiguous) by 16 x 16 blocks transposed in
    registers (``AttentionEmitter._keys_by_blocks``): the same panels as the scalar loop, so
    the outputs are bitwise those of a build with the scalar pack only; keys past the last
    whole block (1500 = 46 x 32 + 28) are zero rows of the transpose."""
    if not supports_isa("avx512"):
        pytest.fail("this CPU cannot run avx512 code")
    backend = CpuBackend(dataclasses.replace(default_config(), isa="avx512", num_threads=3))
    fn = _attention(tokens, heads, width)
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    source, got = _run(backend, fn, arrays)
    assert "t4_15" in source  # the transposed pack
    with mock.patch.object(AttentionEmitter, "_keys_by_blocks", lambda self, stride: []):
        scalar_source, want = _run(backend, fn, arrays)
    assert "t4_15" not in scalar_source
    assert np.array_equal(got, want)
