"""The backprop API: results first, then gradients; seeds; accumulation; errors."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import backprop
from opgraph.testing.gradcheck import check_gradients


def run(fn, *args):
    return og.backend("INTERPRETER").compile(fn)(*args)


def test_scalar_result_gradient_and_layout():
    x = og.parameter(og.f64, (3,), name="x")
    w = og.parameter(og.f64, (3,), name="w")
    loss = ops.reduce_sum(ops.multiply(ops.multiply(x, w), x), (0,))
    grad = backprop(og.Function([loss], [x, w]))
    assert len(grad.results) == 3 and grad.parameters == (x, w)
    xv, wv = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    value, dx, dw = run(grad, xv, wv)
    np.testing.assert_allclose(value, np.sum(xv * wv * xv))
    np.testing.assert_allclose(dx, 2 * xv * wv)
    np.testing.assert_allclose(dw, xv * xv)


def test_wrt_subset_and_order():
    x = og.parameter(og.f64, (2,))
    w = og.parameter(og.f64, (2,))
    loss = ops.reduce_sum(ops.multiply(x, w), (0,))
    grad = backprop(og.Function([loss], [x, w]), wrt=[w, x])
    _, dw, dx = run(grad, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_allclose(dw, [1.0, 2.0])
    np.testing.assert_allclose(dx, [3.0, 4.0])


def test_value_used_many_times_accumulates():
    x = og.parameter(og.f64, ())
    e = ops.exp(x)
    y = ops.add(ops.multiply(e, e), e)  # e^2x + e^x
    (_, dx) = run(backprop(og.Function([y], [x])), np.array(0.5))
    np.testing.assert_allclose(dx, 2 * np.exp(1.0) + np.exp(0.5))


def test_seed_parameters_and_arrays():
    x = og.parameter(og.f64, (2,))
    fn = og.Function([ops.exp(x), ops.negative(x)], [x])
    grad = backprop(fn, seed="parameters")
    assert len(grad.parameters) == 3
    xv = np.array([0.0, 1.0])
    outs = run(grad, xv, np.array([1.0, 2.0]), np.array([3.0, 3.0]))
    np.testing.assert_allclose(outs[2], np.exp(xv) * [1, 2] - 3)
    outs = run(backprop(fn, seed=[np.ones(2), None]), xv)
    np.testing.assert_allclose(outs[2], np.exp(xv))


def test_unused_parameter_gets_zero_gradient():
    x = og.parameter(og.f64, (2,))
    unused = og.parameter(og.f64, (3,))
    grad = backprop(og.Function([ops.reduce_sum(x, (0,))], [x, unused]))
    assert run(grad, np.ones(2), np.ones(3))[2].tolist() == [0.0, 0.0, 0.0]


def test_stop_gradient_blocks():
    x = og.parameter(og.f64, ())
    y = ops.multiply(x, ops.stop_gradient(x))
    (_, dx) = run(backprop(og.Function([y], [x])), np.array(3.0))
    assert dx == 3.0


def test_integer_paths_carry_no_gradient():
    x = og.parameter(og.f64, (3,))
    as_int = ops.convert(ops.convert(x, og.i32), og.f64)
    y = ops.reduce_sum(ops.add(as_int, x), (0,))
    (_, dx) = run(backprop(og.Function([y], [x])), np.array([1.5, 2.5, 3.5]))
    assert dx.tolist() == [1.0, 1.0, 1.0]


def test_max_ties_split_gradient():
    x = og.parameter(og.f64, (4,))
    y = ops.reduce_max(x, (0,))
    (_, dx) = run(backprop(og.Function([y], [x])), np.array([1.0, 3.0, 3.0, 2.0]))
    assert dx.tolist() == [0.0, 0.5, 0.5, 0.0]


def test_prod_with_zeros():
    x = og.parameter(og.f64, (3,))
    grad = backprop(og.Function([ops.reduce_prod(x, (0,))], [x]))
    assert run(grad, np.array([2.0, 0.0, 3.0]))[1].tolist() == [0.0, 6.0, 0.0]
    assert run(grad, np.array([0.0, 0.0, 3.0]))[1].tolist() == [0.0, 0.0, 0.0]


def test_through_calls_and_tuples():
    a = og.parameter(og.f64, (2,))
    inner = og.Function([ops.tuple_(ops.exp(a), a)], [a])
    x = og.parameter(og.f64, (2,))
    (t,) = ops.call(inner, x)
    y = ops.reduce_sum(ops.multiply(ops.get_tuple_element(t, 0), ops.get_tuple_element(t, 1)), (0,))
    fn = og.Function([y], [x])
    check_gradients(fn, [np.array([0.3, -0.7])])


def test_decomposed_op_differentiates_through_its_decomposition():
    from opgraph.testing.fake_ops import SquarePlusOne

    x = og.parameter(og.f64, (3,))
    fn = og.Function([ops.reduce_sum(SquarePlusOne()(x), (0,))], [x])
    (_, dx) = run(backprop(fn), np.array([1.0, 2.0, -3.0]))
    assert dx.tolist() == [2.0, 4.0, -6.0]


def test_errors():
    x = og.parameter(og.f64, (2,))
    i = og.parameter(og.i32, (2,))
    with pytest.raises(
        og.NotDifferentiableError, match="needs a seed: without one it must have exactly one scalar"
    ):
        backprop(og.Function([ops.exp(x)], [x]))
    with pytest.raises(og.NotDifferentiableError, match="wrt.0. has element type i32"):
        backprop(og.Function([ops.reduce_sum(x, (0,))], [x, i]), wrt=[i])
    other = og.parameter(og.f64, (2,))
    with pytest.raises(og.NotDifferentiableError, match="wrt.0. is not a parameter"):
        backprop(og.Function([ops.reduce_sum(x, (0,))], [x]), wrt=[other])
    with pytest.raises(og.NotDifferentiableError, match="seed 0 has shape"):
        backprop(og.Function([ops.exp(x)], [x]), seed=[np.ones(3)])


def test_not_differentiable_op_names_the_path():
    from opgraph.core.op import Op, opclass

    @opclass
    class Opaque(Op):
        """A float op that refuses gradients (test only)."""

        num_inputs = 1
        differentiable = False

        def infer(self, t):
            return t

    from opgraph.backends.interpreter.kernels import KERNELS

    KERNELS.add(Opaque, lambda op, v: v)
    x = og.parameter(og.f64, (2,))
    y = ops.reduce_sum(ops.exp(Opaque()(x)), (0,))
    with pytest.raises(
        og.NotDifferentiableError,
        match=r"Opaque \(built at .*\) is not differentiable.*path from the result: ReduceSum .* <- Exp .* <- Opaque",
    ):
        backprop(og.Function([y], [x]))
