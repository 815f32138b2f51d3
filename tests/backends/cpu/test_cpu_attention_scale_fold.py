"""Fused attention folds scalar constant factors on q and k into its scale and drops an
all-zero constant mask (``lowering/attention.py``: torch's export of
``scaled_dot_product_attention``, as in ViT, scales q and k by the 4th root of the head width
and adds a zero mask); other factors and masks stay, and every form keeps INTERPRETER's
values."""

import math

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.attention import AttentionStep

RNG = np.random.default_rng(29)


def _sdpa(heads=2, tokens=17, width=32, factor=None, mask=0.0, divide=False, scaled="qk"):
    """ViT's exported attention: q (heads, tokens, d) and k already as (heads, d, tokens),
    each times ``factor`` (a constant, or a parameter when ``factor`` is "param"), the
    scores plus a constant ``mask`` of the scores' shape broadcast from (1, tokens, tokens)
    (None: no mask), divided by sqrt(d) when ``divide``, the NaN-guarded softmax, times v."""
    d = width // heads
    q = og.parameter(og.f32, (heads, tokens, d), "q")
    k = og.parameter(og.f32, (heads, d, tokens), "k")
    v = og.parameter(og.f32, (heads, tokens, d), "v")
    params = [q, k, v]
    c: og.Output | float = d**-0.25 if factor is None else factor
    if factor == "param":
        c = og.parameter(og.f32, (), "c")
        params.append(c)
    if isinstance(c, float):
        c = og.constant(np.float32(c))
    wide = ops.broadcast_to(c, q.shape)
    qs = ops.multiply(q, wide) if "q" in scaled else q
    ks = ops.multiply(ops.broadcast_to(c, k.shape), k) if "k" in scaled else k
    scores = ops.matmul(qs, ks)
    if mask is not None:
        constant = og.constant(np.full((1, tokens, tokens), mask, np.float32))
        scores = ops.add(scores, ops.broadcast_to(constant, scores.shape))
    if divide:
        scores = scores / math.sqrt(d)
    p = ops.softmax(scores, -1)
    zero = ops.broadcast_to(og.constant(np.float32(0.0)), p.shape)
    guarded = ops.select(ops.is_nan(p), zero, p)
    return og.Function([ops.matmul(guarded, v)], params)


def _run(backend, fn):
    """The compiled function's attention step, checked against INTERPRETER."""
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    if len(arrays) == 4:
        arrays[3] = np.float32(0.42)
    exe = backend.compile(fn)
    (got,) = exe(*arrays)
    (want,) = og.backend("INTERPRETER").compile(fn)(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * float(np.abs(want).max()))
    (step,) = [s for s in exe.program.steps if isinstance(s, AttentionStep)]
    return exe, step


def test_factors_on_q_and_k_fold_into_the_scale_and_a_zero_mask_goes(cpu):
    """The steps of the same attention without factors and mask: no pass multiplies q or
    k, no mask is read."""
    exe, step = _run(cpu, _sdpa())
    plain, _ = _run(cpu, _sdpa(scaled="", mask=None))
    assert len(exe.program.steps) == len(plain.program.steps)
    assert step.mask is None
    assert step.scale == pytest.approx(16**-0.5, rel=1e-6) and not step.divide


@pytest.mark.parametrize("scaled", ["q", "k"])
def test_a_factor_on_one_operand_folds(parallel_cpu, scaled):
    _, step = _run(parallel_cpu, _sdpa(scaled=scaled, mask=None))
    assert step.scale == pytest.approx(16**-0.25, rel=1e-6)


def test_a_divided_scale_takes_the_factors(cpu):
    """``(q·c)(k·c) / r`` is ``(q·k) / (r / c²)``."""
    _, step = _run(cpu, _sdpa(factor=0.5, divide=True))
    assert step.divide and step.scale == pytest.approx(4.0 / 0.25)


def test_a_nonzero_mask_stays(cpu):
    _, step = _run(cpu, _sdpa(mask=-3.0))
    assert step.mask is not None


def test_factors_that_are_not_constants_stay(cpu):
    exe, step = _run(cpu, _sdpa(factor="param", mask=None))
    plain, _ = _run(cpu, _sdpa(scaled="", mask=None))
    assert step.scale == 1.0 and len(exe.program.steps) > len(plain.program.steps)


def test_a_zero_factor_is_not_folded(cpu):
    """Folding 0 would leave a scale of 0 (a divided one: infinite): the products by 0 stay."""
    for divide in (False, True):
        exe, step = _run(cpu, _sdpa(factor=0.0, mask=None, divide=divide))
        plain, _ = _run(cpu, _sdpa(scaled="", mask=None, divide=divide))
        assert len(exe.program.steps) > len(plain.program.steps)
