"""Hybrid placement (fake device): which side runs each step, the transfers between them,
and the copies at the call boundary — counted."""

import numpy as np
import pytest
from gpu_cases import fake_backend

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.program import FallbackStep, GemmStep, LoopStep, PoolStep
from opgraph.backends.gpu import FakeDevice, GpuBackend, GpuConfig
from opgraph.backends.gpu.placement import Side, Transfer


def _sandwich() -> og.Function:
    """exp on the GPU, cumsum (no GPU kernel) on the host, a product on the GPU."""
    x = og.parameter(og.f32, (8, 16), "x")
    y = ops.exp(x)
    t = ops.cumsum(y, 1)
    return og.Function([t * 2.0], [x], name="sandwich")


def _layout(exe):
    return [
        (type(p.step).__name__, p.side)
        if not isinstance(p.step, Transfer)
        else (p.step.direction, p.side)
        for p in exe.compiled.placement.steps
    ]


def _delta(device, before):
    return tuple(a - b for a, b in zip(device.stats.snapshot(), before, strict=True))


def test_a_fallback_between_device_steps_gets_one_transfer_each_way(fake):
    backend, device = fake
    exe = backend.compile(_sandwich())
    assert _layout(exe) == [
        ("LoopStep", Side.DEVICE),
        ("D2H", Side.HOST),
        ("FallbackStep", Side.HOST),
        ("H2D", Side.DEVICE),
        ("LoopStep", Side.DEVICE),
    ]
    assert exe.fallback_ops() == ["CumSum"]
    x = np.random.default_rng(0).uniform(-1, 1, (8, 16)).astype(np.float32)
    before = device.stats.snapshot()
    (got,) = exe(x)
    np.testing.assert_allclose(got, np.cumsum(np.exp(x), 1) * 2, rtol=1e-6)
    h2d, h2d_bytes, d2h, d2h_bytes = _delta(device, before)
    assert (h2d, d2h) == (2, 2)  # x in and the cumsum's input back; its output out and z out
    assert h2d_bytes == d2h_bytes == 2 * x.nbytes


def test_device_tensors_leave_only_the_transfers_inside_the_call(fake):
    backend, device = fake
    exe = backend.compile(_sandwich())
    x = np.arange(128, dtype=np.float32).reshape(8, 16) / 100
    inp = backend.create_tensor(og.f32, (8, 16))
    inp.write(x)
    out = backend.create_tensor(og.f32, (8, 16))
    before = device.stats.snapshot()
    exe.call([out], [inp])
    assert _delta(device, before)[::2] == (1, 1)  # only the two transfers around the cumsum
    np.testing.assert_allclose(out.read(), np.cumsum(np.exp(x), 1) * 2, rtol=1e-6)


def _host_chain() -> og.Function:
    """cumsum → small add → cumsum: the add sits between two host steps."""
    x = og.parameter(og.f32, (6,), "x")
    middle = ops.add(ops.cumsum(x, 0), og.constant(np.ones(6, np.float32)))
    return og.Function([ops.cumsum(middle, 0)], [x], name="host_chain")


@pytest.mark.parametrize(("limit", "inside"), [(4096, 0), (0, 2)])
def test_a_small_kernel_between_host_steps_runs_on_the_host(limit, inside):
    backend, device = fake_backend(host_kernel_limit=limit)
    exe = backend.compile(_host_chain())
    loop_side = next(p.side for p in exe.compiled.placement.steps if isinstance(p.step, LoopStep))
    assert loop_side is (Side.HOST if limit else Side.DEVICE)
    assert len(exe.transfers()) == inside
    x = np.arange(6, dtype=np.float32)
    (got,) = exe(x)
    np.testing.assert_allclose(got, np.cumsum(np.cumsum(x) + 1))


def test_steps_the_device_lacks_run_on_the_host_with_transfers():
    device = FakeDevice(unsupported={PoolStep, GemmStep})
    backend = GpuBackend(GpuConfig(), device=device)
    x = og.parameter(og.f32, (1, 2, 8, 8), "x")
    w = og.parameter(og.f32, (8, 4), "w")
    pooled = ops.max_pool(ops.relu(x), (2, 2), (2, 2))  # relu on the GPU, pool on the host
    y = ops.dot(ops.reshape(ops.exp(pooled), (2, 16)), ops.reshape(w, (16, 2)))
    exe = backend.compile(og.Function([ops.tanh(y)], [x, w], name="lacking"))
    sides = {type(p.step): p.side for p in exe.compiled.placement.steps}
    assert sides[PoolStep] is Side.HOST and sides[GemmStep] is Side.HOST
    assert exe.transfers()
    rng = np.random.default_rng(1)
    xv, wv = rng.standard_normal((1, 2, 8, 8), np.float32), rng.standard_normal((8, 4), np.float32)
    pool = np.maximum(xv, 0).reshape(1, 2, 4, 2, 4, 2).max(axis=(3, 5))
    want = np.tanh(np.exp(pool).reshape(2, 16) @ wv.reshape(16, 2))
    np.testing.assert_allclose(exe(xv, wv)[0], want, rtol=1e-5, atol=1e-6)


def test_every_step_of_a_plain_graph_runs_on_the_device(fake):
    backend, device = fake
    a = og.parameter(og.f32, (32, 64), "a")
    b = og.parameter(og.f32, (64, 16), "b")
    y = ops.softmax(ops.relu(ops.dot(a, b)), -1)
    exe = backend.compile(og.Function([y], [a, b], name="mlp"))
    assert exe.host_steps() == [] and exe.transfers() == []
    assert all(p.side is Side.DEVICE for p in exe.compiled.placement.steps)
    text = exe.placement()
    assert "GPU" in text and "0 on the CPU, 0 transfer(s)" in text


def test_placement_text_names_sides_and_transfers(fake):
    backend, _ = fake
    text = backend.compile(_sandwich()).placement()
    assert "D2H" in text and "H2D" in text and "fallback: %" in text
    assert "2 step(s) on the GPU, 1 on the CPU, 2 transfer(s)" in text


def test_a_result_computed_on_the_host_is_copied_to_a_device_output(fake):
    backend, device = fake
    x = og.parameter(og.f32, (5,), "x")
    exe = backend.compile(og.Function([ops.cumsum(x, 0)], [x], name="host_result"))
    assert [type(p.step) for p in exe.compiled.placement.steps] == [FallbackStep]
    inp, out = backend.create_tensor(og.f32, (5,)), backend.create_tensor(og.f32, (5,))
    inp.write(np.arange(5, dtype=np.float32))
    before = device.stats.snapshot()
    exe.call([out], [inp])
    assert _delta(device, before)[::2] == (1, 1)  # argument to the host, result back
    np.testing.assert_allclose(out.read(), np.cumsum(np.arange(5)))
