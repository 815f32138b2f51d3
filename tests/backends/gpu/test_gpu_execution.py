"""The GPU backend's call path on the fake device: device tensors, zero-copy device arrays,
the run-time error word, the fake device's own checks, availability and registration, and
the CUDA dialect's translations."""

import dataclasses
import importlib.machinery
import sys
import types

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends import gpu
from opgraph.backends.cpu.codegen import dialect as c_dialect
from opgraph.backends.fused.dialect import COMMON_HELPERS
from opgraph.backends.fused.views import View
from opgraph.backends.gpu import DeviceTensor, GpuBackend, GpuUnavailableError
from opgraph.backends.gpu.availability import probe
from opgraph.backends.gpu.cuda import dialect
from opgraph.backends.gpu.cuda.kernel import KernelParam
from opgraph.backends.gpu.fake import FakeDeviceError


def _double() -> og.Function:
    x = og.parameter(og.f32, (64,), "x")
    return og.Function([ops.add(x, x)], [x], name="double")


def test_create_tensor_gives_device_tensors(fake):
    backend, device = fake
    t = backend.create_tensor(og.f32, (2, 3))
    assert isinstance(t, DeviceTensor) and t.read().tolist() == [[0.0] * 3] * 2
    t.write(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert t.read().ravel().tolist() == list(range(6))
    assert t.__cuda_array_interface__["data"][0] == t.ptr
    with pytest.raises(og.GraphError, match="lives in device memory and has no host buffer"):
        _ = t.buffer


def test_numpy_buffers_stay_host_tensors(fake):
    backend, _ = fake
    buffer = np.zeros(3, np.float32)
    t = backend.create_tensor(og.f32, (3,), buffer)
    assert not isinstance(t, DeviceTensor) and np.shares_memory(t.buffer, buffer)


def test_device_arrays_are_wrapped_without_copies(fake):
    backend, device = fake
    exe = backend.compile(_double())
    data = np.arange(64, dtype=np.float32)
    array = device.array(data)  # a device array exposing __cuda_array_interface__
    wrapped = backend.create_tensor(og.f32, (64,), array)
    assert isinstance(wrapped, DeviceTensor) and wrapped.ptr == array.buffer.ptr
    out = backend.create_tensor(og.f32, (64,))
    before = device.stats.snapshot()
    exe.call([out], [wrapped])
    assert device.stats.snapshot() == before  # no copy in, none out
    np.testing.assert_array_equal(out.read(), 2 * data)
    (got,) = exe(array)  # the numpy convenience accepts device arrays too
    np.testing.assert_array_equal(got, 2 * data)
    with pytest.raises(og.CallTypeError, match="does not match element type f64"):
        backend.create_tensor(og.f64, (64,), array)
    with pytest.raises(og.GraphError, match="does not match"):
        backend.create_tensor(og.f32, (65,), array)


def test_the_error_word_is_cleared_between_calls(fake):
    backend, _ = fake
    a, b = og.parameter(og.i32, (4,)), og.parameter(og.i32, (4,))
    exe = backend.compile(og.Function([ops.mod(a, b)], [a, b], name="mod"))
    assert any(k.checks for k in exe.kernels())
    ones = np.ones(4, np.int32)
    with pytest.raises(og.ExecutionError, match=r"Mod.*integer division by zero"):
        exe(ones, np.array([1, 0, 1, 1], np.int32))
    (got,) = exe(np.array([5, -5, 7, 8], np.int32), np.array([3, 3, -2, 4], np.int32))
    assert got.tolist() == [2, 1, -1, 0]


def test_the_fake_device_refuses_out_of_bounds_parameters(fake):
    backend, _ = fake
    exe = backend.compile(_double())
    (kernel,) = exe.kernels()
    param = kernel.params[0]
    wider = View(param.view.buffer, param.view.element_type, (65,), (1,), 0)
    bad = dataclasses.replace(
        kernel, params=(KernelParam(param.name, wider, False), *kernel.params[1:])
    )
    exe.compiled.actions[0].launches[0] = bad  # type: ignore[attr-defined]
    with pytest.raises(FakeDeviceError, match="reaches outside its allocation"):
        exe(np.zeros(64, np.float32))


def test_launches_stay_within_the_grid_limit(fake):
    backend, device = fake
    x = og.parameter(og.f32, (300, 100), "x")
    exe = backend.compile(og.Function([ops.softmax(x, 1), ops.exp(x)], [x], name="grid"))
    exe(np.zeros((300, 100), np.float32))
    assert device.launches and all(1 <= grid <= device.max_blocks for _, grid, _ in device.launches)


# ---------------------------------------------------------------------- availability
def _fake_cupy(count=None, error=None):
    module = types.ModuleType("cupy")
    module.__spec__ = importlib.machinery.ModuleSpec("cupy", None)

    def get_device_count():
        if error is not None:
            raise error
        return count

    module.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=get_device_count)
    )
    return module


@pytest.mark.parametrize(
    ("module", "usable", "reason"),
    [
        (None, False, "CuPy is not installed"),
        (_fake_cupy(0), False, "no CUDA device"),
        (_fake_cupy(error=RuntimeError("cudaErrorNoDevice")), False, "cudaErrorNoDevice"),
        (_fake_cupy(2), True, "2 CUDA device"),
    ],
)
def test_availability_probe(monkeypatch, module, usable, reason):
    monkeypatch.setitem(sys.modules, "cupy", module)  # None: "import cupy" fails
    probe.cache_clear()
    try:
        found, why = probe()
        assert (found, reason in why) == (usable, True)
    finally:
        monkeypatch.undo()
        probe.cache_clear()


def test_without_a_device_gpu_is_not_registered_and_says_why():
    if gpu.available():
        pytest.skip("a CUDA device is present here")
    assert "GPU" not in og.backends()
    with pytest.raises(GpuUnavailableError, match="the GPU backend is unavailable: .+"):
        GpuBackend()
    assert gpu.unavailable_reason()


# ---------------------------------------------------------------------------- dialect
@pytest.mark.parametrize(
    ("name", "c_text", "cuda_text"),
    [
        ("f2i_i32", "static inline int32_t og_f2i_i32(", "OG_HD int32_t og_f2i_i32("),
        ("f2i_u8", "__builtin_trunc(x)", "trunc(x)"),
        ("mod_f32", "__builtin_fmodf(a, b)", "fmodf(a, b)"),
        ("mod_f64", "__builtin_copysign(0, b)", "og_copysign_f64(0, b)"),
        ("div_i16", "static inline int16_t og_truncdiv_i16(", "OG_HD int16_t og_truncdiv_i16("),
    ],
)
def test_scalar_helpers_are_written_in_each_dialect(name, c_text, cuda_text):
    """One helper template, two texts: C builtins and static functions, CUDA math functions
    and __host__ __device__ functions."""
    assert c_text in c_dialect.C.helper_code(name)
    assert cuda_text in dialect.helper_code(name)


def test_no_cuda_helper_uses_gcc_builtins():
    for name in COMMON_HELPERS:
        text = dialect.helper_code(name)
        assert "__builtin" not in text and "static inline" not in text, name


def test_cuda_types_and_literals():
    assert dialect.storage_type(og.f16) == "__half" and dialect.compute_type(og.bf16) == "float"
    assert dialect.round_to(og.f16, "v") == "__half2float(__float2half_rn(v))"
    assert dialect.literal(float("-inf"), og.f64) == "(-og_inf_f64())"
    assert dialect.literal(0.5, og.f32) == "(0x1.0000000000000p-1f)"
    assert dialect.math_call("exp", og.f16, "v") == "expf(v)"
    assert dialect.math_call("exp", og.f64, "v") == "exp(v)"
    assert "__builtin" not in dialect.helper_code("mod_f32")


@pytest.mark.parametrize("block", [0, 48, 2048])
def test_block_sizes_are_whole_warps(block):
    with pytest.raises(og.GraphError, match="multiple of 32"):
        gpu.GpuConfig(block=block)
