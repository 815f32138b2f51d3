"""cuBLAS plans for strided products (``gpu/blas.py``): each layout the GEMM steps hand the
runtime, run with cuBLAS's column-major meaning on the fake device, against numpy."""

import numpy as np
import pytest

import opgraph as og
from opgraph.backends.gpu import FakeDevice
from opgraph.backends.gpu.blas import plan_gemm
from opgraph.backends.gpu.device import Strided


def _place(device, array):
    """``array`` in fake device memory; the Strided of the same layout (element strides)."""
    base = array.base if array.base is not None else array
    memory = device.allocate(base.nbytes)
    device.view(Strided(memory.ptr, og.f32, (base.size,), (1,)))[:] = base.reshape(-1)
    offset = (array.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 4
    strides = tuple(s // 4 for s in array.strides)
    return memory, Strided(memory.ptr + 4 * offset, og.f32, array.shape, strides)


def _layouts(rng, m, k, n):
    plain = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n))
    yield "contiguous", plain[0], plain[1].astype(np.float32)
    yield "transposed a", np.ascontiguousarray(plain[0].T).T, plain[1].astype(np.float32)
    yield "transposed b", plain[0], np.ascontiguousarray(plain[1].T.astype(np.float32)).T
    wide = rng.standard_normal((m, k + 5)).astype(np.float32)
    yield "a inside a wider matrix", wide[:, 2 : 2 + k], plain[1].astype(np.float32)


@pytest.mark.parametrize(("m", "k", "n"), [(7, 5, 3), (1, 16, 9), (6, 1, 4), (5, 8, 1), (1, 1, 1)])
def test_plans_compute_the_row_major_product(m, k, n):
    device = FakeDevice()
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    for name, a, b in _layouts(rng, m, k, n):
        kept_a, sa = _place(device, a)
        kept_b, sb = _place(device, b)
        out = device.allocate(4 * m * n)
        sc = Strided(out.ptr, og.f32, (m, n), (n, 1))
        assert plan_gemm(sa, sb, sc) is not None, name
        device.gemm(sa, sb, sc, None)
        got = device.view(sc)
        np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5, err_msg=name)
        del kept_a, kept_b


def test_batched_plans_with_a_broadcast_operand():
    device = FakeDevice()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    kept_a, sa = _place(device, a)
    kept_b, sb2 = _place(device, b)
    sb = Strided(sb2.ptr, og.f32, (4, 5, 3), (0, 3, 1))  # the same matrix for every entry
    out = device.allocate(4 * 4 * 6 * 3)
    sc = Strided(out.ptr, og.f32, (4, 6, 3), (18, 3, 1))
    plan = plan_gemm(sa, sb, sc)
    assert plan is not None and plan.batch == 4 and plan.a.stride == 0
    device.gemm(sa, sb, sc, None)
    np.testing.assert_allclose(device.view(sc), a @ b, rtol=1e-5, atol=1e-5)


def test_layouts_without_a_plan_fall_back():
    device = FakeDevice()
    a, b = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
    kept_a, sa = _place(device, a)
    kept_b, sb = _place(device, b)
    out = device.allocate(4 * 16)
    broadcast = Strided(sa.ptr, og.f32, (4, 4), (0, 0))
    columns = Strided(out.ptr, og.f32, (4, 4), (1, 4))  # c with contiguous columns
    assert plan_gemm(broadcast, sb, Strided(out.ptr, og.f32, (4, 4), (4, 1))) is None
    assert plan_gemm(sa, sb, columns) is None
    assert plan_gemm(Strided(sa.ptr, og.i32, (4, 4), (4, 1)), sb, columns) is None
    device.gemm(sa, sb, columns, None)  # matmul on the views
    np.testing.assert_allclose(device.view(columns), a @ b)
