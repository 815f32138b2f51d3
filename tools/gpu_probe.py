"""Probes of the GPU backend's run-time paths on a real CUDA device (docs/gpu.md, checklist
items 6-10 and 12), one line per check: ``PASS name: detail`` or ``FAIL name: error``.

    python tools/gpu_probe.py [--skip-huge]

Each probe compares against the numpy oracle (or CuPy on the device for the > 2^31-element
kernel) and goes on after a failure; the exit status is the number of failed probes (at most
100). Without a CUDA device every probe fails at once with the reason.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.backends import gpu
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate

PROBES: list[tuple[str, Callable[[gpu.GpuBackend], str]]] = []


def probe(fn: Callable[[gpu.GpuBackend], str]) -> Callable[[gpu.GpuBackend], str]:
    PROBES.append((fn.__name__, fn))
    return fn


def check(backend: gpu.GpuBackend, fn: og.Function, args: list[Any], tol: float = 1e-5) -> str:
    got = backend.compile(fn)(*args)
    want = evaluate(fn, [a if isinstance(a, np.ndarray) else _host(a) for a in args])
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, tol, tol, fn.name)
        if g.size and g.dtype.kind == "f":
            worst = max(worst, float(np.nanmax(np.abs(g.astype(np.float64) - w))))
    return f"max abs error {worst:.2e}"


def _host(array: Any) -> np.ndarray:
    import cupy

    return np.asarray(cupy.asnumpy(array))


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ------------------------------------------------------------------- item 6: run-time paths
def _w2(size: int) -> og.Function:
    x = og.parameter(og.f32, (size,), "x")
    return og.Function([ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x / 3.0], [x], name="w2")


@probe
def vector_and_scalar_paths(backend: gpu.GpuBackend) -> str:
    notes = []
    for size in (4 << 20, 4096, 4099, 3):
        data = _rng(size).uniform(-4, 4, size).astype(np.float32)
        notes.append(f"{size}: {check(backend, _w2(size), [data])}")
    return "; ".join(notes)


@probe
def misaligned_device_arrays(backend: gpu.GpuBackend) -> str:
    import cupy

    notes = []
    for skip in (1, 2, 3):
        base = cupy.arange(4096 + skip, dtype=cupy.float32) / 1000 - 2
        view = base[skip:]  # 4*skip bytes past an aligned start: the scalar loop
        notes.append(f"offset {4 * skip} B: {check(backend, _w2(4096), [view])}")
    return "; ".join(notes)


@probe
def block_and_thread_row_reductions(backend: gpu.GpuBackend) -> str:
    notes = []
    for rows, length in ((4, 63), (4, 64), (3, 65), (8, 100), (5, 1000), (2, 4097), (2, 100000)):
        x = og.parameter(og.f32, (rows, length), "x")
        data = _rng(length).standard_normal((rows, length)).astype(np.float32)
        data[0, length // 2] = np.nan
        fn = og.Function(
            [
                ops.softmax(x, -1),
                ops.reduce_sum(x, (1,)),
                ops.reduce_max(x, (1,)),
                ops.reduce_min(x, (1,)),
                ops.reduce_mean(x, (1,)),
            ],
            [x],
            name=f"rows_{rows}x{length}",
        )
        notes.append(f"{rows}x{length}: {check(backend, fn, [data], 1e-4)}")
    return "; ".join(notes)


@probe
def column_reductions_and_layer_norm(backend: gpu.GpuBackend) -> str:
    x = og.parameter(og.f32, (100000, 3), "x")
    data = _rng(7).standard_normal((100000, 3)).astype(np.float32)
    first = check(backend, og.Function([ops.reduce_sum(x, (0,))], [x], name="cols"), [data], 1e-3)
    h = og.parameter(og.f32, (128, 768), "h")
    s, b = og.parameter(og.f32, (768,), "s"), og.parameter(og.f32, (768,), "b")
    fn = og.Function([ops.layer_norm(h, s, b, -1, 1e-12)], [h, s, b], name="ln")
    args = [_rng(8).standard_normal(shape).astype(np.float32) for shape in ((128, 768), (768,))]
    second = check(backend, fn, [args[0], args[1], args[1] * 0.5], 1e-4)
    return f"columns 100000x3: {first}; layer norm 128x768: {second}"


@probe
def grid_stride_beyond_max_blocks(backend: gpu.GpuBackend) -> str:
    size = backend.device.max_blocks * backend.config.block * 4 * 3 + 5  # > one pass
    data = _rng(9).uniform(-4, 4, size).astype(np.float32)
    return f"{size} elements, max_blocks {backend.device.max_blocks}: " + check(
        backend, _w2(size), [data]
    )


@probe
def index_beyond_2_pow_31(backend: gpu.GpuBackend) -> str:
    import cupy

    n = (1 << 31) + 8
    x, y = og.parameter(og.u8, (n,), "x"), og.parameter(og.u8, (n,), "y")
    exe = backend.compile_static(og.Function([x + y], [x, y], name="big"))
    assert "long long" in exe.source(), "expected 64-bit indices"
    a = cupy.arange(n, dtype=cupy.uint64).astype(cupy.uint8)
    b = cupy.full(n, 7, dtype=cupy.uint8)
    out = backend.create_tensor(og.u8, (n,))
    exe.call([out], [backend.create_tensor(og.u8, (n,), a), backend.create_tensor(og.u8, (n,), b)])
    got = cupy.asarray(out)
    wrong = int((got != (a + b)).sum())
    assert wrong == 0, f"{wrong} wrong elements"
    tail = cupy.asnumpy(got[-4:])
    del a, b, got, out
    cupy.get_default_memory_pool().free_all_blocks()
    return f"{n} u8 elements correct (tail {tail.tolist()})"


# ------------------------------------------------------------------------ item 7: cuBLAS
@probe
def cublas_batched_strided_transposed(backend: gpu.GpuBackend) -> str:
    rng = _rng(10)
    a, b = og.parameter(og.f32, (4, 3, 64, 32), "a"), og.parameter(og.f32, (3, 32, 16), "b")
    c, d = og.parameter(og.f32, (48, 96), "c"), og.parameter(og.f32, (48, 80), "d")
    fn = og.Function(
        [ops.matmul(a, b), ops.matmul(ops.transpose(c, (1, 0)), d)], [a, b, c, d], name="mm"
    )
    args = [rng.standard_normal(t.shape).astype(np.float32) for t in fn.parameter_types]
    return check(backend, fn, args, 1e-4)


@probe
def convolutions_grouped_strided_1x1(backend: gpu.GpuBackend) -> str:
    rng = _rng(11)
    x, w = og.parameter(og.f32, (2, 4, 17, 17), "x"), og.parameter(og.f32, (6, 2, 3, 3), "w")
    v = og.parameter(og.f32, (8, 4, 1, 1), "v")
    results = [
        ops.relu(ops.convolution(x, w, (2, 2), None, (1, 1), (1, 1), groups=2)),
        ops.convolution(x, v),
        ops.convolution(x, w, (1, 1), (2, 2), (2, 2), (2, 2), groups=2),
        ops.max_pool(x, (3, 3), (2, 2)),
        ops.avg_pool(x, (3, 3), (1, 1), (1, 1), (1, 1)),
    ]
    fn = og.Function(results, [x, w, v], name="conv")
    args = [rng.standard_normal(t.shape).astype(np.float32) for t in fn.parameter_types]
    return check(backend, fn, args, 1e-4)


@probe
def no_tf32_in_f32_products(backend: gpu.GpuBackend) -> str:
    n = 1024
    a, b = og.parameter(og.f32, (n, n), "a"), og.parameter(og.f32, (n, n), "b")
    rng = _rng(12)
    x, y = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    (got,) = backend.compile(og.Function([ops.matmul(a, b)], [a, b], name="tf32"))(x, y)
    exact = x.astype(np.float64) @ y.astype(np.float64)
    relative = float(np.max(np.abs(got - exact)) / np.max(np.abs(exact)))
    assert relative < 1e-5, f"relative error {relative:.1e}: TF32 (about 1e-3) was used"
    return f"relative error {relative:.1e} (TF32 would give about 1e-3)"


# ------------------------------------------------------------------- item 8: CuPy interop
@probe
def interop_cuda_array_interface_and_dlpack(backend: gpu.GpuBackend) -> str:
    import cupy
    import torch

    x = og.parameter(og.f32, (256, 256), "x")
    exe = backend.compile(og.Function([ops.relu(x) * 2.0], [x], name="relu2"))
    data = cupy.random.standard_normal((256, 256), dtype=cupy.float32)
    want = cupy.maximum(data, 0) * 2
    out = backend.create_tensor(og.f32, (256, 256))
    assert isinstance(out, gpu.DeviceTensor)
    before = backend.device.stats.snapshot()
    exe.call([out], [backend.create_tensor(og.f32, (256, 256), data)])
    assert backend.device.stats.snapshot() == before, "a device-to-device call copied"
    cupy.testing.assert_allclose(cupy.asarray(out), want, rtol=1e-6)
    as_torch = torch.as_tensor(out, device="cuda")
    assert as_torch.data_ptr() == out.ptr, "torch.as_tensor copied"
    # a torch tensor in, through __cuda_array_interface__, then through DLPack only
    t_in = torch.from_dlpack(data)
    exe.call([out], [backend.create_tensor(og.f32, (256, 256), t_in)])
    cupy.testing.assert_allclose(cupy.asarray(out), want, rtol=1e-6)

    class DlpackOnly:
        def __init__(self, tensor: Any) -> None:
            self.tensor = tensor

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.tensor.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return self.tensor.__dlpack_device__()

    wrapped = backend.create_tensor(og.f32, (256, 256), DlpackOnly(t_in))
    assert isinstance(wrapped, gpu.DeviceTensor)
    assert wrapped.ptr == t_in.data_ptr(), "DLPack import copied"
    exe.call([out], [wrapped])
    cupy.testing.assert_allclose(cupy.asarray(out), want, rtol=1e-6)
    (host,) = exe(data)  # exe(*arrays) with a device array
    np.testing.assert_allclose(host, cupy.asnumpy(want), rtol=1e-6)
    return "CuPy in/out, torch.as_tensor zero-copy, torch in (CAI), DLPack-only in, exe(cupy)"


@probe
def blocking_stream_orders_after_default_stream(backend: gpu.GpuBackend) -> str:
    import cupy

    n = 1 << 24
    x = og.parameter(og.f32, (n,), "x")
    exe = backend.compile(og.Function([x * 2.0], [x], name="order"))
    out = backend.create_tensor(og.f32, (n,))
    bad = 0
    for k in range(5):
        data = cupy.zeros(n, cupy.float32)
        for _ in range(20):  # queue work on CuPy's default stream, no synchronization
            data += 1.0
        data *= k + 1
        exe.call([out], [backend.create_tensor(og.f32, (n,), data)])
        bad += int((cupy.asarray(out) != 40.0 * (k + 1)).sum())
    assert bad == 0, f"{bad} elements read before CuPy's default-stream work ended"
    return "5 calls right after unsynchronized default-stream work: all correct"


# ----------------------------------------------------------- item 9: threads and the pool
@probe
def executables_across_threads(backend: gpu.GpuBackend) -> str:
    x = og.parameter(og.f32, (512, 512), "x")
    w = og.parameter(og.f32, (512, 512), "w")
    exes = [
        backend.compile(og.Function([ops.softmax(x, -1)], [x, w], name="ta")),
        backend.compile(og.Function([ops.exp(ops.negative(x))], [x, w], name="tb")),
        backend.compile(og.Function([ops.relu(ops.matmul(x, w))], [x, w], name="tc")),
    ]
    rng = _rng(13)
    data = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2)]
    wants = [evaluate(e.function, data)[0] for e in exes]
    errors: list[str] = []

    def worker(k: int) -> None:
        try:
            for _ in range(20):
                (got,) = exes[k % 3](*data)
                if not np.allclose(got, wants[k % 3], rtol=1e-4, atol=1e-4):
                    errors.append(f"thread {k}: wrong result")
        except Exception as error:  # reported below
            errors.append(f"thread {k}: {error!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    return "3 executables x 8 threads x 20 calls agree"


@probe
def no_pool_growth_over_many_calls(backend: gpu.GpuBackend) -> str:
    import cupy

    x = og.parameter(og.f32, (64, 1000), "x")
    c = ops.cumsum(ops.exp(x), 1)  # a host fallback between device steps
    exe = backend.compile(og.Function([ops.softmax(c, -1), ops.tanh(x)], [x], name="pool"))
    data = _rng(14).standard_normal((64, 1000)).astype(np.float32)
    pool = cupy.get_default_memory_pool()
    for _ in range(20):
        exe(data)
    used = pool.used_bytes()
    for _ in range(500):
        exe(data)
    grown = pool.used_bytes() - used
    assert grown <= 0, f"pool grew by {grown} bytes over 500 calls"
    return f"pool used {used} bytes, unchanged over 500 calls"


# --------------------------------------------------------------- item 10: the error word
@probe
def integer_division_by_zero_then_success(backend: gpu.GpuBackend) -> str:
    a, b = og.parameter(og.i32, (1000,), "a"), og.parameter(og.i32, (1000,), "b")
    exe = backend.compile(og.Function([ops.divide(a, b)], [a, b], name="div"))
    divisors = np.ones(1000, np.int32)
    divisors[999] = 0
    try:
        exe(np.ones(1000, np.int32), divisors)
    except og.ExecutionError as error:
        message = str(error)
    else:
        raise AssertionError("no ExecutionError for a division by zero")
    assert "Div" in message and "division by zero" in message, message
    divisors[999] = 2
    (got,) = exe(np.full(1000, 7, np.int32), divisors)
    assert got[0] == 7 and got[999] == 3, got[[0, 999]]
    return f"raised {message!r}; the next call succeeded"


# --------------------------------------------------------------- hybrid and profiling
@probe
def hybrid_placement_with_host_fallback(backend: gpu.GpuBackend) -> str:
    x = og.parameter(og.f32, (8, 16), "x")
    fn = og.Function([ops.cumsum(ops.exp(x), 1) * 2.0], [x], name="hybrid")
    exe = backend.compile(fn)
    placement = exe.placement()  # type: ignore[attr-defined]
    assert "CPU" in placement and "GPU" in placement, placement
    result = check(backend, fn, [_rng(15).standard_normal((8, 16)).astype(np.float32)])
    return f"{placement.splitlines()[-1]}; {result}"


@probe
def profile_counters(backend: gpu.GpuBackend) -> str:
    x = og.parameter(og.f32, (256, 1024), "x")
    w = og.parameter(og.f32, (1024, 1024), "w")
    fn = og.Function([ops.softmax(ops.matmul(x, w), -1)], [x, w], name="prof")
    exe = backend.compile(fn, profile=True)
    args = [_rng(16).standard_normal(t.shape).astype(np.float32) for t in fn.parameter_types]
    for _ in range(10):
        exe(*args)
    counters = exe.performance_counters()
    assert counters and all(c.calls == 10 for c in counters), counters
    return "; ".join(f"{c.node[:50]}: {c.average_seconds * 1e6:.0f} us" for c in counters)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-huge", action="store_true", help="skip the 2^31-element probe")
    parser.add_argument(
        "--fake", action="store_true", help="run on the fake device (checks the probes only)"
    )
    args = parser.parse_args()
    if args.fake:
        backend = gpu.GpuBackend(device=gpu.FakeDevice())
    elif not gpu.available():
        print(f"FAIL device: {gpu.unavailable_reason()}")
        return 1
    else:
        backend = gpu.GpuBackend()
    print(f"device: {backend.device.name}, max_blocks {backend.device.max_blocks}", flush=True)
    failed = 0
    for name, run in PROBES:
        if args.skip_huge and name == "index_beyond_2_pow_31":
            continue
        started = time.perf_counter()
        try:
            detail = run(backend)
        except Exception as error:
            failed += 1
            print(f"FAIL {name}: {type(error).__name__}: {str(error)[:1500]}")
            traceback.print_exc(limit=-4, file=sys.stdout)
        else:
            print(f"PASS {name}: {detail}")
        print(f"     ({time.perf_counter() - started:.2f} s)", flush=True)
    print(f"{failed} probe(s) failed of {len(PROBES)}")
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
