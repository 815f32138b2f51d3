"""Where a zoo model's two-thread call goes: opgraph on one and two threads beside onnxruntime
on one and two, calls interleaved in one process, with the pool's own accounting.

    python bench/pool_account.py [--model efficientnet_b0] [--calls 40] [--rounds 4]
                                 [--block-clock] [--steps]

Per configuration and round: the wall minimum and median of ``exe.call`` (onnxruntime's
``run``), the process CPU time per call, and for opgraph's two-thread build the pool's
counters per call (``og_pool_counters``): jobs shared out, blocks run by the caller and by
the worker, futex wake-ups, the time the caller waited for blocks in progress and, of that,
the waits that ended asleep (``sleep_ticks``; the worker holding the block was descheduled).
``--block-clock`` adds the CPU time inside range functions, caller's and worker's apart
(``og_set_block_clock``; two thread-clock reads per block, which inflate it). ``--steps``
first splits the one-thread profile's step minimums into the steps that reach the pool on
two threads and those that never do (their sum is what two threads cannot halve).

A round is worth reading only where the one-thread wall median is near its minimum (the
machine was quiet for it); the load average is printed beside every line.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import functools
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import opgraph as og
from bench.models import Case, zoo_case
from bench.runners import onnxruntime
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.runtime_counters import block_times, runtime_counters
from opgraph.backends.cpu.config import CpuConfig

TICKS_PER_US = 2600  # the TSC of the machine these notes were taken on (2.6 GHz)


def compiled(case: Case, threads: int, cache: Path, profile: bool = False) -> tuple:  # type: ignore[type-arg]
    backend = CpuBackend(CpuConfig(cache, default_config().compiler, num_threads=threads))
    exe = backend.compile(case.function, profile=profile)
    ins = [backend.create_tensor(og.f32, a.shape, a.copy()) for a in case.inputs]
    outs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
    return exe, functools.partial(exe.call, outs, ins), backend.toolchain.runtime()


def serial_steps(case: Case, cache: Path) -> None:
    """The one-thread step minimums, split by whether the step reaches the pool on two."""
    two, _, _ = compiled(case, 2, cache)
    source = two.source()
    runs = dict(re.findall(r"static int (\w+)_run\(void\* const\* T, char\* A\) \{\n(.*?)\n\}",
                           source, re.S))  # fmt: skip
    steps = re.findall(r"int og_step_(\d+)\(void\* const\* T, char\* A, og_callback cb, "
                       r"double\* prof\) \{\n(.*?)\n\}", source, re.S)  # fmt: skip
    pooled = {
        int(n): any("og_parallel" in runs.get(c, "") for c in re.findall(r"(\w+)_run\(T, A\)", b))
        for n, b in steps
    }
    one, _, _ = compiled(case, 1, cache, profile=True)
    times: dict[int, list[float]] = collections.defaultdict(list)
    for i in range(33):
        one._counters.clear()
        one(*case.inputs)
        if i >= 3:
            for k, counter in enumerate(one.performance_counters()):
                times[k].append(counter.total_seconds)
    best = {k: min(v) * 1e6 for k, v in times.items()}
    for label, want in (("reach the pool", True), ("never do", False)):
        ids = [k for k in best if pooled.get(k, False) == want]
        print(f"steps that {label} on two threads: {len(ids)}, one-thread minimums "
              f"{sum(best[k] for k in ids):.0f} µs")  # fmt: skip


def measure(call: Callable[[], object], lib: ctypes.CDLL, calls: int) -> dict[str, float]:
    for _ in range(3):
        call()
    c0, b0, r0 = runtime_counters(lib), block_times(lib), resource.getrusage(resource.RUSAGE_SELF)
    walls = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        call()
        walls.append(time.perf_counter_ns() - started)
    c1, b1, r1 = runtime_counters(lib), block_times(lib), resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)

    def per_call(field: str) -> float:
        return (getattr(c1, field) - getattr(c0, field)) / calls

    return {
        "min": min(walls) / 1e3, "med": statistics.median(walls) / 1e3, "cpu": cpu / calls * 1e6,
        "jobs": per_call("jobs"), "caller_blocks": per_call("caller_blocks"),
        "worker_blocks": per_call("worker_blocks"), "wakes": per_call("wakes"),
        "wait": per_call("wait_ticks") / TICKS_PER_US,
        "asleep": per_call("sleep_ticks") / TICKS_PER_US,
        "in_caller": (b1.caller_ns - b0.caller_ns) / calls / 1e3,
        "in_worker": (b1.other_ns - b0.other_ns) / calls / 1e3,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="efficientnet_b0")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--block-clock", action="store_true")
    parser.add_argument("--steps", action="store_true")
    args = parser.parse_args()
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR") or tempfile.mkdtemp(prefix="opgraph-acct-"))
    case = zoo_case(args.model)
    if args.steps:
        serial_steps(case, cache)
    _, og1, lib = compiled(case, 1, cache)
    _, og2, _ = compiled(case, 2, cache)
    lib.og_set_block_clock.argtypes = [ctypes.c_long]
    lib.og_set_block_clock(1 if args.block_clock else 0)
    configs = {"opgraph 1": og1, "opgraph 2": og2,
               "ort 1": onnxruntime(case, 1).run, "ort 2": onnxruntime(case, 2).run}  # fmt: skip
    pool_fields = ["jobs", "caller_blocks", "worker_blocks", "wakes", "wait", "asleep"]
    if args.block_clock:
        pool_fields += ["in_caller", "in_worker"]
    print(f"{args.model}: per call, µs (wall min / median, process CPU); pool counters per call")
    for rnd in range(args.rounds):
        for name, call in configs.items():
            r = measure(call, lib, args.calls)
            line = f"{rnd} {name:10s} load {os.getloadavg()[0]:4.1f}  {r['min']:7.0f} "
            line += f"{r['med']:7.0f} {r['cpu']:7.0f}"
            if name == "opgraph 2":
                line += "  " + " ".join(f"{k}={r[k]:.0f}" for k in pool_fields)
            print(line, flush=True)


if __name__ == "__main__":
    main()
