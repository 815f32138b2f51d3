"""Max/Min against a constant bound (the clamps of hard-swish, hard-sigmoid, ReLU6) render
without a NaN test of the other operand (``fused/lowering/elementwise.py``): the same bits
as the general form, NaN and signed zeros included, with either instruction set."""

import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops

NAN, INF = float("nan"), float("inf")
N = 1000
#: The general form's NaN test of its first operand, ``((vK != vK || ...``.
NAN_TEST = re.compile(r"\(\(v(\d+) != v\1 \|\|")


def _inputs(bound: float) -> np.ndarray:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(N) * 3).astype(np.float32)
    x[::11], x[3::13], x[5::17], x[7::19], x[9::23] = NAN, -0.0, 0.0, INF, -INF
    if bound == bound:
        x[2::7] = bound  # ties, -0 against +0 where the bound is a zero
    return x


def _functions(op, bound: float, bound_first: bool) -> tuple[og.Function, og.Function]:
    """``op`` of x and ``bound`` as a constant, and the same with the bound a parameter."""
    x = og.parameter(og.f32, (N,))
    b = og.parameter(og.f32, (N,))
    c = ops.scalar_like(bound, x)
    pair = (lambda v, w: op(w, v)) if bound_first else op
    return og.Function([pair(x, c)], [x]), og.Function([pair(x, b)], [x, b])


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("bound", [1.0, 0.0, -0.0, -2.5, 6.0, INF, -INF, NAN])
@pytest.mark.parametrize("op", [ops.maximum, ops.minimum])
@pytest.mark.parametrize("bound_first", [False, True])
@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
def test_constant_bound_gives_the_general_forms_bits(request, backend, op, bound, bound_first):
    cpu = request.getfixturevalue(backend)
    constant, general = _functions(op, bound, bound_first)
    x = _inputs(bound)
    got = cpu.compile(constant)(x)[0]
    _same_bits(got, cpu.compile(general)(x, np.full(N, bound, np.float32))[0])
    want = og.backend("INTERPRETER").compile(constant)(x)[0]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


@pytest.mark.parametrize(
    ("bound", "short"),
    [(1.0, True), (0.0, True), (-2.5, True), (INF, True), (-0.0, False), (NAN, False)],
)
def test_short_form_only_for_a_second_operand_bound(cpu, bound, short):
    """The short form where the bound is the second operand, not NaN and not -0; the
    general form (a NaN test of the first operand) otherwise."""
    for op in (ops.maximum, ops.minimum):
        constant, general = _functions(op, bound, False)
        assert (NAN_TEST.search(cpu.compile(constant).source()) is None) is short
        assert NAN_TEST.search(cpu.compile(general).source()) is not None


def test_hard_swish_has_no_nan_tests(avx2_cpu):
    """Hard-swish's two clamps (bounds 1 and 0) take the short form."""
    x = og.parameter(og.f32, (N,))
    exe = avx2_cpu.compile(og.Function([ops.hard_swish(x)], [x]))
    assert NAN_TEST.search(exe.source()) is None
    values = _inputs(3.0)
    want = og.backend("INTERPRETER").compile(og.Function([ops.hard_swish(x)], [x]))(values)[0]
    np.testing.assert_allclose(exe(values)[0], want, rtol=1e-6, atol=1e-7)
