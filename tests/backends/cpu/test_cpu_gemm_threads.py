"""Products by constant weights are split between the executable's threads on every path.

The thread split of the panel GEMM is computed at compile time for static shapes and per call
for symbolic ones (``codegen/symbolic_blas.py``); both must use the executable's thread count,
whether the executable is called with tensors (``exe.call``) or with arrays (``exe()``). The
runtime's counters (``og_pool_counters``) say how many jobs were shared out and how many
blocks pool workers ran: no timing. The results must not depend on the thread count.
"""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(44)

#: Calls before a pool worker must have run a block: a worker that is descheduled for a
#: whole call (a loaded machine) leaves its blocks to the caller, but not for this many. The
#: loop stops at the first block a worker runs (a quiet machine: the first call); 200 calls
#: were too few beside other processes at load 5-9 on two cores, where a woken worker kept
#: finding every block taken (2026-11-28, h151).
ATTEMPTS = 2000


def _backend(threads: int) -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), num_threads=threads))


def _mlp_layer(rows, inner: int, cols: int):
    """relu(x @ w + b) with w and b constant (a panel GEMM with a bias/ReLU epilogue), and
    the float64 reference of it as a function of x."""
    x = og.parameter(og.f32, (rows, inner), name="x")
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    b = RNG.standard_normal(cols).astype(np.float32)
    y = ops.matmul(x, og.constant(w))
    fn = og.Function([ops.relu(ops.add(y, ops.broadcast(og.constant(b), y.shape, (0,))))], [x])

    def reference(data: np.ndarray) -> np.ndarray:
        return np.maximum(data.astype(np.float64) @ w.astype(np.float64) + b, 0)

    return fn, reference


def _jobs_and_worker_blocks(backend: CpuBackend, run) -> tuple[int, int]:
    """Jobs shared out by one ``run()``, and whether a pool worker ran a block within
    ``ATTEMPTS`` runs (as 0 or 1)."""
    library = backend.toolchain.runtime()
    before = runtime_counters(library)
    run()
    jobs = runtime_counters(library)[0] - before[0]
    for _ in range(ATTEMPTS):
        if runtime_counters(library)[3] > before[3]:
            return jobs, 1
        run()
    return jobs, int(runtime_counters(library)[3] > before[3])


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
def test_product_by_constant_weights_runs_on_two_threads(symbolic):
    backend = _backend(2)
    rows = og.dim("batch", max=512) if symbolic else 256
    fn, reference = _mlp_layer(rows, 784, 512)
    exe = backend.compile(fn)
    if not symbolic:
        # one step, the product with its epilogue: the jobs counted below are the product's
        assert [s.panel for s in exe.program.steps if isinstance(s, GemmStep)] == [32]
        assert len(exe.program.steps) == 1
    assert "og_gemm_panels" in exe.source()
    data = RNG.random((256, 784), np.float32)
    want = reference(data)
    x = backend.create_tensor(og.f32, data.shape, data)
    out = backend.create_tensor(og.f32, (256, 512))

    def call() -> None:
        exe.call([out], [x])

    for run in (call, lambda: exe(data)):
        jobs, worker_ran = _jobs_and_worker_blocks(backend, run)
        assert jobs >= 1, "the product ran on one thread under num_threads=2"
        assert worker_ran, f"no pool worker ran a block in {ATTEMPTS} calls"
    np.testing.assert_allclose(out.read(), want, rtol=1e-4, atol=1e-4)


def test_one_thread_shares_nothing():
    backend = _backend(1)
    exe = backend.compile(_mlp_layer(256, 784, 512)[0])
    data = RNG.random((256, 784), np.float32)
    jobs, worker_ran = _jobs_and_worker_blocks(backend, lambda: exe(data))
    assert (jobs, worker_ran) == (0, 0)


@pytest.mark.parametrize(("rows", "inner", "cols"), [(1, 77, 45), (37, 123, 77), (256, 784, 10)])
@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
def test_results_do_not_depend_on_the_thread_count(rows, inner, cols, symbolic):
    """1 to 4 threads give the same results; even these small products are split
    (``parallel_threshold=1``), so odd block boundaries are covered. The panel GEMM computes
    each output element with the same operations in the same order whatever the split:
    bitwise equal. OpenBLAS (10 columns: no panels) splits rows, and its kernels for a
    block's edge rows may round differently: equal within float32 rounding."""
    dims = og.dim("batch", max=512) if symbolic else rows
    fn, reference = _mlp_layer(dims, inner, cols)
    data = RNG.standard_normal((rows, inner)).astype(np.float32)
    results, panels = [], set()
    for threads in (1, 2, 3, 4):
        config = dataclasses.replace(default_config(), num_threads=threads, parallel_threshold=1)
        exe = CpuBackend(config).compile(fn)
        panels.add("og_gemm_panels" in exe.source() or "og_gemv_panels" in exe.source())
        (got,) = exe(data)
        results.append(got)
    assert panels == {cols >= 32}
    np.testing.assert_allclose(results[0], reference(data), rtol=1e-4, atol=1e-4)
    for threads, got in zip((2, 3, 4), results[1:], strict=True):
        if cols >= 32:
            np.testing.assert_array_equal(got, results[0], err_msg=f"{threads} threads")
        else:
            np.testing.assert_allclose(got, results[0], rtol=1e-5, atol=1e-6)
