"""Per-step thread CPU of the BERT layer's one-call training step, compiled for one thread
and for two.

    python bench/bert_train_steps.py [--steps 6] [--top 25]

The step (``compile_train_step``, SGD with momentum, batch 8 x 128) is compiled with
``profile=True`` and the per-step clock switched to the thread's CPU clock, once for one
thread and once for two; the two-thread program's blocks all run on the calling thread (a
host "team" of the caller alone, as in ``bench/block_clock.py``), so each step's figure is
the CPU work of its blocks, without waits or preemption (a shared machine's wall clock
measures its load). Printed: each program's sum of steps, then per step label (the best of
``--steps`` calls, summed over the steps of one label: the many ``copy`` steps are one row)
its time in each program and the two-thread program's excess: work the thread split adds
(operands packed again per block, repacked panels).
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import copy  # noqa: E402
import ctypes  # noqa: E402
import dataclasses  # noqa: E402
from collections import defaultdict  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

import opgraph as og  # noqa: E402
import opgraph.frontends.torch as og_torch  # noqa: E402
from bench.torch_bench import BertLayer  # noqa: E402
from opgraph.backends.cpu import CpuBackend, default_config  # noqa: E402
from opgraph.backends.cpu.codegen import module as cpu_module  # noqa: E402

_BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_monotonic_timer = cpu_module._timed


def _thread_timer(call: str, i: int) -> str:
    return _monotonic_timer(call, i).replace("CLOCK_MONOTONIC", "CLOCK_THREAD_CPUTIME_ID")


@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
def _alone(fn: int, data: int, threads: int, flags: int) -> None:
    """A host "team" of the calling thread alone: it runs every block of the job."""
    _BODY(fn)(data)


class _Profiled:
    """A backend whose ``compile`` profiles (``compile_train_step`` takes a backend)."""

    def __init__(self, backend: CpuBackend) -> None:
        self.backend = backend

    def compile(self, function: Any) -> Any:
        return self.backend.compile(function, profile=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def _by_label(found: dict[str, list[float]]) -> dict[str, float]:
    """Each step's best time, summed over the steps of one label (the copy steps share one)."""
    summed: dict[str, float] = defaultdict(float)
    for key, times in found.items():
        summed[key.split(":", 1)[1].split(";")[0].strip()] += min(times)
    return summed


def _mean_square(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (output - target).square().mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cpu_module._timed = _thread_timer  # type: ignore[assignment]
    torch.manual_seed(0)
    x, target = torch.randn(8, 128, 768), torch.randn(8, 128, 768)
    torch.manual_seed(1)
    base = BertLayer().train()
    steps, exes = {}, {}
    for threads in (1, 2):
        model = copy.deepcopy(base)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        step = og_torch.compile_train_step(model, _mean_square, optimizer)
        config = dataclasses.replace(default_config(), num_threads=threads)
        step.backend = _Profiled(CpuBackend(config))  # type: ignore[assignment]
        step(x, target)
        steps[threads] = step
        exes[threads] = next(iter(step._programs.values())).executable
    lib = og.backend("CPU").toolchain.runtime()  # type: ignore[attr-defined]
    lib.og_set_team.argtypes = [ctypes.c_void_p]
    per: dict[int, dict[str, list[float]]] = {1: defaultdict(list), 2: defaultdict(list)}
    previous: dict[int, dict[str, float]] = {1: {}, 2: {}}
    lib.og_set_team(ctypes.cast(_alone, ctypes.c_void_p).value)
    try:
        for i in range(args.steps + 1):
            for threads in (1, 2):
                steps[threads](x, target)
                now = {c.node: c.total_seconds for c in exes[threads].performance_counters()}
                if i > 0:  # the first call's counters include the compile's warm-up call
                    for key, total in now.items():
                        per[threads][key].append(total - previous[threads].get(key, 0.0))
                previous[threads] = now
    finally:
        lib.og_set_team(None)
    best = {threads: _by_label(found) for threads, found in per.items()}
    print(
        f"sum of steps: one-thread program {sum(best[1].values()) * 1e3:.1f} ms, two-thread "
        f"program {sum(best[2].values()) * 1e3:.1f} ms (load {os.getloadavg()[0]:.2f})"
    )
    print("| 1 thread ms | 2-thread program ms | excess | step |\n|---|---|---|---|")
    rows = [
        (best[2].get(k, 0.0) - best[1].get(k, 0.0), best[1].get(k, 0.0), best[2].get(k, 0.0), k)
        for k in set(best[1]) | set(best[2])
    ]
    for excess, one, two, key in sorted(rows, key=lambda r: -r[1] - r[2])[: args.top]:
        print(f"| {one * 1e3:.2f} | {two * 1e3:.2f} | {excess * 1e3:+.2f} | {key[:100]} |")


if __name__ == "__main__":
    main()
