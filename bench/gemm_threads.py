"""One thread against two for each product of the MLP (W3), alone.

    python bench/gemm_threads.py [--rows 256] [--rounds 5] [--block 0.2]

For each product ``x (rows x inner) @ W (inner x cols)`` of the W3 MLP (784x512, 512x512,
512x10), times opgraph with W a Constant (the panel GEMM, or the panel GEMV for one row), opgraph
with W a Parameter (OpenBLAS) and onnxruntime (W an initializer), each on one and on two
threads, interleaved round by round. Prints per runtime the median and best per call, the
speedup of two threads over one (medians), and for opgraph's two-thread runs what the runtime's
counters (``og_pool_counters``) saw per call: jobs shared out and the share of blocks the pool
worker ran, and the process CPU time per call (the caller's and the worker's work plus their
spinning). On an idle machine a speedup well under 2 with the worker running about half the
blocks points at the kernels (memory, false sharing); a worker running few blocks points at
the pool (wake-ups, a worker asleep when jobs arrive).
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import opgraph as og  # noqa: E402
from bench.gemm_isa import onnxruntime_runner  # noqa: E402
from opgraph import ops  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters  # noqa: E402

PRODUCTS = ((784, 512), (512, 512), (512, 10))  # (inner, cols) of the W3 MLP's layers


def opgraph_runner(
    cache: Path, threads: int, a: np.ndarray, w: np.ndarray, constant: bool
) -> tuple[Callable[[], None], CpuBackend]:
    backend = CpuBackend(CpuConfig(cache, default_config().compiler, num_threads=threads))
    x = og.parameter(og.f32, a.shape)
    args = [backend.create_tensor(og.f32, a.shape, a)]
    if constant:
        fn = og.Function([ops.matmul(x, og.constant(w))], [x])
    else:
        wp = og.parameter(og.f32, w.shape)
        fn = og.Function([ops.matmul(x, wp)], [x, wp])
        args.append(backend.create_tensor(og.f32, w.shape, w))
    exe = backend.compile(fn)
    out = [backend.create_tensor(og.f32, (a.shape[0], w.shape[1]))]
    exe.call(out, args)
    np.testing.assert_allclose(out[0].read(), a @ w, rtol=1e-3, atol=1e-3)
    return (lambda: exe.call(out, args)), backend


class Sample:
    """Per-call wall times, process CPU times, and runtime counter deltas of one runner."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.calls = 0
        self.counters = [0, 0, 0, 0]


def measure(
    runners: dict[str, Callable[[], object]], backend: CpuBackend, rounds: int, block: float
) -> dict[str, Sample]:
    library = backend.toolchain.runtime()
    samples = {name: Sample() for name in runners}
    names = list(runners)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run, sample = runners[name], samples[name]
            for _ in range(3):
                run()
            before = runtime_counters(library)
            started = time.perf_counter()
            while time.perf_counter() - started < block:
                t0, c0 = time.perf_counter(), time.process_time()
                run()
                sample.wall.append(time.perf_counter() - t0)
                sample.cpu.append(time.process_time() - c0)
                sample.calls += 1
            after = runtime_counters(library)
            sample.counters = [
                s + b - a for s, a, b in zip(sample.counters, before[:4], after[:4], strict=True)
            ]
            time.sleep(0.05)
    return samples


def report(inner: int, cols: int, rows: int, samples: dict[str, Sample]) -> None:
    print(f"\n{rows}x{inner} @ {inner}x{cols}")
    medians = {name: statistics.median(s.wall) for name, s in samples.items()}
    for name, s in samples.items():
        line = (
            f"  {name:34s} median {medians[name] * 1e3:8.3f} ms  best {min(s.wall) * 1e3:8.3f}"
            f" ms  cpu {statistics.median(s.cpu) * 1e3:8.3f} ms"
        )
        if name.endswith("2 threads"):
            one = medians[name.replace("2 threads", "1 thread")]
            line += f"  speedup {one / medians[name]:.2f}"
        jobs, _, caller, worker = s.counters
        if jobs and name.startswith("opgraph"):
            share = worker / (caller + worker)
            line += f"  jobs/call {jobs / s.calls:.1f}  worker blocks {share:.0%}"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=float, default=0.2, help="seconds per runtime per round")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="opgraph-gemm-threads-") as tmp:
        for inner, cols in PRODUCTS:
            a = rng.standard_normal((args.rows, inner)).astype(np.float32)
            w = (rng.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
            runners: dict[str, Callable[[], object]] = {}
            backend = None
            for threads in (1, 2):
                label = "1 thread" if threads == 1 else "2 threads"
                runners[f"opgraph constant W, {label}"], backend = opgraph_runner(
                    Path(tmp), threads, a, w, True
                )
                runners[f"opgraph Parameter W, {label}"], _ = opgraph_runner(
                    Path(tmp), threads, a, w, False
                )
                runners[f"onnxruntime, {label}"] = onnxruntime_runner(a, w, threads)
            assert backend is not None
            report(inner, cols, args.rows, measure(runners, backend, args.rounds, args.block))
    print(f"\nload average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
