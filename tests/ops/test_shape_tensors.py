"""Ops whose shape-like arguments are run-time tensors (ops/shape_tensors.py): the static path
for known arguments, fresh bounded symbols otherwise, execution on INTERPRETER at two argument
values against numpy, run-time errors naming the node, gradients, the serializer round trip,
and the CPU refusal."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.dim import free_symbols
from opgraph.serialize import deserialize, serialize


def p(shape, t=og.f32, name=None):
    return og.parameter(t, shape, name=name)


def run(outputs, params, *arrays):
    exe = og.backend("INTERPRETER").compile(og.Function(list(outputs), list(params)))
    return exe(*arrays)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# ------------------------------------------------------------------- type rules and folding
def test_known_shape_takes_the_static_path():
    x = p((2, 3, 4))
    y = ops.dynamic_reshape(x, og.constant(np.array([4, -1], np.int64)))
    assert isinstance(y.node.op, ops.Reshape) and str(y.type) == "f32[4,6]"
    z = ops.dynamic_reshape(x, ops.shape_of(p((6, 4))))  # shape_of of a static value
    assert str(z.type) == "f32[6,4]"
    assert str(ops.dynamic_tile(x, og.constant(np.array([1, 2, 1]))).type) == "f32[2,6,4]"
    assert str(ops.fill(og.constant(np.array([2, 5])), og.constant(np.float32(1))).type) == (
        "f32[2,5]"
    )


def test_reshape_zero_copies_the_input_dimension_unless_allowed():
    x = p((2, 3, 4))
    target = og.constant(np.array([0, 12], np.int64))
    assert str(ops.dynamic_reshape(x, target).type) == "f32[2,12]"
    with pytest.raises(og.OpTypeError, match="0 elements|has 0|elements"):
        ops.dynamic_reshape(x, target, allow_zero=True)


def test_run_time_shape_gets_fresh_bounded_symbols():
    x = p((2, 3, 4))
    y = ops.dynamic_reshape(x, p((2,), og.i64))
    assert isinstance(y.node.op, ops.DynamicReshape) and y.rank == 2
    symbols = free_symbols(y.shape)
    assert len(symbols) == 2 and all(s.max == 24 for s in symbols)
    assert set(y.node.op.bound_symbols()) == symbols


def test_slice_and_top_k_bind_only_the_axes_they_size():
    n = og.dim("n")
    x = p((n, 10))
    s = ops.dynamic_slice(x, p((1,), og.i64), p((1,), og.i64), axes=[1])
    assert s.shape[0] == n  # the unsliced axis keeps the argument-bound symbol
    (sized,) = s.node.op.bound_symbols()
    assert sized.max == 10 and sized not in free_symbols(x.shape)
    values, indices = ops.dynamic_top_k(x, p((1,), og.i64), axis=1)
    assert values.shape[0] == n and indices.element_type == og.i64
    (k,) = values.node.op.bound_symbols()
    assert k.max == 10


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda x: ops.dynamic_reshape(x, p((2,), og.f32)), "integer tensor"),
        (lambda x: ops.dynamic_reshape(x, p((2, 1), og.i64)), "vector"),
        (lambda x: ops.dynamic_reshape(x, p((og.dim("k"),), og.i64)), "static length"),
        (lambda x: ops.dynamic_pad(x, p((4,), og.i64)), "6 elements"),
        (lambda x: ops.dynamic_tile(x, p((2,), og.i64)), "3 elements"),
        (lambda x: ops.dynamic_top_k(x, p((2,), og.i64)), "scalar"),
        (lambda x: ops.dynamic_slice(x, p((2,), og.i64), p((1,), og.i64), [0, 1]), "2 elements"),
        (lambda x: ops.dynamic_pad(x, p((6,), og.i64), p((), og.i32)), "scalar of f32"),
    ],
)
def test_bad_arguments_are_type_errors(build, match):
    with pytest.raises(og.OpTypeError, match=match):
        build(p((2, 3, 4)))


# ------------------------------------------------------------------------------- execution
def test_reshape_runs_at_two_targets_and_reports_a_bad_count():
    x, s = p((2, 3, 4), name="x"), p((2,), og.i64, name="s")
    exe = og.backend("INTERPRETER").compile(og.Function([ops.dynamic_reshape(x, s)], [x, s]))
    for target, shape in (([4, -1], (4, 6)), ([0, 12], (2, 12))):
        (y,) = exe(X, np.array(target))
        np.testing.assert_array_equal(y, X.reshape(shape))
    with pytest.raises(og.ExecutionError, match="DynamicReshape.*25 elements"):
        exe(X, np.array([5, 5]))


def test_broadcast_pad_tile_slice_top_k_fill_and_range_match_numpy():
    x = p((2, 3, 4))
    shape, pads, reps = p((4,), og.i64), p((6,), og.i64), p((3,), og.i64)
    starts, ends, steps, k = (p((1,), og.i64) for _ in range(4))
    value = p((), og.f32)
    start, limit, delta = (p((), og.i64) for _ in range(3))
    values, indices = ops.dynamic_top_k(x, k, axis=2, largest=False)
    outs = [
        ops.dynamic_broadcast(x, shape),
        ops.dynamic_pad(x, pads, value),
        ops.dynamic_pad(x, pads, mode="reflect"),
        ops.dynamic_tile(x, reps),
        ops.dynamic_slice(x, starts, ends, [2], steps),
        values,
        indices,
        ops.fill(shape, value),
        ops.dynamic_range(start, limit, delta),
    ]
    params = [x, shape, pads, reps, starts, ends, steps, k, value, start, limit, delta]
    exe = og.backend("INTERPRETER").compile(og.Function(outs, params))
    for target, pad, rep, (lo, hi, st), kk, (a, b, d) in (
        ([5, 2, 1, 4], [1, 0, 2, 0, 1, 1], [1, 2, 1], (-1, -10, -2), 1, (0, 7, 2)),
        ([1, 1, 3, 1], [0, 2, 0, 1, 0, 0], [2, 1, 3], (1, 100, 1), 3, (5, -1, -3)),
    ):
        got = exe(
            X,
            np.array(target),
            np.array(pad),
            np.array(rep),
            *(np.array([v]) for v in (lo, hi, st, kk)),
            np.float32(2.5),
            *(np.array(v) for v in (a, b, d)),
        )
        widths = list(zip(pad[:3], pad[3:], strict=True))
        order = np.argsort(X, axis=2, kind="stable")[:, :, :kk]
        expected = [
            X * np.ones(target, np.float32),
            np.pad(X, widths, constant_values=2.5),
            np.pad(X, widths, mode="reflect"),
            np.tile(X, rep),
            X[:, :, lo:hi:st],
            np.take_along_axis(X, order, 2),
            order,
            np.full(target, 2.5, np.float32),
            np.arange(a, b, d),
        ]
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_array_equal(g, e)


def test_run_time_crop_larger_than_the_axis_names_the_node():
    x, pads = p((2, 3), name="x"), p((4,), og.i64, name="pads")
    exe = og.backend("INTERPRETER").compile(og.Function([ops.dynamic_pad(x, pads)], [x, pads]))
    with pytest.raises(og.ExecutionError, match="DynamicPad"):
        exe(np.ones((2, 3), np.float32), np.array([0, -3, 0, -1]))


def test_run_time_symbol_flows_into_later_ops():
    x, s = p((2, 3, 4)), p((2,), og.i64)
    y = ops.dynamic_reshape(x, s)
    z = ops.relu(ops.add(y, y))
    (out, shape) = run([z, ops.shape_of(z)], [x, s], X - 10, np.array([6, 4]))
    np.testing.assert_array_equal(out, np.maximum(2 * (X - 10), 0).reshape(6, 4))
    assert shape.tolist() == [6, 4]


# ------------------------------------------------------------------------------- gradients
def _gradient(build, x_shape, *arguments):
    """The gradient of sum(y * y) w.r.t. x, with y = build(x, *run-time arguments)."""
    x = p(x_shape, name="x")
    args = [p(np.shape(a), og.i64) for a in arguments]
    y = build(x, *args)
    loss = ops.reduce_sum(ops.multiply(y, y), list(range(y.rank)))
    fn = og.autodiff.backprop(og.Function([loss], [x, *args]), wrt=[x])
    exe = og.backend("INTERPRETER").compile(fn)
    data = np.linspace(-1, 1, int(np.prod(x_shape)), dtype=np.float32).reshape(x_shape)
    return data, exe(data, *(np.asarray(a, np.int64) for a in arguments))[1]


def test_reshape_gradient():
    data, grad = _gradient(ops.dynamic_reshape, (2, 3), [3, 2])
    np.testing.assert_allclose(grad, 2 * data)


def test_broadcast_gradient_sums_the_copies():
    data, grad = _gradient(ops.dynamic_broadcast, (3, 1), [2, 3, 4])
    np.testing.assert_allclose(grad, 2 * data * 8, rtol=1e-6)


def test_constant_pad_gradient_crops():
    data, grad = _gradient(ops.dynamic_pad, (2, 3), [1, 0, 2, 1])
    np.testing.assert_allclose(grad, 2 * data)


def test_tile_gradient_sums_the_repeats():
    data, grad = _gradient(ops.dynamic_tile, (2, 3), [3, 2])
    np.testing.assert_allclose(grad, 2 * data * 6, rtol=1e-6)


def test_slice_gradient_places_the_cotangent():
    def build(x, starts, ends, steps):
        return ops.dynamic_slice(x, starts, ends, [1], steps)

    data, grad = _gradient(build, (2, 6), [-1], [-100], [-2])
    expected = np.zeros_like(data)
    expected[:, ::-2] = 2 * data[:, ::-2]
    np.testing.assert_allclose(grad, expected)


def test_top_k_and_range_are_not_differentiable():
    assert ops.DynamicTopK.differentiable is False and ops.DynamicRange.differentiable is False


# ------------------------------------------------------------------- serializer, backends
def test_serializer_round_trip_keeps_the_fresh_symbols():
    x, s, k = p((2, 3, 4), name="x"), p((2,), og.i64, name="s"), p((1,), og.i64, name="k")
    values, _ = ops.dynamic_top_k(ops.dynamic_reshape(x, s), k)
    fn = og.Function([values], [x, s, k])
    loaded = deserialize(serialize(fn))
    assert str(loaded.results[0].type) == str(fn.results[0].type)
    exe = og.backend("INTERPRETER").compile(loaded)
    (got,) = exe(X, np.array([6, 4]), np.array([2]))
    np.testing.assert_array_equal(got, -np.sort(-X.reshape(6, 4), axis=1)[:, :2])


@pytest.mark.skipif("CPU" not in og.backends(), reason="the CPU backend is not registered")
def test_cpu_runs_sizes_decided_at_run_time_in_stages():
    x, s = p((2, 3, 4)), p((2,), og.i64)
    exe = og.backend("CPU").compile(og.Function([ops.exp(ops.dynamic_reshape(x, s))], [x, s]))
    assert "DynamicReshape" in exe.fallback_ops()
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 24
    for target in ([6, 4], [4, 6], [24, 1]):
        (got,) = exe(data, np.array(target))
        np.testing.assert_allclose(got, np.exp(data.reshape(target)), rtol=1e-6)


def test_a_constant_broadcast_to_a_run_time_size_runs_after_the_node_binding_it():
    # The Broadcast depends on the range only through its shape: no data edge orders them.
    start, limit, delta = (p((), og.i64) for _ in range(3))
    r = ops.dynamic_range(start, limit, delta)
    two = ops.broadcast(og.constant(np.int64(2)), r.shape, (0,))
    fn = og.Function([ops.add(two, r)], [start, limit, delta])
    assert fn.nodes.index(two.node) < fn.nodes.index(r.node)  # the order that used to fail
    exe = og.backend("INTERPRETER").compile(fn)
    for stop in (4, 7):
        (y,) = exe(np.int64(0), np.int64(stop), np.int64(1))
        np.testing.assert_array_equal(y, np.arange(stop) + 2)


def test_gradient_ops_bind_no_symbol_of_their_like_input():
    x, s = p((og.dim("n"), 1)), p((3,), og.i64)
    y = ops.dynamic_broadcast(x, s)
    back = ops.sum_to(y, x)
    assert back.type == x.type and back.node.op.bound_symbols() == ()
    grad = ops.slice_gradient(y, y, p((1,), og.i64), p((1,), og.i64), [0])
    assert grad.node.op.bound_symbols() == ()


def test_reflect_pad_gradient_is_a_clear_error():
    x, pads = p((3, 4), name="x"), p((4,), og.i64, name="pads")
    y = ops.dynamic_pad(x, pads, mode="reflect")
    loss = ops.reduce_sum(y, [0, 1])
    with pytest.raises(og.NotDifferentiableError, match="reflect mode"):
        og.autodiff.backprop(og.Function([loss], [x, pads]), wrt=[x])


def test_dynamic_resize_known_sizes_give_the_static_op_and_bad_sizes_fail():
    x = og.parameter(og.f32, (1, 1, 2, 2), name="x")
    known = ops.dynamic_resize(x, og.constant(np.array([1, 1, 4, 4], np.int64)), "linear")
    assert type(known.node.op).__name__ == "Resize" and known.shape == (1, 1, 4, 4)
    with pytest.raises(og.OpTypeError, match="sizes must have 4 elements"):
        ops.dynamic_resize(x, og.parameter(og.i64, (3,)))
    with pytest.raises(og.OpTypeError, match="linear mode needs floats"):
        ops.dynamic_resize(og.parameter(og.i32, (2, 2)), og.parameter(og.i64, (2,)), "linear")
    sizes = og.parameter(og.i64, (4,), name="sizes")
    fn = og.Function([ops.dynamic_resize(x, sizes, "linear")], [x, sizes])
    data = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    for backend in ("INTERPRETER", "CPU"):
        exe = og.backend(backend).compile(fn)  # one compile, every size
        for target in ([1, 1, 3, 4], [1, 1, 1, 5]):
            want = og.backend("INTERPRETER").compile(
                og.Function([ops.resize(x, target, mode="linear")], [x])
            )(data)[0]
            np.testing.assert_allclose(exe(data, np.array(target))[0], want, rtol=1e-6)
