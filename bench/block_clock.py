"""Where a two-thread call's CPU time goes: inside the kernels' blocks, or in the pool.

    python bench/block_clock.py [--case w3_256|w2|w1_N] [--groups 6] [--gate 0.10]

Compiles one case (``bench/models.py``) for two threads and runs it with the runtime's block
clock on (``og_set_block_clock``: thread CPU time inside range functions, callers' and the
workers' apart), in two configurations interleaved per group: **two threads**, and **one
thread** running the very same blocks (a stand-in host team of the caller alone,
``og_set_team``, so every block is the caller's). Per configuration: the median call time,
the process's CPU time per call, the CPU time inside blocks (caller, worker) and outside them
(claiming, spinning, waiting, the Python call). The ratio of the in-block CPU time on two
threads to that on one is the per-thread slowdown of running beside the other thread
(shared L3, memory); the rest of the two-thread excess is the pool's.

A group is kept only when other processes used under ``--gate`` of the two cores during it
(``bench/pool_load.py``'s gate): the slowdown exists only while both threads run at once,
and on a loaded machine the worker seldom does.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import opgraph as og
from bench import models
from bench.pool_load import (
    add_case_arguments,
    busy_ns,
    load_case,
    own_ns,
    quiet_spell,
    timed_calls,
)
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.runtime_counters import block_times
from opgraph.backends.cpu.config import CpuConfig

_BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
def _alone(fn: int, data: int, threads: int, flags: int) -> None:
    """A host "team" of the calling thread alone: it claims every block of the job."""
    _BODY(fn)(data)


class Bench:
    def __init__(self, case: models.Case, cache: Path) -> None:
        backend = CpuBackend(CpuConfig(cache, default_config().compiler, num_threads=2))
        exe = backend.compile(case.function)
        ins = [backend.create_tensor(og.f32, a.shape, a.copy()) for a in case.inputs]
        outs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
        self.call = functools.partial(exe.call, outs, ins)
        self.lib = backend.toolchain.runtime()
        self.lib.og_set_block_clock.argtypes = [ctypes.c_long]
        self.lib.og_set_team.argtypes = [ctypes.c_void_p]
        self.alone = ctypes.cast(_alone, ctypes.c_void_p).value

    def one_thread(self) -> None:
        self.lib.og_set_team(self.alone)
        try:
            self.call()
        finally:
            self.lib.og_set_team(None)

    def block(self, call: Callable[[], None], seconds: float) -> dict[str, float]:
        for _ in range(3):
            call()
        b0, m0, t0 = busy_ns(), own_ns(), block_times(self.lib)
        times = timed_calls(call, seconds)
        b1, m1, t1 = busy_ns(), own_ns(), block_times(self.lib)
        n = len(times)
        caller, other = (t1.caller_ns - t0.caller_ns) / n, (t1.other_ns - t0.other_ns) / n
        return {
            "median_us": statistics.median(times) / 1e3,
            "cpu_us": (m1 - m0) / n / 1e3,
            "caller_us": caller / 1e3,
            "worker_us": other / 1e3,
            "outside_us": ((m1 - m0) / n - caller - other) / 1e3,
            "worker_runs": (t1.other_runs - t0.other_runs) / n,
            "others": ((b1 - b0) - (m1 - m0)) / (seconds * 2e9),
        }

    def group(self, seconds: float) -> dict[str, dict[str, float]]:
        self.lib.og_set_block_clock(1)
        try:
            return {
                "1 thread (same blocks)": self.block(self.one_thread, seconds),
                "2 threads": self.block(self.call, seconds),
            }
        finally:
            self.lib.og_set_block_clock(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_case_arguments(parser, "w3_256", seconds=0.3, gate=0.10)
    args = parser.parse_args()
    case = load_case(args.case)
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR") or tempfile.mkdtemp(prefix="opgraph-clock-"))
    bench = Bench(case, cache)
    results: dict[str, list[dict[str, float]]] = {}
    started, tried, kept = time.time(), 0, 0
    while kept < args.groups and quiet_spell(args.budget - (time.time() - started), args.gate):
        tried += 1
        group = bench.group(args.seconds)
        if max(r["others"] for r in group.values()) > args.gate:
            continue
        kept += 1
        for config, r in group.items():
            results.setdefault(config, []).append(r)
    print(f"\n{case.name}: {kept} groups kept of {tried}, load average {os.getloadavg()}\n")
    print("| configuration | median µs | CPU µs/call | in blocks: caller | worker | "
          "outside blocks | worker's blocks |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    medians = {
        config: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        for config, rs in results.items()
    }
    for config, m in medians.items():
        cells = [m[k] for k in ("median_us", "cpu_us", "caller_us", "worker_us", "outside_us")]
        print(f"| {config} | " + " | ".join(f"{c:.0f}" for c in cells)
              + f" | {m['worker_runs']:.1f} |")  # fmt: skip
    if len(medians) == 2:
        one, two = medians["1 thread (same blocks)"], medians["2 threads"]
        inside = (two["caller_us"] + two["worker_us"]) / (one["caller_us"] + one["worker_us"])
        print(
            f"\nin-block CPU, 2 threads / 1 thread: {inside:.3f}; "
            f"process CPU: {two['cpu_us'] / one['cpu_us']:.3f}"
        )


if __name__ == "__main__":
    main()
