"""unbox_tuples, inline_calls and decompose: structure before/after and unchanged numerics."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.passes import decompose, inline_calls, unbox_tuples
from opgraph.testing.fake_ops import SquarePlusOne
from opgraph.testing.oracle import evaluate


def op_names(fn):
    return [n.op.name for n in fn.ops]


def test_unbox_tuples_flattens_results_and_projects():
    a = og.parameter(og.f32, (2,))
    b = og.parameter(og.f32, (2,))
    inner = ops.tuple_(ops.add(a, b), b)
    outer = ops.tuple_(a, inner)
    fn = og.Function([outer, ops.get_tuple_element(ops.get_tuple_element(outer, 1), 0)], [a, b])
    lowered = unbox_tuples(fn)
    assert "Tuple" not in op_names(lowered) and "GetTupleElement" not in op_names(lowered)
    assert len(lowered.results) == 4
    assert lowered.results[0] == a and lowered.results[2] == b
    assert lowered.results[1] == lowered.results[3]
    args = [np.ones(2, np.float32), np.full(2, 2, np.float32)]
    for got, want in zip(evaluate(lowered, args), evaluate(fn, args), strict=True):
        np.testing.assert_array_equal(got, want)


def test_unbox_tuples_leaves_the_input_function_alone():
    a = og.parameter(og.f32, (2,))
    fn = og.Function([ops.tuple_(a, a)], [a])
    text = str(fn)
    unbox_tuples(fn)
    assert str(fn) == text


def test_inline_calls_nested():
    x = og.parameter(og.f32, (3,))
    square = og.Function([ops.multiply(x, x)], [x], name="square")
    y = og.parameter(og.f32, (3,))
    (sq,) = ops.call(square, y)
    twice = og.Function([ops.add(sq, og.constant([1.0, 1.0, 1.0]))], [y], name="twice")
    z = og.parameter(og.f32, (3,))
    (r,) = ops.call(twice, ops.exp(z))
    fn = og.Function([r], [z])
    lowered = inline_calls(fn)
    assert "Call" not in op_names(lowered)
    assert op_names(lowered) == ["Exp", "Mul", "Constant", "Add"]
    arg = np.array([0.0, 1.0, -1.0], np.float32)
    np.testing.assert_allclose(evaluate(lowered, [arg])[0], np.exp(arg) ** 2 + 1, rtol=1e-6)


def test_inline_call_returning_its_parameter_and_a_tuple():
    x = og.parameter(og.i32, (2,))
    callee = og.Function([x, ops.tuple_(x, ops.negative(x))], [x])
    y = og.parameter(og.i32, (2,))
    same, pair = ops.call(callee, y)
    fn = unbox_tuples(inline_calls(og.Function([same, pair], [y])))
    assert fn.results[0] == y and fn.results[1] == y
    assert op_names(fn) == ["Neg"]


def test_decompose_lowers_unless_supported():
    x = og.parameter(og.f32, (2,))
    fn = og.Function([SquarePlusOne()(x)], [x])
    assert str(fn.results[0].type) == "f32[2]"  # the decomposition is the type rule
    lowered = decompose(fn)
    assert "SquarePlusOne" not in op_names(lowered)
    assert "Mul" in op_names(lowered)
    kept = decompose(fn, is_supported=lambda op: isinstance(op, SquarePlusOne))
    assert kept is fn


def test_decomposed_op_runs_on_every_backend(backend):
    x = og.parameter(og.f32, (2,))
    exe = backend.compile(og.Function([SquarePlusOne()(x)], [x]))
    (r,) = exe(np.array([2.0, 3.0], np.float32))
    np.testing.assert_array_equal(r, [5.0, 10.0])


def test_decomposition_type_errors_name_the_op():
    x = og.parameter(og.boolean, (2,))
    with pytest.raises(og.OpTypeError, match="Mul"):
        SquarePlusOne()(x)
