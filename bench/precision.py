"""bf16 mode against OpenVINO's bf16 mode, on ResNet-18 and the BERT-base layer.

    python bench/precision.py [--quick] [--workload w4|w5|all] [--repeat 3]

Runs opgraph CPU in f32 and with ``precision="bf16"``, and OpenVINO with
``INFERENCE_PRECISION_HINT`` f32 and bf16 (OpenVINO's default on CPUs with AVX512-BF16 or
AMX), interleaved in one process with the same threads (``BENCH_THREADS``, default 2).
Reports medians, the ratio opgraph bf16 / OpenVINO bf16, and each bf16 result's error
against opgraph's f32 result: max |bf16 - f32| / max |f32| (relative to the output scale).
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import opgraph as og  # noqa: E402
from bench import runners  # noqa: E402
from bench.models import Case  # noqa: E402
from bench.run import fmt, measure  # noqa: E402
from bench.runners import Prepared  # noqa: E402
from bench.workloads import build  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402
from opgraph.backends.cpu.config import CpuConfigError, check_precision  # noqa: E402


def opgraph_cpu(case: Case, cache: Path, precision: str) -> Prepared:
    config = CpuConfig(cache, default_config().compiler, num_threads=THREADS)
    backend = CpuBackend(config)
    started = time.perf_counter()
    exe = backend.compile(case.function, precision=precision)
    seconds = time.perf_counter() - started
    inputs = [
        backend.create_tensor(og.element.from_dtype(a.dtype), a.shape, a.copy())
        for a in case.inputs
    ]
    outputs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]

    def run() -> None:
        exe.call(outputs, inputs)

    def read() -> list[np.ndarray]:
        run()
        return [o.read() for o in outputs]

    return Prepared(run, read, seconds, {})


def relative_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """max |got - want| / max |want| over all outputs."""
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        scale = float(np.max(np.abs(w))) or 1.0
        worst = max(worst, float(np.max(np.abs(g - w))) / scale)
    return worst


def run_case(case: Case, rounds: int, block: float, repeat: int) -> str:
    with tempfile.TemporaryDirectory(prefix="opgraph-bench-cache-") as tmp:
        prepared = {
            "opgraph f32": opgraph_cpu(case, Path(tmp), "f32"),
            "opgraph bf16": opgraph_cpu(case, Path(tmp), "bf16"),
            "OpenVINO f32": runners.openvino(case, THREADS, "f32"),
            "OpenVINO bf16": runners.openvino(case, THREADS, "bf16"),
        }
        reference = prepared["opgraph f32"].outputs()
        errors = {n: relative_error(p.outputs(), reference) for n, p in prepared.items()}
        sessions = [measure(prepared, rounds, block) for _ in range(repeat)]
    medians = {n: statistics.median(s[n] for s in sessions) for n in sessions[0]}
    ratio = medians["opgraph bf16"] / medians["OpenVINO bf16"]
    cells = [fmt(medians[n]) for n in prepared]
    return (
        f"| {case.name} | " + " | ".join(cells) + f" | **{ratio:.2f}** | "
        f"{errors['opgraph bf16']:.1e} | {errors['OpenVINO bf16']:.1e} | "
        f"{errors['OpenVINO f32']:.1e} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="all", choices=["all", "w4", "w5"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    try:  # on a CPU without bf16 there is nothing to measure: say so, without a traceback
        check_precision("bf16", default_config().isa)
    except CpuConfigError as error:
        parser.exit(2, f"bench/precision.py: bf16 not measured here: {error}\n")
    rounds, block = (3, 0.05) if args.quick else (8, 0.1)
    names = ["w4", "w5"] if args.workload == "all" else [args.workload]
    lines = [
        "| case | opgraph f32 | opgraph bf16 | OpenVINO f32 | OpenVINO bf16 | "
        "bf16 ratio (opgraph / OpenVINO) | opgraph bf16 error | OpenVINO bf16 error | "
        "OpenVINO f32 error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        for case in build(name):
            lines.append(run_case(case, rounds, block, args.repeat))
            print(lines[-1], flush=True)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\nthreads: {THREADS}; load average at the end: {load}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
