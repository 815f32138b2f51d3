"""``exe(...)`` with arguments by parameter name, or as one mapping, on every backend."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops


def two_inputs() -> og.Function:
    x = og.parameter(og.f32, (2, 3), name="input")
    y = og.parameter(og.f32, (2, 3), name="other")
    return og.Function([ops.subtract(x, y)], [x, y], name="g")


def values(count: int = 2) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(count)]


def test_names_mapping_and_positions_agree(backend):
    exe = backend.compile(two_inputs())
    a, b = values()
    (want,) = exe(a, b)
    np.testing.assert_allclose(want, a - b, rtol=1e-6)
    for got in (
        exe(input=a, other=b),
        exe(other=b, input=a),
        exe(a, other=b),
        exe({"input": a, "other": b}),
        exe({"other": b, "input": a}),
    ):
        np.testing.assert_array_equal(got[0], want)


def test_self_is_a_parameter_name_like_any_other(backend):
    x = og.parameter(og.f32, (2, 3), name="self")
    y = og.parameter(og.f32, (2, 3))  # unnamed: positional only
    exe = backend.compile(og.Function([ops.multiply(x, y)], [x, y], name="f"))
    a, b = values()
    np.testing.assert_allclose(exe(a, b)[0], a * b, rtol=1e-6)
    with pytest.raises(
        og.GraphError, match=r"missing argument\(s\) for parameter\(s\) #1 \(unnamed\)"
    ):
        exe(self=a)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e, a: e(a, input=a), r"g: parameter 'input' \(#0\) is given twice"),
        (
            lambda e, a: e(inputs=a),
            r"no parameter is named 'inputs'; parameter names: 'input', 'other'",
        ),
        (lambda e, a: e(input=a), r"missing argument\(s\) for parameter\(s\) 'other' \(#1\)"),
        (lambda e, a: e({"input": a}), r"missing argument\(s\) for parameter\(s\) 'other'"),
        (lambda e, a: e({"input": a}, other=a), r"argument 0 is a mapping; pass a mapping"),
        (lambda e, a: e(a, {"other": a}), r"argument 1 is a mapping"),
        (lambda e, a: e({0: a, 1: a}), r"keys must be parameter names \(str\), got 0"),
        (lambda e, a: e(a, a, a, other=a), r"expected 2 argument\(s\), got 3"),
    ],
)
def test_binding_errors(backend, call, message):
    exe = backend.compile(two_inputs())
    with pytest.raises(og.GraphError, match=message):
        call(exe, values(1)[0])


def test_ambiguous_names_must_go_positionally(backend):
    a = og.parameter(og.f32, (2,), name="x")
    b = og.parameter(og.f32, (2,), name="x")
    exe = backend.compile(og.Function([ops.add(a, b)], [a, b], name="h"))
    one = np.ones(2, np.float32)
    np.testing.assert_array_equal(exe(one, one)[0], [2, 2])
    with pytest.raises(
        og.GraphError, match=r"parameters #0, #1 are all named 'x'; pass them positionally"
    ):
        exe(x=one)


def test_wrong_dtype_by_name_names_the_argument(backend):
    exe = backend.compile(two_inputs())
    (a,) = values(1)
    with pytest.raises(og.CallTypeError, match="argument 1: array dtype float64"):
        exe(input=a, other=a.astype(np.float64))
