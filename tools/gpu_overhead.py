"""Where the time of a GPU call goes: per step (``profile=True``, each step synchronized)
and per Python function (cProfile), for ``(a+b)*c`` on 32x32 device tensors and for the
GPU bench's workloads (``python tools/gpu_overhead.py [w3 w5 w4]``; needs a CUDA device,
and torch for the bench workloads)."""

from __future__ import annotations

import cProfile
import importlib
import pstats
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph as og
from opgraph.runtime.backend import Executable
from opgraph.runtime.tensor import Tensor


def report(name: str, fn: og.Function, arrays: Sequence[np.ndarray], calls: int) -> None:
    backend = og.backend("GPU")
    inputs: list[Tensor] = []
    for t, value in zip(fn.parameter_types, arrays, strict=True):
        tensor = backend.create_tensor(t.element_type, t.shape)
        tensor.write(value)
        inputs.append(tensor)
    exe = backend.compile(fn)
    out = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
    for _ in range(20):
        exe.call(out, inputs)
    started = time.perf_counter()
    for _ in range(calls):
        exe.call(out, inputs)
    per_call = (time.perf_counter() - started) / calls
    print(f"\n===== {name}: {per_call * 1e6:.1f} us per call, unprofiled")
    profiled: Executable = backend.compile(fn, profile=True)
    for _ in range(calls):
        profiled.call(out, inputs)
    counters = sorted(profiled.performance_counters(), key=lambda c: -c.total_seconds)
    total = sum(c.average_seconds for c in counters)
    print(f"steps, each synchronized: {total * 1e6:.1f} us in {len(counters)} step(s); top:")
    for c in counters[:8]:
        print(f"  {c.average_seconds * 1e6:8.1f} us  {c.node[:110]}")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        exe.call(out, inputs)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(14)


def bench_function(workload: str) -> tuple[og.Function, list[np.ndarray]]:
    # deferred: torch is needed only for the bench workloads
    import torch

    # first: on a torch older than the pinned one it supplies what the bridge imports
    gpu_bench: Any = importlib.import_module("bench.gpu_bench")  # not a typed package
    from opgraph.frontends.torch import import_exported

    case = gpu_bench.cases(workload)[0]
    with torch.no_grad():
        exported = torch.export.export(case.model.eval(), case.inputs).run_decompositions()
    return import_exported(exported, name=workload), [x.numpy() for x in case.inputs]


def main(workloads: Sequence[str]) -> None:
    a, b, c = (og.parameter(og.f32, (32, 32), n) for n in "abc")
    ones = [np.ones((32, 32), np.float32)] * 3
    report("W1 32x32", og.Function([(a + b) * c], [a, b, c], name="w1"), ones, 2000)
    for workload in workloads:
        fn, arrays = bench_function(workload)
        report(workload.upper(), fn, arrays, 200)


if __name__ == "__main__":
    main(sys.argv[1:])
