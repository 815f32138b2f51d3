"""Fused attention's exponentials (``codegen/attention_exp.py``, ``og_exp_sum``: vector code
with an inline ``exp``): each probability within a few f32 roundings of softmax in double
over scores spread from the row's maximum to past the floor, rows of every length around the
vector lanes and the 256-score blocks, NaN rows NaN, in AVX-512 and AVX2 builds."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.attention_exp import EXP_FLOOR
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.lowering.attention import AttentionStep

RNG = np.random.default_rng(111)
ISAS = ["native", "avx2"]
#: Relative error of a probability: the ``exp`` (2.2 ulp), the sum's roundings (each lane
#: sums at most 16 values a block, then blocks and lanes: a few ulp of the sum), the
#: reciprocal and the product by it.
RTOL = 2e-6


def _probabilities(batch: int, m: int) -> og.Function:
    """``softmax(q k) v`` with one query of one feature and ``v`` the identity: the output
    rows are the probabilities of the scores ``k`` (q = 1)."""
    q, k, v = (
        og.parameter(og.f32, s, n)
        for s, n in [((batch, 1, 1), "q"), ((batch, 1, m), "k"), ((batch, m, m), "v")]
    )
    return og.Function([ops.matmul(ops.softmax(ops.matmul(q, k), -1), v)], [q, k, v])


def _backend(isa: str) -> CpuBackend:
    if not supports_isa(isa):
        pytest.fail(f"this CPU cannot run {isa} code")
    return CpuBackend(dataclasses.replace(default_config(), isa=isa))


def _softmax(scores: np.ndarray) -> np.ndarray:
    """Softmax in double of the differences to the row's maximum rounded to f32 (as the
    kernel and the unfused chain take them: at 60 below the maximum their rounding alone
    moves the ``exp`` by 2e-6), with the kernel's floor: scores more than ``-EXP_FLOOR``
    below the maximum weigh 0."""
    d = (scores - scores.max(axis=-1, keepdims=True)).astype(np.float64)
    w = np.where(d < EXP_FLOOR, 0.0, np.exp(d))
    return w / w.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("m", [1, 7, 8, 15, 16, 17, 255, 256, 257, 300, 1500])
def test_probabilities_within_a_few_roundings(isa, m):
    batch = 3
    fn = _probabilities(batch, m)
    exe = _backend(isa).compile(fn)
    assert any(isinstance(s, AttentionStep) for s in exe.program.steps)
    assert "og_exp_sum(" in exe.source()
    scores = RNG.uniform(-100.0, 5.0, (batch, 1, m)).astype(np.float32)
    scores[1] = RNG.standard_normal((1, m)).astype(np.float32)  # a row of no tiny weights
    scores[2, 0, m // 2] = 30.0  # one maximum far above the rest
    q = np.ones((batch, 1, 1), np.float32)
    v = np.broadcast_to(np.eye(m, dtype=np.float32), (batch, m, m)).copy()
    (got,) = exe(q, scores, v)
    want = _softmax(scores)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-37)
    below = scores - scores.max(axis=-1, keepdims=True) < EXP_FLOOR
    assert (got[below] == 0.0).all()  # weighed 0, never a subnormal or garbage
    assert (got[~below] > 0.0).all()


@pytest.mark.parametrize("isa", ISAS)
def test_non_finite_scores(isa):
    """A NaN score makes its row NaN; -inf weighs 0; a row of -inf is NaN (as softmax)."""
    m = 40
    exe = _backend(isa).compile(_probabilities(4, m))
    scores = RNG.standard_normal((4, 1, m)).astype(np.float32)
    scores[0, 0, 33] = np.nan
    scores[1, 0, ::3] = -np.inf
    scores[2, 0, :] = -np.inf
    scores[3, 0, 5] = -3.0e38  # far below the floor: its reduction overflows, weighs 0
    q = np.ones((4, 1, 1), np.float32)
    v = np.broadcast_to(np.eye(m, dtype=np.float32), (4, m, m)).copy()
    (got,) = exe(q, scores, v)
    assert np.isnan(got[0]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got[1], _softmax(scores[1]), rtol=RTOL, atol=1e-37)
    assert (got[1, 0, ::3] == 0.0).all()
    np.testing.assert_allclose(got[3], _softmax(scores[3]), rtol=RTOL, atol=1e-37)
    assert got[3, 0, 5] == 0.0
