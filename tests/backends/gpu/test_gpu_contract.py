"""The execution contract of DESIGN.md §2 (tests/runtime/test_execution_api.py) on the GPU
backend with the fake device: every test there that takes a ``backend`` runs here too."""

import importlib.util
import inspect
from pathlib import Path

import numpy as np
import pytest
from gpu_cases import fake_backend

import opgraph as og
from opgraph import ops

_PATH = Path(__file__).parents[2] / "runtime" / "test_execution_api.py"
_SPEC = importlib.util.spec_from_file_location("shared_execution_api", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
SHARED = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(SHARED)

#: Shared tests that need a host ``Tensor.buffer`` (a device tensor has none): each has a
#: device-tensor version below; the shared test would need ``write`` instead of ``buffer``.
NEEDS_HOST_BUFFER = {"test_parameter_as_result_and_repeated_result"}


def _shared_cases():
    for name, test in inspect.getmembers(SHARED, inspect.isfunction):
        if not name.startswith("test_") or "backend" not in inspect.signature(test).parameters:
            continue
        marks = getattr(test, "pytestmark", [])
        params = [m for m in marks if m.name == "parametrize"]
        if not params:
            yield pytest.param(test, (), id=name, marks=_skip(name))
            continue
        (mark,) = params
        for values in mark.args[1]:
            values = values if isinstance(values, tuple) else (values,)
            yield pytest.param(test, values, id=f"{name}-{values[-1]}", marks=_skip(name))


def _skip(name):
    if name in NEEDS_HOST_BUFFER:
        return [pytest.mark.skip(reason="writes Tensor.buffer of a device tensor; see below")]
    return []


@pytest.mark.parametrize(("test", "values"), list(_shared_cases()))
def test_shared_contract_on_fake_gpu(test, values):
    backend, _ = fake_backend()
    test(backend, *values)


def test_parameter_as_result_and_repeated_result_with_device_tensors():
    backend, _ = fake_backend()
    x = og.parameter(og.f32, (3,))
    e = ops.exp(x)
    exe = backend.compile(og.Function([x, e, e, x], [x]))
    values = np.array([0.0, 1.0, 2.0], np.float32)
    outs = [backend.create_tensor(og.f32, (3,)) for _ in range(4)]
    arg = backend.create_tensor(og.f32, (3,))
    arg.write(values)
    exe.call(outs, [arg])
    results = [o.read() for o in outs]
    np.testing.assert_array_equal(results[0], values)
    np.testing.assert_array_equal(results[3], values)
    np.testing.assert_allclose(results[1], np.exp(values), rtol=1e-6)
    outs[1].write(np.zeros(3, np.float32))  # each result has its own storage
    assert outs[2].read()[1] != 0
