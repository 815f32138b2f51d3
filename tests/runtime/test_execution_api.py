"""The execution contract of DESIGN.md §2 on every backend."""

import threading

import numpy as np
import pytest

import opgraph as og
from opgraph import ops


def seed_function():
    a, b, c = (og.parameter(og.f32, (32, 32)) for _ in range(3))
    return og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c], name="f")


def rand(*shape):
    return np.random.default_rng(0).random(shape).astype(np.float32)


def test_backend_registry():
    assert "INTERPRETER" in og.backends()
    assert og.backend("interpreter").name == "INTERPRETER"
    with pytest.raises(
        og.OpgraphError, match="unknown backend 'NOPE'; registered backends: .*INTERPRETER"
    ):
        og.backend("NOPE")


def test_call_with_tensors(backend):
    exe = backend.compile(seed_function())
    arrays = [rand(32, 32) + i for i in range(3)]
    args = [backend.create_tensor(og.f32, (32, 32)) for _ in range(3)]
    for t, a in zip(args, arrays, strict=True):
        t.write(a)
    out = backend.create_tensor(og.f32, (32, 32))
    exe.call([out], args)
    np.testing.assert_allclose(out.read(), (arrays[0] + arrays[1]) * arrays[2], rtol=1e-6)


def test_numpy_convenience(backend):
    exe = backend.compile(seed_function())
    a = rand(32, 32)
    (r,) = exe(a, a, a)
    np.testing.assert_allclose(r, (a + a) * a, rtol=1e-6)


def test_zero_copy_wrap(backend):
    buffer = np.zeros((2, 3), np.float32)
    t = backend.create_tensor(og.f32, (2, 3), buffer)
    t.write(np.ones((2, 3), np.float32))
    assert buffer.sum() == 6
    with pytest.raises(
        og.CallTypeError, match="buffer dtype float64 does not match element type f32"
    ):
        backend.create_tensor(og.f32, (2, 3), np.zeros((2, 3)))
    with pytest.raises(og.GraphError, match="C-contiguous"):
        backend.create_tensor(og.f32, (3, 2), np.zeros((2, 3), np.float32).T)
    with pytest.raises(og.GraphError, match="does not match"):
        backend.create_tensor(og.f32, (2, 2), np.zeros((2, 3), np.float32))


def test_tensor_write_checks(backend):
    t = backend.create_tensor(og.i32, (2,))
    with pytest.raises(og.CallTypeError, match="dtype int64 does not match element type i32"):
        t.write(np.array([1, 2]))
    with pytest.raises(og.GraphError, match=r"shape \[3\] does not match tensor shape \[2\]"):
        t.write(np.array([1, 2, 3], np.int32))
    t.write([5, 6])  # Python data is checked to fit, then stored
    assert t.read().tolist() == [5, 6]
    with pytest.raises(og.OpTypeError, match="out of range"):
        t.write([2**40, 0])


def _tensors(backend, n, shape=(32, 32), t=og.f32):
    return [backend.create_tensor(t, shape) for _ in range(n)]


@pytest.mark.parametrize(
    ("outputs", "inputs", "error", "message"),
    [
        (1, 2, og.GraphError, "expected 3 input tensor"),
        (2, 3, og.GraphError, "expected 1 output tensor"),
        (0, 3, og.GraphError, "expected 1 output tensor"),
    ],
)
def test_call_counts(backend, outputs, inputs, error, message):
    exe = backend.compile(seed_function())
    with pytest.raises(error, match=message):
        exe.call(_tensors(backend, outputs), _tensors(backend, inputs))


def test_call_types_and_shapes(backend):
    exe = backend.compile(seed_function())
    out = _tensors(backend, 1)
    bad_type = _tensors(backend, 2) + _tensors(backend, 1, t=og.f64)
    with pytest.raises(og.CallTypeError, match="input 2 has element type f64, parameter 2 has f32"):
        exe.call(out, bad_type)
    bad_shape = _tensors(backend, 2) + _tensors(backend, 1, shape=(32, 31))
    with pytest.raises(
        og.GraphError, match=r"input 2 has shape \[32, 31\], parameter 2 has \[32, 32\]"
    ):
        exe.call(out, bad_shape)
    with pytest.raises(TypeError, match="must be a Tensor"):
        exe.call(out, [np.zeros((32, 32), np.float32)] * 3)


def test_aliasing_rules(backend):
    x = og.parameter(og.f32, (4,))
    fn = og.Function([ops.exp(x), ops.negative(x)], [x])
    exe = backend.compile(fn)
    arg = backend.create_tensor(og.f32, (4,))
    arg.write(np.arange(4, dtype=np.float32))
    o1, o2 = _tensors(backend, 2, (4,))
    before = o1.read()
    with pytest.raises(og.AliasingError, match="outputs 0 and 1 share memory"):
        exe.call([o1, o1], [arg])
    with pytest.raises(og.AliasingError, match="output 1 shares memory with input 0"):
        exe.call([o1, arg], [arg])
    shared = np.zeros(8, np.float32)
    view_a = backend.create_tensor(og.f32, (4,), shared[:4])
    view_b = backend.create_tensor(og.f32, (4,), shared[2:6])
    with pytest.raises(og.AliasingError):
        exe.call([view_a, view_b], [arg])
    with pytest.raises(ValueError):  # AliasingError is a ValueError
        exe.call([o1, arg], [arg])
    np.testing.assert_array_equal(o1.read(), before)  # nothing was written
    np.testing.assert_array_equal(arg.read(), np.arange(4, dtype=np.float32))


def test_same_tensor_for_several_arguments(backend):
    exe = backend.compile(seed_function())
    a = backend.create_tensor(og.f32, (32, 32))
    a.write(np.full((32, 32), 2, np.float32))
    out = backend.create_tensor(og.f32, (32, 32))
    exe.call([out], [a, a, a])
    assert np.all(out.read() == 8)


def test_parameter_as_result_and_repeated_result(backend):
    x = og.parameter(og.f32, (3,))
    e = ops.exp(x)
    exe = backend.compile(og.Function([x, e, e, x], [x]))
    values = np.array([0.0, 1.0, 2.0], np.float32)
    outs = _tensors(backend, 4, (3,))
    arg = backend.create_tensor(og.f32, (3,))
    arg.write(values)
    exe.call(outs, [arg])
    results = [o.read() for o in outs]
    np.testing.assert_array_equal(results[0], values)
    np.testing.assert_array_equal(results[3], values)
    np.testing.assert_allclose(results[1], np.exp(values), rtol=1e-6)
    outs[1].write(np.zeros(3, np.float32))  # each result has its own storage
    assert outs[2].read()[1] != 0


def test_constant_result(backend):
    exe = backend.compile(og.Function([og.constant([1, 2], og.i32)] * 2, []))
    a, b = exe()
    assert a.tolist() == b.tolist() == [1, 2]


def test_reusable_and_thread_safe(backend):
    exe = backend.compile(seed_function())
    errors = []

    def worker(k):
        a = np.full((32, 32), k, np.float32)
        for _ in range(20):
            (r,) = exe(a, a, a)
            if not np.all(r == 2 * k * k):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_performance_counters(backend):
    exe = backend.compile(seed_function(), profile=True)
    a = rand(32, 32)
    exe(a, a, a)
    exe(a, a, a)
    counters = exe.performance_counters()
    assert counters and all(c.calls == 2 and c.total_seconds >= 0 for c in counters)
    assert all(c.average_seconds == c.total_seconds / 2 for c in counters)
    with pytest.raises(og.GraphError, match="profile=True"):
        backend.compile(seed_function()).performance_counters()


def test_runtime_error_names_the_node(backend):
    x = og.parameter(og.i32, (2,))
    y = og.parameter(og.i32, (2,))
    exe = backend.compile(og.Function([ops.divide(x, y)], [x, y]))
    with pytest.raises(
        og.ExecutionError,
        match=r"while executing %2 = Div\[floor_division=True\]\(%0, %1\) : i32\[2\] .*integer division by zero",
    ):
        exe(np.array([1, 2], np.int32), np.array([1, 0], np.int32))


def test_numpy_convenience_checks(backend):
    exe = backend.compile(seed_function())
    a = rand(32, 32)
    with pytest.raises(og.GraphError, match="expected 3 argument"):
        exe(a)
    with pytest.raises(og.CallTypeError, match="argument 1: array dtype float64"):
        exe(a, a.astype(np.float64), a)


def test_unsupported_op_is_reported_at_compile(backend):
    from opgraph.testing.fake_ops import Unknown

    x = og.parameter(og.f32, (2,))
    with pytest.raises(og.UnsupportedOpError, match="no kernel for: Unknown"):
        backend.compile(og.Function([Unknown()(x)], [x]))


def test_unavailable_backend_says_why():
    from opgraph.runtime.backend import register_unavailable

    register_unavailable("TESTDEVICE", lambda: "no such device on this machine")
    with pytest.raises(
        og.OpgraphError, match="backend TESTDEVICE is unavailable here: no such device"
    ):
        og.backend("testdevice")
