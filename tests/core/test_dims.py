"""Symbolic dimensions: canonical expressions, bounds, printing, og.dim's checks."""

import pickle

import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.dim import (
    InconclusiveDimensionError,
    ceil_div,
    dim_max,
    dim_min,
    evaluate,
    free_symbols,
)

b, s = og.dim("batch"), og.dim("seq", max=512)


def test_equal_expressions_compare_and_hash_equal():
    assert 2 * (b + 1) == b + b + 2
    assert hash(2 * (b + 1)) == hash(b + b + 2)
    assert b * s == s * b
    assert (b * 768) // 768 == b
    assert (4 * b + 6) // 2 == 2 * b + 3
    assert (b - 1) // 2 + 1 == (b + 1) // 2
    assert b - b == 0 and type(b - b) is int  # a constant is always a plain int


def test_dim_is_identified_by_name_and_bounds():
    assert og.dim("batch") == b
    assert og.dim("seq") != s  # different bounds: a different dimension


def test_printing():
    assert str(b * s * 768) == "768*batch*seq"
    assert str(2 * s - 1) == "2*seq-1"
    assert str((s + 1) // 2) == "(seq+1)//2"
    assert str(ceil_div(s, 4)) == "(seq+3)//4"
    assert str(dim_max(b, s)) == "max(batch,seq)"
    x = og.parameter(og.f32, (og.dim("batch"), 768), name="x")
    fn = og.Function([ops.relu(x)], [x], name="f")
    assert "function f(%0: f32[batch,768]) -> (f32[batch,768])" in str(fn)


def test_bounds_decide_comparisons_or_raise():
    assert s <= 512 and s < 513 and b >= 0
    assert dim_min(s, 600) == s and dim_max(s, 600) == 600
    with pytest.raises(InconclusiveDimensionError, match="cannot decide whether batch < 3"):
        _ = b < 3
    with pytest.raises(og.OpTypeError, match="concrete integer"):
        range(b)


def test_evaluate_and_free_symbols():
    e = (b + 1) // 2 * s
    assert evaluate(e, {"batch": 5, "seq": 3}) == 9
    assert evaluate(e, {"batch": 5}) == 3 * s
    assert free_symbols((e, 4)) == {og.dim("batch").terms[0][0][0][0], s.terms[0][0][0][0]}


def test_pickles():
    assert pickle.loads(pickle.dumps(b * s + 1)) == b * s + 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("1x",), "identifier"),
        (("n", -1), "0 <= min <= max"),
        (("n", 4, 2), "0 <= min <= max"),
        (("n", 0, 2.5), "max must be an int"),
    ],
)
def test_dim_rejects(args, message):
    with pytest.raises(og.OpTypeError, match=message):
        og.dim(*args)


def test_string_is_sugar_in_parameter():
    assert og.parameter(og.f32, ("batch", 3)).shape == (b, 3)
