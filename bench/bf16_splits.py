"""How each step of a bf16 model splits between two threads, step by step.

    python bench/bf16_splits.py [--model imagenet|cifar|bert] [--rounds 6] [--calls 10]
                                [--precision bf16|f32] [--min-ms 0.05]

Three profiled builds of ResNet-18 (``bench/resnet.py``) or of the BERT-base layer (``--model
bert``: W5, ``bench/bert.py``; ``compile(profile=True)``: each step's wall time), calls
interleaved round by round in one process:

* **1T**: a ``num_threads=1`` build (its own blocks: one thread's split);
* **2T alone**: the ``num_threads=2`` build with every block run by the caller (a stand-in
  host team of the caller alone, ``og_set_team``): the two-thread split's work on one thread,
  so ``2T alone / 1T`` is what the split itself costs (padding, smaller products, serial
  phases run once more). A call in which a pool worker ran blocks is left out (the runtime
  leaves a host team for 64 jobs after one held the caller, which under load happens);
* **2T**: the two-thread build on two threads.

Per step: the minimum over all calls of each, the speed-up ``1T / 2T`` (2.0 would be a
perfect split), and the step's pool jobs on two threads as ``units/grain`` per
``og_parallel`` call of its run function (a job's blocks are its units, at most 64 per
thread). Steps under ``--min-ms`` on one thread are summed into one line. The minimum per
step is the step's best moment on a shared machine; the load average is printed.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import bert, resnet
from bench.models import Case
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters
from opgraph.backends.cpu.config import CpuConfig

MODELS: dict[str, Callable[[], Case]] = {
    "imagenet": resnet.resnet18_imagenet,
    "cifar": resnet.resnet18_cifar,
    "bert": bert.w5,
}

_BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
def _alone(fn: int, data: int, threads: int, flags: int) -> None:
    """A host "team" of the calling thread alone: it claims every block of the job."""
    _BODY(fn)(data)


def jobs(source: str) -> dict[int, str]:
    """Per step index, its ``og_parallel`` calls on two threads as ``units/grain`` (``s``
    for a range function called serially)."""
    runs = dict(re.findall(r"static int (\w+)_run\(void\* const\* T, char\* A\) \{\n(.*?)\n\}",
                           source, re.S))  # fmt: skip
    # each step's calls between its profile's two clock readings (in og_step_<i> of a module
    # split into translation units, inline in og_run of one unit)
    steps = re.findall(r"&t0_\);\n(.*?)\n\s*clock_gettime\(CLOCK_MONOTONIC, &t1_\);\n"
                       r"\s*prof\[(\d+)\]", source, re.S)  # fmt: skip
    out = {}
    for body, index in steps:
        parts = []
        for name in re.findall(r"(\w+)_run\(T, A\)", body):
            run = runs.get(name, "")
            for total, grain in re.findall(r"og_parallel\(\w+, T, A, (\d+)L, (\d+)L", run):
                parts.append(total if grain == "1" else f"{total}/{grain}")
            parts += ["s"] * len(re.findall(r"  (?:err \|= |int e_ = |return )\w+\(T, A, 0,", run))
        out[int(index)] = " ".join(parts) or "-"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="imagenet", choices=list(MODELS))
    parser.add_argument("--precision", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--min-ms", type=float, default=0.05)
    args = parser.parse_args()
    case: Case = MODELS[args.model]()
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR") or tempfile.mkdtemp(prefix="og-splits-"))
    exes = {}
    for threads in (1, 2):
        backend = CpuBackend(CpuConfig(cache, default_config().compiler, num_threads=threads))
        exes[threads] = backend.compile(case.function, profile=True, precision=args.precision)
    lib = CpuBackend(CpuConfig(cache, default_config().compiler)).toolchain.runtime()
    lib.og_set_team.argtypes = [ctypes.c_void_p]
    alone = ctypes.cast(_alone, ctypes.c_void_p).value
    arrays = [a.copy() for a in case.inputs]
    labels = [s.label for s in exes[2].program.steps]
    assert labels == [s.label for s in exes[1].program.steps], "the builds' steps differ"
    split = jobs(exes[2].source())
    best: dict[str, dict[int, float]] = collections.defaultdict(dict)
    totals: dict[str, list[float]] = collections.defaultdict(list)
    skipped = [0]

    def run(config: str) -> None:
        exe = exes[1 if config == "1T" else 2]
        for _ in range(args.calls):
            exe._counters.clear()
            before = runtime_counters(lib).worker_blocks
            exe(*arrays)
            if config == "2T alone" and runtime_counters(lib).worker_blocks != before:
                skipped[0] += 1  # the runtime left the stand-in team (a late "team thread")
                continue
            counters = exe.performance_counters()
            totals[config].append(sum(c.total_seconds for c in counters))
            for k, c in enumerate(counters):
                old = best[config].get(k, float("inf"))
                best[config][k] = min(old, c.total_seconds)

    for _ in range(args.rounds):
        run("1T")
        lib.og_set_team(alone)
        try:
            run("2T alone")
        finally:
            lib.og_set_team(None)
        run("2T")
    print(f"{args.model} {args.precision}: per step, minimum ms over "
          f"{args.rounds * args.calls} calls; load {os.getloadavg()}")  # fmt: skip
    print("| step | 1T | 2T alone | 2T | 1T / 2T | alone / 1T | jobs (units) |")
    print("|---|---|---|---|---|---|---|")
    small = {c: 0.0 for c in best}
    for k, label in enumerate(labels):
        one, same, two = (best[c][k] * 1e3 for c in ("1T", "2T alone", "2T"))
        if one < args.min_ms:
            for c in small:
                small[c] += best[c][k] * 1e3
            continue
        print(f"| {k}: {label[:60]} | {one:.3f} | {same:.3f} | {two:.3f} | {one / two:.2f} | "
              f"{same / one:.2f} | {split.get(k, '?')} |")  # fmt: skip
    one, same, two = small["1T"], small["2T alone"], small["2T"]
    if one:
        print(f"| steps under {args.min_ms} ms | {one:.3f} | {same:.3f} | {two:.3f} | "
              f"{one / two:.2f} | {same / one:.2f} | |")  # fmt: skip
    sums = {c: sum(v.values()) * 1e3 for c, v in best.items()}
    print(f"| sum of minimums | {sums['1T']:.3f} | {sums['2T alone']:.3f} | {sums['2T']:.3f} | "
          f"{sums['1T'] / sums['2T']:.2f} | {sums['2T alone'] / sums['1T']:.2f} | |")  # fmt: skip
    calls = {c: min(v) * 1e3 for c, v in totals.items()}
    print(f"| best call (sum of its steps) | {calls['1T']:.3f} | {calls['2T alone']:.3f} | "
          f"{calls['2T']:.3f} | {calls['1T'] / calls['2T']:.2f} | | |")  # fmt: skip
    print(f"load at the end {os.getloadavg()}; 2T alone calls left out (a worker ran "
          f"blocks): {skipped[0]}")  # fmt: skip


if __name__ == "__main__":
    main()
