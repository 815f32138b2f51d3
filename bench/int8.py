"""int8: ONNX QDQ models on opgraph's 8-bit kernels against onnxruntime's, on ResNet-18 and
the BERT-base layer.

    python bench/int8.py [--quick] [--workload w4|w5|all] [--repeat 2] [--isa native|avx2]
    python bench/int8.py --per-core [--rounds 15] [--workload w4|w5|all] [--isa ...]

Each f32 case (bench/resnet.py, bench/bert.py) is quantized with onnxruntime's own tool
(``quantize_static``, QDQ format, u8 activations, s8 weights, per-channel weights, MinMax
calibration on 8 random inputs drawn like the case's input). opgraph imports the QDQ model
and compiles it for the CPU (``fuse_quantized_products`` turns its products into integer
products on VNNI kernels); onnxruntime runs the same QDQ model (its own int8 kernels). Both
with the same threads (``BENCH_THREADS``, default 2), interleaved in one process. Reports the
medians, the ratio opgraph / onnxruntime, and each int8 result's error against the f32
model (onnxruntime f32): max |int8 - f32| / max |f32|, and the share of rows whose arg-max
(class / token prediction) differs from f32's.

``--per-core``: both on one thread (``BENCH_THREADS`` ignored), called three times per round
in turn, each call timed by the thread's CPU time (``time.thread_time``, as
``bench/per_core.py``): time descheduled is not counted, so the medians hold on a loaded
machine where wall-clock ones do not.
"""

from __future__ import annotations

import os
import sys

PER_CORE = "--per-core" in sys.argv
THREADS = 1 if PER_CORE else int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    if PER_CORE:
        os.environ[_var] = "1"
    os.environ.setdefault(_var, str(THREADS))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnxruntime.quantization import (  # noqa: E402
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_static,
)

import opgraph as og  # noqa: E402
from bench import runners  # noqa: E402
from bench.models import Case  # noqa: E402
from bench.run import fmt, measure  # noqa: E402
from bench.runners import Prepared  # noqa: E402
from bench.workloads import build  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402
from opgraph.frontends.onnx import import_model  # noqa: E402

CALIBRATION_SAMPLES = 8


class _RandomReader(CalibrationDataReader):  # type: ignore[misc]
    """Calibration inputs: random arrays with the case's input names, shapes and spread."""

    def __init__(self, model: onnx.ModelProto, inputs: list[np.ndarray]) -> None:
        names = [i.name for i in model.graph.input]
        rng = np.random.default_rng(11)
        self.batches: Iterator[dict[str, np.ndarray]] = iter(
            [
                {
                    n: (rng.standard_normal(a.shape) * float(a.std() or 1.0)).astype(a.dtype)
                    for n, a in zip(names, inputs, strict=True)
                }
                for _ in range(CALIBRATION_SAMPLES)
            ]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


def quantized(case: Case, folder: Path) -> onnx.ModelProto:
    """The case's ONNX model quantized by onnxruntime's ``quantize_static`` (QDQ)."""
    source, target = folder / "f32.onnx", folder / "int8.onnx"
    onnx.save(case.onnx, source)
    quantize_static(
        str(source),
        str(target),
        _RandomReader(case.onnx, case.inputs),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    return onnx.load(str(target))


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def onnxruntime(model: onnx.ModelProto, inputs: list[np.ndarray]) -> Prepared:
    session = _session(model)
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs, strict=True)}

    def outputs() -> list[np.ndarray]:
        return [np.asarray(o) for o in session.run(None, feeds)]

    return Prepared(outputs, outputs, 0.0, {})


def opgraph_cpu(
    model: onnx.ModelProto, inputs: list[np.ndarray], cache: Path, isa: str
) -> Prepared:
    config = CpuConfig(cache, default_config().compiler, num_threads=THREADS, isa=isa)
    backend = CpuBackend(config)
    started = time.perf_counter()
    exe = backend.compile(import_model(model))
    seconds = time.perf_counter() - started
    tensors = [
        backend.create_tensor(og.element.from_dtype(a.dtype), a.shape, a.copy()) for a in inputs
    ]
    results = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
    extra = {"fallbacks": float(len(exe.fallback_ops()))}

    def run() -> None:
        exe.call(results, tensors)

    def outputs() -> list[np.ndarray]:
        run()
        return [r.read() for r in results]

    return Prepared(run, outputs, seconds, extra)


def errors(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float]:
    """(max |got - want| / max |want|, share of rows whose arg-max differs)."""
    worst, flipped = 0.0, 0.0
    for g, w in zip(got, want, strict=True):
        scale = float(np.max(np.abs(w))) or 1.0
        worst = max(worst, float(np.max(np.abs(g - w))) / scale)
        rows_g, rows_w = g.reshape(-1, g.shape[-1]), w.reshape(-1, w.shape[-1])
        flipped = max(flipped, float(np.mean(rows_g.argmax(-1) != rows_w.argmax(-1))))
    return worst, flipped


def run_case(case: Case, rounds: int, block: float, repeat: int, isa: str) -> str:
    with tempfile.TemporaryDirectory(prefix="opgraph-bench-int8-") as tmp:
        model = quantized(case, Path(tmp))
        reference = onnxruntime(case.onnx, case.inputs).outputs()
        prepared = {
            "opgraph int8": opgraph_cpu(model, case.inputs, Path(tmp) / "cache", isa),
            "onnxruntime int8": onnxruntime(model, case.inputs),
        }
        fallbacks = int(prepared["opgraph int8"].extra["fallbacks"])
        errs = {n: errors(p.outputs(), reference) for n, p in prepared.items()}
        if PER_CORE:
            runs = {name: p.run for name, p in prepared.items()}
            sessions = [runners.thread_cpu_medians(runs, rounds, warm=3) for _ in range(repeat)]
        else:
            sessions = [measure(prepared, rounds, block) for _ in range(repeat)]
    medians = {n: statistics.median(s[n] for s in sessions) for n in sessions[0]}
    ratio = medians["opgraph int8"] / medians["onnxruntime int8"]
    (og_err, og_flip), (ort_err, ort_flip) = errs["opgraph int8"], errs["onnxruntime int8"]
    return (
        f"| {case.name} | {fmt(medians['opgraph int8'])} | {fmt(medians['onnxruntime int8'])} "
        f"| **{ratio:.2f}** | {og_err:.1e} | {ort_err:.1e} | {og_flip:.1%} | {ort_flip:.1%} "
        f"| {fallbacks} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="all", choices=["all", "w4", "w5"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--isa", default="native", choices=["native", "avx2", "avx512"])
    parser.add_argument("--per-core", action="store_true", help="one thread, thread CPU time")
    parser.add_argument("--rounds", type=int, help="rounds (default 3 quick, 8; per core 15)")
    args = parser.parse_args()
    rounds, block = (3, 0.05) if args.quick else (8, 0.1)
    if PER_CORE:
        rounds = 15
    rounds = args.rounds or rounds
    names = ["w4", "w5"] if args.workload == "all" else [args.workload]
    lines = [
        "| case | opgraph int8 | onnxruntime int8 | ratio (opgraph / onnxruntime) | "
        "opgraph error vs f32 | onnxruntime error vs f32 | opgraph arg-max changed | "
        "onnxruntime arg-max changed | opgraph fallbacks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        for case in build(name):
            lines.append(run_case(case, rounds, block, args.repeat, args.isa))
            print(lines[-1], flush=True)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    clock = "thread CPU time per call" if PER_CORE else "wall clock"
    print(f"\nthreads: {THREADS} ({clock}); isa: {args.isa}; load average at the end: {load}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
