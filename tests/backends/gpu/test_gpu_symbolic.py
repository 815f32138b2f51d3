"""Symbolic and data-dependent Functions on the GPU backend (fake device): one ``compile``
serves every binding by specialising per new binding behind a cache of 16
(runtime/specializing.py), and data-dependent Functions run in stages (fused/staged.py)."""

import numpy as np
import pytest
from gpu_cases import fake_backend

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.staged import StagedExecutable
from opgraph.backends.gpu import DeviceTensor, GpuExecutable
from opgraph.runtime.specializing import CACHE_SIZE, SpecializingExecutable


def scaled_sum(bound: int | None = None) -> og.Function:
    x = og.parameter(og.f32, (og.dim("batch", max=bound), 3), "x")
    y = og.parameter(og.f32, (og.dim("batch", max=bound), 3), "y")
    return og.Function([ops.tanh(x * 0.5 + y), ops.reduce_sum(x, (0,))], [x, y], name="ss")


def arrays(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((n, 3), np.float32), rng.random((n, 3), np.float32)


def test_one_compile_specialises_per_binding_and_caches():
    backend, _ = fake_backend()
    exe = backend.compile(scaled_sum())
    assert isinstance(exe, SpecializingExecutable)
    for n in (2, 7, 2, 7, 1):
        x, y = arrays(n, n)
        got = exe(x, y)
        np.testing.assert_allclose(got[0], np.tanh(x * 0.5 + y), rtol=1e-5)
        np.testing.assert_allclose(got[1], x.sum(0), rtol=1e-5)
    assert exe.compiles == 3  # bindings 2, 7 and 1; repeats reuse the cached compile
    assert all(isinstance(exe.specialised(b), GpuExecutable) for b in exe.bindings())


def test_the_cache_keeps_the_last_16_bindings():
    backend, _ = fake_backend()
    exe = backend.compile(scaled_sum())
    for n in range(1, CACHE_SIZE + 2):
        exe(*arrays(n))
    assert len(exe.bindings()) == CACHE_SIZE
    assert {"batch": 1} not in exe.bindings()  # the least recently used went first
    exe(*arrays(CACHE_SIZE + 1))
    assert exe.compiles == CACHE_SIZE + 1


def test_inconsistent_binding_names_the_symbol_and_writes_nothing():
    backend, _ = fake_backend()
    exe = backend.compile(scaled_sum())
    x = backend.create_tensor(og.f32, (2, 3), np.ones((2, 3), np.float32))
    y = backend.create_tensor(og.f32, (4, 3), np.ones((4, 3), np.float32))
    out = [np.full((2, 3), 7, np.float32), np.full((3,), 7, np.float32)]
    outputs = [backend.create_tensor(og.f32, o.shape, o) for o in out]
    with pytest.raises(og.CallTypeError, match="symbol batch is 2 from input 0 axis 0 but 4"):
        exe.call(outputs, [x, y])
    assert all((o == 7).all() for o in out)
    assert exe.compiles == 0


def test_a_value_above_the_bound_is_refused():
    backend, _ = fake_backend()
    exe = backend.compile(scaled_sum(bound=4))
    with pytest.raises(og.CallTypeError, match="symbol batch is 5 .* outside its bounds 0..4"):
        exe(*arrays(5))


def test_result_tensors_are_checked_against_the_bound_shapes():
    backend, _ = fake_backend()
    exe = backend.compile(scaled_sum())
    x, y = (backend.create_tensor(og.f32, (2, 3)) for _ in range(2))
    wrong = [backend.create_tensor(og.f32, (3, 3)), backend.create_tensor(og.f32, (3,))]
    with pytest.raises(og.GraphError, match=r"output 0 has shape \[3, 3\], result 0 has \[2, 3\]"):
        exe.call(wrong, [x, y])


def test_device_tensors_at_two_bindings():
    backend, _ = fake_backend()
    exe = backend.compile(scaled_sum())
    for n in (3, 5):
        x, y = arrays(n)
        inputs = [backend.create_tensor(og.f32, (n, 3)) for _ in range(2)]
        inputs[0].write(x)
        inputs[1].write(y)
        outputs = [backend.create_tensor(og.f32, (n, 3)), backend.create_tensor(og.f32, (3,))]
        assert all(isinstance(t, DeviceTensor) for t in (*inputs, *outputs))
        exe.call(outputs, inputs)
        np.testing.assert_allclose(outputs[0].read(), np.tanh(x * 0.5 + y), rtol=1e-5)


def test_profile_sums_the_specialisations_counters():
    backend, _ = fake_backend()
    exe = backend.compile(scaled_sum(), profile=True)
    exe(*arrays(2))
    exe(*arrays(3))
    assert sum(c.calls for c in exe.performance_counters()) >= 2


def test_data_dependent_function_runs_in_stages_with_device_tensors():
    backend, _ = fake_backend()
    x = og.parameter(og.f32, (6,), "x")
    picked = ops.non_zero(ops.tanh(x))  # a stage before, the count decided by the values
    fn = og.Function([ops.multiply(picked, picked)], [x], name="dd")
    exe = backend.compile(fn)
    assert isinstance(exe, StagedExecutable) and exe.stages
    assert "NonZero" in exe.fallback_ops()
    for values in ([0, 1, 0, 2, 3, 0], [1, 1, 1, 1, 1, 0]):
        v = np.array(values, np.float32)
        want = np.nonzero(np.tanh(v))[0][None, :] ** 2
        np.testing.assert_array_equal(exe(v)[0], want)
        inputs = [backend.create_tensor(og.f32, (6,))]
        inputs[0].write(v)
        output = backend.create_tensor(og.i64, want.shape)
        exe.call([output], inputs)
        np.testing.assert_array_equal(output.read(), want)
