"""Every backend checks each host tensor's buffer at call time, and ``call`` takes lists.

The tensors are host tensors on every backend: ``create_tensor(t, shape, array)`` wraps a
numpy array (GPU's ``create_tensor(t, shape)`` is a device tensor, with no host buffer; its
call checks are in tests/backends/gpu/test_gpu_call_validation.py)."""

import warnings

import numpy as np
import pytest

import opgraph as og
from opgraph import ops


def relu_exe(backend):
    x = og.parameter(og.f32, (2, 3))
    return backend.compile(og.Function([ops.relu(x), ops.negative(x)], [x], name="g"))


def host_tensor(backend, shape=(2, 3)):
    return backend.create_tensor(og.f32, shape, np.zeros(shape, np.float32))


def tensors(backend):
    x = backend.create_tensor(og.f32, (2, 3), np.arange(6, dtype=np.float32).reshape(2, 3) - 2)
    outs = [host_tensor(backend) for _ in range(2)]
    return outs, [x]


def test_call_takes_lists_not_tensors(backend):
    exe = relu_exe(backend)
    outs, ins = tensors(backend)
    with pytest.raises(og.CallTypeError, match="takes two lists of Tensors.*outputs is a Tensor"):
        exe.call(outs[0], ins)
    device = backend.create_tensor(og.f32, (2, 3))  # the backend's own (GPU: a DeviceTensor)
    kind = type(device).__name__
    with pytest.raises(og.CallTypeError, match=f"takes two lists of Tensors.*outputs is a {kind}"):
        exe.call(device, ins)
    with pytest.raises(
        og.CallTypeError, match="inputs is a Tensor.*exe.call\\(\\[out\\], \\[x\\]\\)"
    ):
        exe.call(outs, ins[0])
    with pytest.raises(og.CallTypeError, match="inputs is a ndarray"):
        exe.call(outs, np.zeros((2, 3), np.float32))
    exe.call(tuple(outs), tuple(ins))  # any sequence is fine
    assert np.array_equal(outs[0].read(), np.maximum(ins[0].read(), 0))


def test_buffer_assignment_is_validated(backend):
    t = host_tensor(backend)
    kept = t.buffer
    for bad, error, message in [
        (np.zeros(2, np.float32), og.GraphError, "buffer shape \\[2\\] does not match \\[2, 3\\]"),
        (np.zeros((2, 3)), og.CallTypeError, "dtype float64 does not match element type f32"),
        (np.zeros((3, 2), np.float32).T, og.GraphError, "C-contiguous"),
        (np.frombuffer(bytes(24), np.float32), og.GraphError, "writeable"),
        (b"\0" * 24, og.CallTypeError, "must be a numpy array, got bytes"),
    ]:
        with pytest.raises(error, match=message):
            t.buffer = bad
        assert t.buffer is kept
    fresh = np.ones(6, np.float32)
    t.buffer = fresh  # a right-sized array is wrapped zero-copy, reshaped
    fresh[0] = 5
    assert t.read()[0, 0] == 5 and t.buffer.shape == (2, 3)


def test_tensor_array_cannot_be_resized():
    t = og.backend("INTERPRETER").create_tensor(og.f32, (4,))
    with pytest.raises(ValueError, match="does not own its data"):
        t.buffer.resize((10**6,))


def _strided(a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        a.strides = (0, 4)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: setattr(a, "dtype", np.int32), "buffer dtype is int32"),
        (lambda a: setattr(a, "shape", (6,)), "buffer is \\[6\\] \\(24 bytes\\)"),
        (lambda a: setattr(a.flags, "writeable", False), "buffer is read-only"),
        (_strided, "buffer is not C-contiguous"),
    ],
)
def test_buffer_changed_in_place_is_refused_at_call(backend, change, message):
    exe = relu_exe(backend)
    outs, ins = tensors(backend)
    exe.call(outs, ins)  # a good call first (the CPU backend remembers addresses)
    outs[1].buffer.fill(9)
    memory = outs[1].buffer.reshape(-1)  # a view of the same memory, whatever the change
    change(outs[1].buffer)
    with pytest.raises(og.CallTypeError, match=f"g: output 1: {message}"):
        exe.call(outs, ins)
    assert np.all(memory == 9)


def test_read_only_input_is_fine(backend):
    exe = relu_exe(backend)
    outs, ins = tensors(backend)
    ins[0].buffer.flags.writeable = False
    exe.call(outs, ins)
    assert np.array_equal(outs[1].read(), -ins[0].read())


def test_empty_tensor_twice_is_aliasing(backend):
    x = og.parameter(og.f32, (0,))
    exe = backend.compile(og.Function([ops.relu(x), ops.negative(x)], [x]))
    a, b = (backend.create_tensor(og.f32, (0,)) for _ in range(2))
    with pytest.raises(og.AliasingError, match="outputs 0 and 1 share memory"):
        exe.call([a, a], [b])
    with pytest.raises(og.AliasingError, match="output 1 shares memory with input 0"):
        exe.call([a, b], [b])
    exe.call([a, b], [backend.create_tensor(og.f32, (0,))])


def test_partial_overlap_through_views(backend):
    exe = relu_exe(backend)
    outs, ins = tensors(backend)
    base = np.zeros(9, np.float32)
    outs[0].buffer = base[:6]
    outs[1].buffer = base[3:]
    with pytest.raises(og.AliasingError, match="outputs 0 and 1 share memory"):
        exe.call(outs, ins)
    outs[1].buffer = np.zeros(6, np.float32)
    ins[0].buffer = base[2:8]
    with pytest.raises(og.AliasingError, match="output 0 shares memory with input 0"):
        exe.call(outs, ins)
