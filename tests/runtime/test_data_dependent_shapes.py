"""Data-dependent sizes on INTERPRETER: non_zero's fresh symbol bound when its node runs, one
compile serving inputs with different numbers of non-zeros; shape_of on symbolic and static
inputs; CPU's refusal; the call checks."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.runtime.binding import node_symbols


def _gather_non_zero(shape=(6,)):
    x = og.parameter(og.f32, shape, name="x")
    idx = ops.non_zero(x)
    picked = ops.gather(x, idx, 0)
    return og.Function([picked, ops.shape_of(idx)], [x], name="pick")


def test_non_zero_then_gather_runs_at_two_counts():
    exe = og.backend("INTERPRETER").compile(_gather_non_zero())
    for values in ([0, 1.5, 0, -2, 3, 0], [0, 0, 0, 0, 0, 7]):
        x = np.array(values, np.float32)
        picked, shape = exe(x)
        want = x[np.nonzero(x)]
        np.testing.assert_array_equal(picked, want[None, :])
        np.testing.assert_array_equal(shape, [1, want.size])


def test_non_zero_gather_gradient_at_two_counts():
    x = og.parameter(og.f32, (5,), name="x")
    v = ops.gather(x, ops.non_zero(x), 0)
    grad = og.autodiff.backprop(og.Function([ops.reduce_sum(v * v, (0, 1))], [x]), wrt=[x])
    exe = og.backend("INTERPRETER").compile(grad)
    for values in ([0, 1, 0, 2, 3], [4, 0, 0, 0, 0]):
        a = np.array(values, np.float32)
        loss, dx = exe(a)
        np.testing.assert_allclose(loss, np.sum(a * a))
        np.testing.assert_allclose(dx, 2 * a)


def test_non_zero_with_symbolic_input_and_result():
    n = og.dim("n", max=16)
    x = og.parameter(og.i32, (n, 2), name="x")
    fn = og.Function([ops.non_zero(x), ops.shape_of(x)], [x])
    exe = og.backend("INTERPRETER").compile(fn)
    for rows in (1, 5):
        a = np.arange(rows * 2, dtype=np.int32).reshape(rows, 2) % 3
        idx, shape = exe(a)
        np.testing.assert_array_equal(idx, np.stack(np.nonzero(a)))
        np.testing.assert_array_equal(shape, [rows, 2])


def test_non_zero_call_checks_result_tensor_after_run():
    backend = og.backend("INTERPRETER")
    exe = backend.compile(_gather_non_zero())
    x = backend.create_tensor(og.f32, (6,))
    x.write(np.array([1, 0, 2, 0, 0, 0], np.float32))
    good = [backend.create_tensor(og.f32, (1, 2)), backend.create_tensor(og.i64, (2,))]
    exe.call(good, [x])
    np.testing.assert_array_equal(good[0].read(), [[1, 2]])
    wrong = [backend.create_tensor(og.f32, (1, 3)), backend.create_tensor(og.i64, (2,))]
    with pytest.raises(og.OpgraphError, match=r"\[1, 2\]|1,2"):
        exe.call(wrong, [x])


def test_non_zero_symbol_bound_checked():
    x = og.parameter(og.f32, (4,), name="x")
    node = ops.NonZero(og.dim("few", max=2))(x)
    exe = og.backend("INTERPRETER").compile(og.Function([node], [x]))
    np.testing.assert_array_equal(exe(np.array([0, 1, 0, 1], np.float32))[0], [[1, 3]])
    with pytest.raises(og.CallTypeError, match="few is 3, outside its bounds 0..2"):
        exe(np.array([1, 1, 0, 1], np.float32))


def test_non_zero_symbol_claimed_twice_is_rejected():
    x = og.parameter(og.f32, (4,), name="x")
    k = og.dim("k", max=4)
    fn = og.Function([ops.NonZero(k)(x), ops.NonZero(k)(x * 2.0)], [x])
    with pytest.raises(og.GraphError, match="two nodes bind the data-dependent symbol k"):
        node_symbols(fn)


def test_non_zero_runs_on_cpu_in_stages():
    if "CPU" not in og.backends():
        pytest.skip("CPU backend unavailable here")
    fn = _gather_non_zero()
    exe = og.backend("CPU").compile(fn)  # more in tests/backends/cpu/test_cpu_staged.py
    assert "NonZero" in exe.fallback_ops()
    ref = og.backend("INTERPRETER").compile(fn)
    for values in ([0, 1, 0, 2, 3, 0], [0, 0, 0, 0, 0, 0]):
        arrays = [np.array(values, np.float32)]
        for got, want in zip(exe(*arrays), ref(*arrays), strict=True):
            np.testing.assert_array_equal(got, want)


def test_shape_of_static_folds_to_constant():
    x = og.parameter(og.f32, (2, 3), name="x")
    folded = og.passes.fold_constants(og.Function([ops.shape_of(x)], [x]))
    (node,) = [n for n in folded.nodes if not isinstance(n.op, og.ops.Parameter)]
    assert isinstance(node.op, og.ops.Constant)
    np.testing.assert_array_equal(node.op.value, [2, 3])


def test_shape_of_symbolic_not_folded_and_evaluated_per_call():
    b = og.dim("b")
    x = og.parameter(og.f32, (b, 3), name="x")
    fn = og.Function([ops.shape_of(x)], [x])
    assert og.passes.fold_constants(fn) is fn
    exe = og.backend("INTERPRETER").compile(fn)
    for rows in (2, 7):
        np.testing.assert_array_equal(exe(np.zeros((rows, 3), np.float32))[0], [rows, 3])
