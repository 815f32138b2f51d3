"""The model zoo (``bench/models.py``: ResNet-50, MobileNetV3-Large, EfficientNet-B0,
ConvNeXt-T, ViT-B/16, BERT-base 2 layers, GPT-2 2 layers, Whisper-tiny encoder; random
weights, exported by torch's dynamo exporter) on opgraph's CPU backend, onnxruntime and
OpenVINO (f32), the same threads each, calls interleaved (``bench/run.py``'s ``measure``).

    python bench/zoo.py [--models resnet50,bert_2l] [--rounds 10] [--block 0.1] [--least 15]
                        [--small]
                        [--isa avx2] [--peer-isa avx2] [--report zoo.md]

Before timing, each model's outputs on opgraph are checked against onnxruntime's: max |error|
within 1e-4 of the output scale (max |onnxruntime output|). Reported per model: medians, the
ratio of opgraph's median to the faster peer's, the error, the ops opgraph runs as reference
fallbacks (``exe.fallback_ops()``) and compile times; then the geometric mean of the ratios.
Exports are cached under ``bench/out/zoo`` (keyed by configuration and versions).
``--isa`` and ``--peer-isa`` are ``bench/run.py``'s: opgraph's generated code for that
instruction set, and OpenVINO's oneDNN kernels held to it (the ratio then against OpenVINO
alone, each model's OpenVINO kernels listed, those not held named).
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))  # numpy's BLAS, torch's OpenMP: before imports
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import gc  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from bench import runners  # noqa: E402
from bench.models import ZOO, ZOO_CACHE, zoo_case, zoo_error  # noqa: E402
from bench.run import (  # noqa: E402
    PEERS,
    add_isa_arguments,
    fmt,
    hold_peers,
    kernel_table,
    measure,
    peers_of,
)
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402

TOLERANCE = 1e-4  # of the output scale


@dataclass
class Row:
    """One model's measurements."""

    name: str
    medians: dict[str, float]
    error: float
    scale: float
    fallbacks: list[str]
    cold_compile: float
    import_seconds: float
    peers: tuple[str, ...] = PEERS
    peer_kernels: dict[str, int] | None = None

    @property
    def ratio(self) -> float:
        return self.medians["opgraph"] / min(self.medians[p] for p in self.peers)

    @property
    def ok(self) -> bool:
        return self.error <= TOLERANCE * self.scale


def _fallbacks(case_function: object, cache: Path, isa: str) -> list[str]:
    """The reference-fallback ops of the compiled model (a warm compile: same cache)."""
    config = CpuConfig(cache, default_config().compiler, num_threads=THREADS, isa=isa)
    return CpuBackend(config).compile(case_function).fallback_ops()  # type: ignore[arg-type]


#: Rounds and seconds per block of each runtime's calls (``bench/run.py``'s ``samples``):
#: ``bench/run.py``'s own, 10 of 0.1 s. Until 2026-11-28 (twenty-first session) the zoo took 3
#: rounds of 0.3 s: a spell of a slow machine (another tenant on the socket for seconds)
#: then fell on one or two of a runtime's three blocks and moved that runtime's median alone
#: (ResNet-50's ratio read 0.89-1.46 over the twentieth session's quiet runs); ten shorter
#: blocks spread each runtime's calls over the run.
ROUNDS, BLOCK = 10, 0.1
#: Timed calls of each runtime per model at least: a call slower than a block (ViT-B/16's
#: ~0.2 s) is otherwise timed once a round.
LEAST = 15


def run_model(name: str, args: argparse.Namespace) -> Row:
    started = time.perf_counter()
    case = zoo_case(name, args.small, args.exports)
    imported = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="opgraph-zoo-cache-") as tmp:
        built = runners.opgraph_cpu(case, THREADS, Path(tmp), args.isa)
        prepared = {"opgraph": built["opgraph"]}
        fallbacks = _fallbacks(case.function, Path(tmp), args.isa)
        prepared["onnxruntime"] = runners.onnxruntime(case, THREADS)
        prepared["openvino"] = runners.openvino(case, THREADS)
        prepared["opgraph"].run()
        got = prepared["opgraph"].outputs()
        want = [np.asarray(w) for w in prepared["onnxruntime"].outputs()]
        error, scale = zoo_error(got, want)
        medians = measure(prepared, args.rounds, args.block, args.least)
    held = args.peer_isa != "native"
    return Row(
        name,
        medians,
        error,
        scale,
        fallbacks,
        prepared["opgraph"].extra["cold_compile_s"],
        imported,
        peers_of(args),
        prepared["openvino"].kernels if held else None,
    )


def table(rows: list[Row]) -> str:
    lines = [
        "| model | opgraph | onnxruntime | OpenVINO | ratio | max abs error / output scale "
        "| reference fallbacks | opgraph cold compile |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r.medians
        check = "" if r.ok else " **over 1e-4**"
        lines.append(
            f"| {r.name} | {fmt(m['opgraph'])} | {fmt(m['onnxruntime'])} | "
            f"{fmt(m['openvino'])} | **{r.ratio:.2f}** | {r.error:.2e} / {r.scale:.3g}{check} | "
            f"{', '.join(r.fallbacks) or 'none'} | {r.cold_compile:.1f} s |"
        )
    if rows:
        geomean = float(np.exp(np.mean(np.log([r.ratio for r in rows]))))
        lines.append(f"\nGeometric mean of the ratios: **{geomean:.3f}** (target ≤ 1.0)")
    return "\n".join(lines)


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"
    fields = dict(ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    isa = "AVX-512" if "avx512f" in fields.get("Flags", "").split() else "no AVX-512"
    family, model = fields.get("CPU family", "?"), fields.get("Model", "?")
    return f"{fields.get('Model name', 'unknown CPU')} (family {family}, model {model}, {isa})"


def _load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated zoo names")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--block", type=float, default=BLOCK, help="seconds per block")
    parser.add_argument(
        "--least", type=int, default=LEAST, help="timed calls of each runtime at least"
    )
    parser.add_argument("--small", action="store_true", help="the test-sized variants")
    parser.add_argument("--exports", type=Path, default=ZOO_CACHE, help="export cache folder")
    parser.add_argument("--report", type=Path, default=None, help="write markdown here")
    add_isa_arguments(parser)
    args = parser.parse_args()
    hold_peers(args)
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(ZOO))
    if unknown:
        parser.error(f"unknown models {unknown}; the zoo has {sorted(ZOO)}")
    load_before = _load()
    rows = []
    for name in names:
        rows.append(run_model(name, args))
        gc.collect()
        print(table(rows[-1:]).splitlines()[2], flush=True)
    report = (
        f"CPU: {cpu_name()}; threads: {THREADS}; rounds: {args.rounds}, at least "
        f"{args.least} calls each; opgraph isa: "
        f"{args.isa}; peers: {args.peer_isa}; load average before: {load_before}, after: "
        f"{_load()}\n\n{table(rows)}\n"
    )
    if args.peer_isa != "native":
        kernels = [(r.name, r.peer_kernels or {}) for r in rows]
        report += f"\nRatios against OpenVINO alone, its kernels:\n\n{kernel_table(kernels)}\n"
    print(report)
    if args.report:
        args.report.write_text(report)
    if not all(r.ok for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
