"""Per-core comparison on one thread: thread CPU time per call, interleaved.

    python bench/per_core.py [--workload w5 | --zoo gpt2_2l,efficientnet_b0]
                             [--precision f32|bf16] [--rounds 25] [--isa native [--isa avx2 ...]]

opgraph (``exe(x)``), onnxruntime and OpenVINO (``INFERENCE_PRECISION_HINT`` = the precision)
each on one thread, called three times per round in turn; prints each one's median thread CPU
time per call (``time.thread_time``: time descheduled is not counted, so the figures hold on
a loaded machine where wall-clock ones do not) and the ratios, with the load average. To
compare two builds, run it from each checkout alternately (``PYTHONPATH=<checkout>``).
``--isa`` (repeatable) runs opgraph's code for each instruction set named (``CpuConfig.isa``)
in the same rounds; the peers keep the kernels they choose at run time. ``--zoo`` takes
``bench/zoo.py``'s models (``bench/models.py``, realistic sizes) instead of a workload.
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

from bench import runners  # noqa: E402
from bench.models import ZOO, zoo_case  # noqa: E402
from bench.workloads import build  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402


def _caller(exe: Callable[..., object], inputs: list[object]) -> Callable[[], object]:
    return lambda: exe(*inputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="w5")
    parser.add_argument("--precision", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--isa", action="append", choices=("native", "avx2", "avx512"))
    parser.add_argument("--zoo", default="", help="comma-separated zoo models (bench/zoo.py)")
    args = parser.parse_args()
    isas = args.isa or ["native"]
    zoo = [n for n in args.zoo.split(",") if n]
    if sorted(set(zoo) - set(ZOO)):
        parser.error(f"unknown models {sorted(set(zoo) - set(ZOO))}; the zoo has {sorted(ZOO)}")
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR", tempfile.mkdtemp()))
    for case in [zoo_case(n) for n in zoo] if zoo else build(args.workload):
        inputs = [a.copy() for a in case.inputs]
        runs: dict[str, Callable[[], object]] = {}
        for isa in isas:
            config = CpuConfig(cache, default_config().compiler, num_threads=1, isa=isa)
            exe = CpuBackend(config).compile(case.function, precision=args.precision)
            runs["opgraph" if isa == "native" else f"opgraph-{isa}"] = _caller(exe, inputs)
        runs["onnxruntime"] = runners.onnxruntime(case, 1).run
        runs["openvino"] = runners.openvino(case, 1, args.precision).run
        med = runners.thread_cpu_medians(runs, args.rounds)
        cells = ", ".join(f"{name} {m * 1e3:.3f} ms" for name, m in med.items())
        ratios = ", ".join(
            f"{name} / {peer} {med[name] / med[peer]:.3f}"
            for name in med
            if name.startswith("opgraph")
            for peer in ("onnxruntime", "openvino")
        )
        print(
            f"{case.name} ({args.precision}, one thread, thread CPU per call): {cells}; "
            f"{ratios}; load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
