"""Variants of the code generators' module constants, compiled in one process and timed
interleaved (thread CPU time per call: the figure that load does not distort).

    python bench/variants.py [--workload w5] [--precision bf16] [--threads 1] [--rounds 30]
        NAME=MODULE.CONSTANT:VALUE[,MODULE.CONSTANT:VALUE...] ...

Each argument is one variant: the constants it names are set (``ast.literal_eval`` of the
value) while its module compiles, then restored; an empty list (``base=``) is the build as
it is. Every variant's output is compared with the first's (max |difference|), then each
runs three calls per round in turn. Example (H64's row chunks)::

    python bench/variants.py chunk96=opgraph.backends.cpu.codegen.bf16.CHUNK:96 now=
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import ast
import importlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.workloads import build
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config


def _settings(spec: str) -> tuple[str, list[tuple[Any, str, object]]]:
    name, _, assignments = spec.partition("=")
    settings = []
    for assignment in filter(None, assignments.split(",")):
        target, _, value = assignment.partition(":")
        module, _, constant = target.rpartition(".")
        settings.append((importlib.import_module(module), constant, ast.literal_eval(value)))
    return name, settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="w5")
    parser.add_argument("--precision", choices=("f32", "bf16"), default="bf16")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("variants", nargs="+")
    args = parser.parse_args()
    case = build(args.workload)[0]
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR", tempfile.mkdtemp()))
    config = CpuConfig(cache, default_config().compiler, num_threads=args.threads)
    calls: dict[str, Callable[[], object]] = {}
    first: np.ndarray | None = None
    for spec in args.variants:
        name, settings = _settings(spec)
        saved = [(m, c, getattr(m, c)) for m, c, _ in settings]
        for module, constant, value in settings:
            setattr(module, constant, value)
        try:
            exe = CpuBackend(config).compile(case.function, precision=args.precision)
        finally:
            for module, constant, value in reversed(saved):
                setattr(module, constant, value)
        out = np.asarray(exe(*case.inputs)[0])
        first = out if first is None else first
        print(f"{name}: max |difference| from the first {float(np.abs(out - first).max()):.3g}")
        calls[name] = lambda exe=exe: exe(*case.inputs)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            for _ in range(3):
                started = time.thread_time()
                call()
                samples[name].append(time.thread_time() - started)
    base = statistics.median(next(iter(samples.values())))
    for name, times in samples.items():
        median = statistics.median(times)
        ratio = median / base
        print(f"{name}: {median * 1e3:.3f} ms thread CPU per call, {ratio:.3f} of the first")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
