"""opgraph's thread pool beside busy loops, measured only while nothing else runs.

    python bench/pool_load.py [--case w2|w1_32|...] [--groups 6] [--budget 600]

Measures one case (``bench/models.py``: W2, W1 at a size or W3 at a batch) with ``exe.call``
in blocks of calls: two threads and one thread, quiet and beside one busy-looping process
(``bench/load.py``), and two threads with each placement rule of the pool switched off
(``og_set_placement``: ``apart`` keeps the worker off the caller's CPU but never hands the
caller's CPU over, ``none`` is the pool before 2026-11-26's placement rules), and two threads
with the wake-up rules of 2026-11-26 (H68) switched off (``og_set_wake_rules``: ``old wakes``
wakes sleepers only after the caller's first block, and never for jobs not worth it). One
*group* measures every configuration once, interleaved.

On a machine shared with other users a group is kept only when the CPU time that other
processes used during it (``/proc/stat`` busy time less this process's and the busy loop's)
stays under ``--gate`` of the two cores; a group starts only after a quiet spell. Per
configuration it prints the median over groups of the blocks' median call time, the CPU time
of the process per call, and per call the pool's counters: blocks the worker ran, the
caller's wait for blocks in progress, worker joins on the caller's CPU, hand-overs, wake-ups
of sleeping workers (and of those, the ones made when a job was published for its function's
pace, and re-wakes).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import opgraph as og
from bench import bert, load, models
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters
from opgraph.backends.cpu.config import CpuConfig

TICK = os.sysconf("SC_CLK_TCK")
TSC_GHZ = 2.596  # this machine's TSC (dmesg "tsc: Detected"): the counters' wait is in ticks
#: (name, threads, placement rules, wake-up rules, loaded)
Config = tuple[str, int, int, int, bool]
#: name: (placement rules, wake-up rules)
CONFIGS = {"both": (-1, -1), "apart": (1, -1), "none": (0, -1), "old wakes": (-1, 0)}


def busy_ns() -> float:
    """CPU time used by everything on the machine (``/proc/stat``, less idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) * 1e9 / TICK


def run_ns(path: str) -> int:
    with open(path) as f:
        return int(f.read().split()[0])


def own_ns() -> int:
    return sum(run_ns(f"/proc/self/task/{t}/schedstat") for t in os.listdir("/proc/self/task"))


def quiet_spell(limit: float, share: float) -> bool:
    """Wait (at most ``limit`` s) for 0.4 s in which other processes used under ``share``."""
    end = time.time() + limit
    while time.time() < end:
        b0, m0 = busy_ns(), own_ns()
        time.sleep(0.4)
        if (busy_ns() - b0) - (own_ns() - m0) < share * 0.8e9:
            return True
    return False


class Bench:
    def __init__(self, case: models.Case, cache: Path) -> None:
        self.calls: dict[int, Callable[[], None]] = {}
        for threads in (1, 2):
            backend = CpuBackend(CpuConfig(cache, default_config().compiler, num_threads=threads))
            exe = backend.compile(case.function)
            ins = [backend.create_tensor(og.f32, a.shape, a.copy()) for a in case.inputs]
            outs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
            self.calls[threads] = functools.partial(exe.call, outs, ins)
        self.lib = backend.toolchain.runtime()
        self.lib.og_set_placement.argtypes = [ctypes.c_long]
        self.lib.og_set_wake_rules.argtypes = [ctypes.c_long]
        self.loop: subprocess.Popen[bytes] | None = None

    def block(self, threads: int, seconds: float) -> dict[str, float]:
        call = self.calls[threads]
        for _ in range(3):
            call()
        loop = f"/proc/{self.loop.pid}/schedstat" if self.loop else None
        b0, m0, c0 = busy_ns(), own_ns(), runtime_counters(self.lib)
        l0 = run_ns(loop) if loop else 0
        times = timed_calls(call, seconds)
        b1, m1, c1 = busy_ns(), own_ns(), runtime_counters(self.lib)
        l1 = run_ns(loop) if loop else 0
        n = len(times)
        return {
            "median_us": statistics.median(times) / 1e3,
            "cpu_us": (m1 - m0) / n / 1e3,
            "others": ((b1 - b0) - (m1 - m0) - (l1 - l0)) / (seconds * 2e9),
            "worker_blocks": (c1.worker_blocks - c0.worker_blocks) / n,
            "wait_us": (c1.wait_ticks - c0.wait_ticks) / TSC_GHZ / 1e3 / n,
            "colocated": (c1.colocated - c0.colocated) / n,
            "handoffs": (c1.handoffs - c0.handoffs) / n,
            "wakes": (c1.wakes - c0.wakes) / n,
            "paced": (c1.paced_wakes - c0.paced_wakes) / n,
            "rewakes": (c1.rewakes - c0.rewakes) / n,
        }

    def group(self, configs: list[Config], seconds: float) -> dict[Config, dict[str, float]]:
        out = {}
        try:
            for config in configs:
                _, threads, rules, wakes, loaded = config
                self.lib.og_set_placement(rules)
                self.lib.og_set_wake_rules(wakes)
                if loaded and self.loop is None:
                    self.loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    time.sleep(load.START)
                elif not loaded and self.loop is not None:
                    self.stop_loop()
                out[config] = self.block(threads, seconds)
        finally:
            self.stop_loop()
            self.lib.og_set_placement(-1)
            self.lib.og_set_wake_rules(-1)
        return out

    def stop_loop(self) -> None:
        if self.loop is not None:
            self.loop.kill()
            self.loop.wait()
            self.loop = None
            time.sleep(0.1)


def timed_calls(call: Callable[[], None], seconds: float) -> list[int]:
    """The wall times (ns) of ``call`` run back to back for ``seconds``."""
    times: list[int] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - started)
    return times


def add_case_arguments(
    parser: argparse.ArgumentParser, case: str, *, seconds: float, gate: float
) -> None:
    """The options of a gated measurement of one case (this tool, ``bench/block_clock.py``)."""
    parser.add_argument("--case", default=case, help="w2, w5, w1_N (W1 at N x N), w3_B (batch B)")
    parser.add_argument("--groups", type=int, default=6)
    parser.add_argument("--budget", type=float, default=600, help="seconds to wait at most")
    parser.add_argument("--seconds", type=float, default=seconds, help="per block")
    parser.add_argument("--gate", type=float, default=gate, help="others' share of 2 cores")


def load_case(case: str) -> models.Case:
    """The model of ``--case``: ``w2``, ``w5`` (the BERT-base layer), ``w1_N`` or ``w3_B``."""
    name, _, size = case.partition("_")
    fixed = {"w2": models.w2, "w5": bert.w5}
    return fixed[name]() if name in fixed else getattr(models, name)(int(size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_case_arguments(parser, "w2", seconds=0.15, gate=0.05)
    args = parser.parse_args()
    case = load_case(args.case)
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR") or tempfile.mkdtemp(prefix="opgraph-pool-"))
    bench = Bench(case, cache)
    configs: list[Config] = [
        (name, threads, *CONFIGS[name], loaded)
        for loaded in (False, True)
        for name, threads in (("both", 2), ("both", 1), ("apart", 2), ("none", 2), ("old wakes", 2))
    ]
    results: dict[Config, list[dict[str, float]]] = {c: [] for c in configs}
    started, tried, kept = time.time(), 0, 0
    while kept < args.groups and quiet_spell(args.budget - (time.time() - started), args.gate):
        tried += 1
        group = bench.group(configs, args.seconds)
        if max(r["others"] for r in group.values()) > args.gate:
            continue
        kept += 1
        for config, r in group.items():
            results[config].append(r)
        print(f"group {kept} ({time.strftime('%H:%M:%S')}): " + ", ".join(
            f"{c[0]}/{c[1]}t/{'busy' if c[4] else 'quiet'} {r['median_us']:.0f}"
            for c, r in group.items()
        ), flush=True)  # fmt: skip
    print(f"\n{case.name}: {kept} groups kept of {tried}, load average {os.getloadavg()}\n")
    print("| rules | threads | beside | median µs | CPU µs/call | worker blocks | "
          "wait µs | co-located | hand-overs | wake-ups (paced, re-wakes) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for config, rs in results.items():
        if not rs:
            continue
        m = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"| {config[0]} | {config[1]} | {'busy loop' if config[4] else 'nothing'} | "
              f"{m['median_us']:.0f} | {m['cpu_us']:.0f} | {m['worker_blocks']:.1f} | "
              f"{m['wait_us']:.0f} | {m['colocated']:.2f} | {m['handoffs']:.2f} | "
              f"{m['wakes']:.2f} ({m['paced']:.2f}, {m['rewakes']:.2f}) |")  # fmt: skip


if __name__ == "__main__":
    main()
