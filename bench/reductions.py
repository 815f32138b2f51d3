"""Time large reductions on the CPU backend: best of several runs, and the error of each.

    python bench/reductions.py [--runs 20] [--threads 2] [--isa native]

Cases: the sum of 2^24 f32 values, row sums of a 4096x4096 f32 matrix, a softmax over the
rows of that matrix, and the bf16 sum of 2^24 values. Each prints the best time over
``--runs`` calls (``exe.call`` on tensors made once) and the largest relative error against
a float64 sum. Run it on two checkouts (``PYTHONPATH=<checkout>``) to compare them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ml_dtypes
import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config

Case = tuple[str, og.Function, np.ndarray, Callable[[np.ndarray], np.ndarray]]


def cases() -> list[Case]:
    rng = np.random.default_rng(0)
    flat = rng.random(1 << 24, dtype=np.float32)
    matrix = rng.random((4096, 4096), dtype=np.float32)
    x = og.parameter(og.f32, flat.shape)
    m = og.parameter(og.f32, matrix.shape)
    b = og.parameter(og.bf16, flat.shape)

    def softmax(a: np.ndarray) -> np.ndarray:
        e = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return [
        ("sum 2^24 f32", og.Function([ops.reduce_sum(x, (0,))], [x]), flat, lambda a: a.sum()),
        (
            "row sums 4096x4096 f32",
            og.Function([ops.reduce_sum(m, (1,))], [m]),
            matrix,
            lambda a: a.sum(axis=1),
        ),
        ("softmax 4096x4096 f32", og.Function([ops.softmax(m, 1)], [m]), matrix, softmax),
        (
            "sum 2^24 bf16",
            og.Function([ops.reduce_sum(b, (0,))], [b]),
            flat.astype(ml_dtypes.bfloat16),
            lambda a: a.astype(np.float64).sum(),
        ),
    ]


def config(cache: Path, threads: int, isa: str) -> CpuConfig:
    base = CpuConfig(cache, default_config().compiler, num_threads=threads)
    if isa == "native":  # a checkout from before CpuConfig.isa works too
        return base
    return dataclasses.replace(base, isa=isa)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--isa", default="native")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opgraph-reductions-") as tmp:
        backend = CpuBackend(config(Path(tmp), args.threads, args.isa))
        for name, fn, data, reference in cases():
            exe = backend.compile(fn)
            arg = backend.create_tensor(fn.parameters[0].element_type, data.shape, data)
            out = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
            best = float("inf")
            for _ in range(args.runs):
                started = time.perf_counter()
                exe.call(out, [arg])
                best = min(best, time.perf_counter() - started)
            got = out[0].read().astype(np.float64)
            want = np.asarray(reference(data), np.float64)
            error = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))
            print(f"{name:28s} best {best * 1e3:8.3f} ms   max rel error {error:.1e}")
    print(f"load average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
