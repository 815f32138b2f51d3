"""Defects found when the GPU backend first ran on a GPU (an H200, 2026-11-26), each on the
fake device here and on the real one where a CUDA device is present."""

import numpy as np
import pytest
from gpu_cases import fake_backend

import opgraph as og
from opgraph import ops, optim
from opgraph.backends import gpu
from opgraph.testing.oracle import evaluate

DEVICES = [
    pytest.param("fake", id="fake"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=pytest.mark.skipif(
            not gpu.available(), reason=f"no GPU: {gpu.unavailable_reason() or 'unavailable'}"
        ),
    ),
]


def _backend(device: str) -> gpu.GpuBackend:
    return fake_backend()[0] if device == "fake" else gpu.GpuBackend()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("rows", "cols"), [(1, 40), (64, 40), (64, 512), (3, 31)])
def test_product_by_a_constant_matrix(device, rows, cols):
    """Constant f32 weights of 32+ columns (16+ for one row) were repacked as the CPU's column
    panels, which cuBLAS read as a strided matrix: out of bounds and wrong (the imported MLP,
    ResNet and BERT weights)."""
    rng = np.random.default_rng(rows + cols)
    weights = rng.standard_normal((784, cols)).astype(np.float32)
    x = og.parameter(og.f32, (rows, 784), "x")
    y = ops.relu(ops.dot(x, ops.constant(weights)))
    z = ops.matmul(ops.reshape(x, (1, rows, 784)), ops.constant(weights))
    fn = og.Function([y, z], [x], name="const_product")
    data = rng.standard_normal((rows, 784)).astype(np.float32)
    got_y, got_z = _backend(device).compile(fn)(data)
    want = data.astype(np.float64) @ weights
    np.testing.assert_allclose(got_y, np.maximum(want, 0), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got_z[0], want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_three_by_three_convolution_with_constant_filters(device):
    """The shared lowering turned it into the CPU's WinogradStep, which the GPU can run
    neither on the device nor on the host (every 3x3 layer of the imported ResNet-18)."""
    rng = np.random.default_rng(3)
    filters = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    x = og.parameter(og.f32, (2, 16, 56, 56), "x")
    y = ops.convolution(x, ops.constant(filters), (1, 1), None, (1, 1), (1, 1))
    fn = og.Function([ops.relu(y)], [x], name="conv3x3")
    exe = _backend(device).compile(fn)
    assert "WinogradStep" not in exe.placement()
    data = rng.standard_normal((2, 16, 56, 56)).astype(np.float32)
    (got,) = exe(data)
    (want,) = evaluate(fn, [data])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _least_squares(batch: int = 8) -> og.Function:
    w = og.parameter(og.f64, (3,), name="w")
    x = og.parameter(og.f64, (batch, 3), name="x")
    y = og.parameter(og.f64, (batch,), name="y")
    err = ops.subtract(ops.dot(x, w), y)
    return og.Function([ops.reduce_sum(err * err, (0,)) * (0.5 / batch)], [w, x, y], name="ls")


@pytest.mark.parametrize("device", DEVICES)
def test_trainer_steps_on_device_tensors(device):
    backend = _backend(device)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(3)
    trainer = optim.Trainer(_least_squares(), 1, optim.SGD(lr=0.1), [w], backend)
    assert isinstance(trainer.parameter_tensors[0], gpu.DeviceTensor)
    for _ in range(3):
        x, y = rng.standard_normal((8, 3)), rng.standard_normal(8)
        err = x @ w - y
        loss = trainer.step(x, y)  # was: GraphError, the loss tensor has no host buffer
        np.testing.assert_allclose(loss, 0.5 * np.mean(err**2), rtol=1e-12)
        w = w - 0.1 * x.T @ err / 8
        np.testing.assert_allclose(trainer.parameter_values()[0], w, rtol=1e-12)
