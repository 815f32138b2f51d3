"""One call validation for host and device tensors (runtime.validation.validate_call): each
tensor checks its own storage and gives its address range in its own address space."""

import numpy as np
import pytest
from gpu_cases import fake_backend

import opgraph as og
from opgraph import ops
from opgraph.backends.gpu.tensor import DeviceTensor
from opgraph.runtime.tensor import HOST
from opgraph.runtime.validation import validate_call

T = og.TensorType(og.f32, (3,))


def exp_function() -> og.Function:
    x = og.parameter(og.f32, (3,))
    return og.Function([ops.exp(x)], [x])


def test_device_tensors_give_their_range_in_their_device():
    backend, device = fake_backend()
    tensor = backend.create_tensor(og.f32, (3,))
    assert isinstance(tensor, DeviceTensor)
    assert tensor.memory_range() == (device, tensor.ptr, 12)
    host = og.backend("INTERPRETER").create_tensor(og.f32, (3,))
    space, address, size = host.memory_range()
    assert (space, size) == (HOST, 12)
    assert address == host.buffer.__array_interface__["data"][0]


def test_a_device_view_of_an_argument_is_refused_as_aliasing():
    backend, device = fake_backend()
    arg = backend.create_tensor(og.f32, (3,))
    view = DeviceTensor(device, og.f32, (3,), ptr=arg.ptr + 4, keep_alive=arg)
    with pytest.raises(og.AliasingError, match="output 0 shares memory with input 0"):
        validate_call([view], [arg], [T], [T], "f", device=device)


def test_equal_addresses_in_different_spaces_do_not_alias():
    backend, device = fake_backend()
    host = og.backend("INTERPRETER").create_tensor(og.f32, (3,))
    address = host.memory_range()[1]
    same_number = DeviceTensor(device, og.f32, (3,), ptr=address, keep_alive=host)
    validate_call([same_number], [host], [T], [T], "f", device=device)


def test_a_device_tensor_of_another_device_is_refused():
    backend, _ = fake_backend()
    other, _ = fake_backend()
    exe = backend.compile(exp_function())
    arg, out = backend.create_tensor(og.f32, (3,)), other.create_tensor(og.f32, (3,))
    with pytest.raises(og.CallTypeError, match="output 0 is <DeviceTensor.*cannot address"):
        exe.call([out], [arg])


def test_a_device_tensor_on_a_host_backend_is_refused_before_running():
    backend, _ = fake_backend()
    exe = og.backend("INTERPRETER").compile(exp_function())
    out = og.backend("INTERPRETER").create_tensor(og.f32, (3,))
    arg = backend.create_tensor(og.f32, (3,))
    with pytest.raises(og.CallTypeError, match="input 0 is <DeviceTensor.*read\\(\\) copies"):
        exe.call([out], [arg])
    np.testing.assert_array_equal(out.read(), np.zeros(3, np.float32))
