"""The BERT-base layer (W5) per step on opgraph, onnxruntime and OpenVINO, one process.

    python bench/bert_steps.py [--threads 1] [--calls 60] [--precision f32|bf16]
                               [--isa native [--isa avx2 ...]]

opgraph: ``compile(..., profile=True)``, the generated code's per-step times (wall clock);
onnxruntime: ``enable_profiling`` (its per-node ``dur``); OpenVINO: ``PERF_COUNT`` (per-node
``real_time``). Each runtime's nodes are put in the layer's classes (QKV, attention, output
projection, FFN 1 with GELU, FFN 2, layer norms with their residual adds, other) and the
fastest call of each class is printed (the minimum: on a shared machine the median of a
step's wall-clock time measures the load), with each runtime's thread CPU time per call
(``time.thread_time`` around the calls: with one thread, the work of the call itself).
opgraph runs once per ``--isa`` named (its code generated for that instruction set,
``CpuConfig.isa``; native when none is named).
"""

from __future__ import annotations

import os
import sys

THREADS = 1
if "--threads" in sys.argv:
    THREADS = int(sys.argv[sys.argv.index("--threads") + 1])
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import onnxruntime as ort  # noqa: E402

from bench import bert  # noqa: E402
from bench.runners import compile_openvino  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402
from opgraph.runtime.backend import PerformanceCounter  # noqa: E402

CLASSES = ("QKV", "attention", "out proj", "FFN 1 + GELU", "FFN 2", "norms + adds", "other")


PRODUCTS = ("QKV", "QKV", "QKV", "out proj", "FFN 1 + GELU", "FFN 2")


def _classify(per: dict[str, list[float]], calls: int) -> dict[str, float]:
    """A peer's nodes in execution order: its six weight products (Gemm, FullyConnected) in
    the layer's order; before the output projection everything else is attention, after it
    GELU belongs to FFN 1 and the rest to the norms and residual adds."""
    out: dict[str, float] = defaultdict(float)
    products = 0
    for key, times in per.items():  # dicts keep the first-seen (execution) order
        kind = key.rsplit(" ", 1)[1]
        seconds = min(times[-calls:])
        if kind.startswith(("Gemm", "FullyConnected")):
            cls = PRODUCTS[min(products, len(PRODUCTS) - 1)]
            products += 1
        elif kind.startswith("Reshape"):
            cls = "other"
        elif products < 4:
            cls = "attention"
        elif kind.startswith("Gelu"):
            cls = "FFN 1 + GELU"
        else:
            cls = "norms + adds"
        out[cls] += seconds
    return dict(out)


def _opgraph_classes(counters: list[PerformanceCounter]) -> dict[str, float]:
    """opgraph's steps (labelled ``index: node …``) in the classes; a step whose first node is
    a MatMul is a weight product, counted in order (one of ``3 x HIDDEN`` columns is Q, K and
    V packed: three), an Attention step is attention, a copy (FFN 2's padded rows) is
    "other", and the rest are the norms with their adds."""
    out: dict[str, float] = defaultdict(float)
    products = 0
    for c in sorted(counters, key=lambda c: int(c.node.split(":", 1)[0])):
        head = c.node.split(";", 1)[0]
        if "Attention" in head:
            cls = "attention"
        elif "MatMul" in head:
            cls = PRODUCTS[min(products, len(PRODUCTS) - 1)]
            products += 3 if head.endswith(f",{3 * bert.HIDDEN}]") else 1
        elif head.endswith(": copy"):
            cls = "other"
        else:
            cls = "norms + adds"
        out[cls] += c.total_seconds
    return out


def opgraph_steps(calls: int, precision: str, isa: str) -> tuple[dict[str, float], float]:
    case = bert.w5()
    config = CpuConfig(
        Path(os.environ.get("OPGRAPH_CACHE_DIR", tempfile.mkdtemp())),
        default_config().compiler,
        num_threads=THREADS,
        isa=isa,
    )
    exe = CpuBackend(config).compile(case.function, profile=True, precision=precision)
    x = case.inputs[0]
    per_call: dict[str, list[float]] = defaultdict(list)
    previous: dict[str, float] = {}
    cpu = []
    for i in range(calls + 5):
        started = time.thread_time()
        exe(x)
        cpu.append(time.thread_time() - started)
        totals = _opgraph_classes(exe.performance_counters())
        if i >= 5:
            for k, v in totals.items():
                per_call[k].append(v - previous.get(k, 0.0))
        previous = dict(totals)
    return {k: min(v) for k, v in per_call.items()}, statistics.median(cpu[5:])


def run_timed(run: Callable[[], object], calls: int) -> float:
    cpu = []
    for _ in range(calls):
        started = time.thread_time()
        run()
        cpu.append(time.thread_time() - started)
    return statistics.median(cpu)


def onnxruntime_steps(calls: int) -> tuple[dict[str, float], float]:
    case = bert.w5()
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    session = ort.InferenceSession(case.onnx.SerializeToString(), options)
    feeds = {session.get_inputs()[0].name: case.inputs[0]}
    for _ in range(5):
        session.run(None, feeds)
    cpu = run_timed(lambda: session.run(None, feeds), calls)
    events = json.loads(Path(session.end_profiling()).read_text())
    per: dict[str, list[float]] = defaultdict(list)
    for ev in events:
        if ev.get("cat") == "Node" and ev["name"].endswith("_kernel_time"):
            per[ev["name"][: -len("_kernel_time")] + " " + ev["args"]["op_name"]].append(
                ev["dur"] * 1e-6
            )
    return _classify(per, calls), cpu


def openvino_steps(calls: int, precision: str) -> tuple[dict[str, float], float]:
    case = bert.w5()
    compiled, _ = compile_openvino(case.onnx, THREADS, precision, perf_count=True)
    request = compiled.create_infer_request()
    feeds = {0: case.inputs[0]}
    per: dict[str, list[float]] = defaultdict(list)
    cpu = []
    for i in range(calls + 5):
        started = time.thread_time()
        request.infer(feeds)
        cpu.append(time.thread_time() - started)
        if i >= 5:
            for info in request.profiling_info:
                if info.status == info.Status.EXECUTED:
                    key = f"{info.node_name} {info.node_type}/{info.exec_type}"
                    per[key].append(info.real_time.total_seconds())
    return _classify(per, calls), statistics.median(cpu[5:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--precision", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--raw", action="store_true", help="print each peer node's class")
    parser.add_argument("--isa", action="append", choices=("native", "avx2", "avx512"))
    args = parser.parse_args()
    results = {
        ("opgraph" if isa == "native" else f"opgraph-{isa}"): opgraph_steps(
            args.calls, args.precision, isa
        )
        for isa in args.isa or ["native"]
    }
    results |= {
        "onnxruntime": onnxruntime_steps(args.calls),
        "openvino": openvino_steps(args.calls, args.precision),
    }
    print(f"threads {THREADS}, precision {args.precision}, load {os.getloadavg()[0]:.2f}")
    print("| step | " + " | ".join(results) + " |")
    print("|---" * (len(results) + 1) + "|")
    for cls in CLASSES:
        cells = [f"{r[0].get(cls, 0.0) * 1e3:.3f}" for r in results.values()]
        print(f"| {cls} | " + " | ".join(cells) + " |")
    print(
        "| sum of steps | "
        + " | ".join(f"{sum(r[0].values()) * 1e3:.3f}" for r in results.values())
        + " |"
    )
    print(
        "| thread CPU per call | "
        + " | ".join(f"{r[1] * 1e3:.3f}" for r in results.values())
        + " |"
    )


if __name__ == "__main__":
    main()
