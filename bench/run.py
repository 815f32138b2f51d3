"""Benchmark opgraph against onnxruntime, OpenVINO, torch and numpy on the same models.

    python bench/run.py --workload all [--quick] [--repeat 3] [--isa avx2] [--load 1]
                        [--peer-isa avx2] [--report results.md]

Runtimes run interleaved in one process (round after round, each runtime a block of
iterations, in a fresh seeded random order each round), each with the same number of threads.
``--isa`` forces the instruction set of opgraph's generated code (``avx2`` runs on AVX-512
machines too, so both paths are measured wherever the benchmark runs); the peers keep their own
dispatch. Before timing, opgraph's outputs are checked against onnxruntime's. Reported:
per-runtime medians, and the ratio of opgraph's median to the fastest of onnxruntime and OpenVINO.

``--peer-isa avx2`` restricts the peer to AVX2 where it can be restricted: OpenVINO's oneDNN
kernels (``ONEDNN_MAX_CPU_ISA``, set before its CPU plugin loads: its convolutions). Its fully
connected layers and all of onnxruntime run on MLAS, which picks its kernels from CPUID with no
override, so with it the ratio is against OpenVINO alone, and each case lists the kernels
OpenVINO chose (``runners.Prepared.kernels``): a ratio is an AVX2-to-AVX2 comparison only
where every one of them is AVX2 (ResNet-18: its convolutions; its one small product is MLAS).

``--load N`` measures every case twice per session, quiet and then with N busy-looping
processes beside it (``bench/load.py``: unpinned), and prints both tables and, per case, the
loaded ratio over the quiet one (target: at most 1.25, and the loaded ratio at most 1.5).
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))  # numpy's BLAS, torch's OpenMP: before imports
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from bench import load, machine, runners  # noqa: E402
from bench.models import Case  # noqa: E402
from bench.workloads import WORKLOADS, build  # noqa: E402
from opgraph.backends.cpu.config import ISA_FLAGS  # noqa: E402

PEERS = ("onnxruntime", "openvino")
#: ``--peer-isa``: oneDNN's name of the instruction set OpenVINO's kernels are restricted to.
ONEDNN_ISA = {"avx2": "AVX2"}
SETTLE = 0.15  # seconds between runtime blocks: longer than OpenBLAS spin-waits


def measure(
    prepared: dict[str, runners.Prepared], rounds: int, block: float, least: int = 1
) -> dict[str, float]:
    """Median seconds per run of each runtime, interleaved (``samples``)."""
    return {
        name: statistics.median(times)
        for name, times in samples(prepared, rounds, block, least).items()
    }


def samples(
    prepared: dict[str, runners.Prepared], rounds: int, block: float, least: int = 1
) -> dict[str, list[float]]:
    """Seconds of each timed run of each runtime, interleaved (``measure``'s samples): per
    round a block of about ``block`` seconds of each runtime's runs, and at least ``least``
    timed runs of each in all (a runtime slower than ``block`` would otherwise be timed once a
    round: ViT-B/16's ~0.2 s calls, three rounds, a median of three)."""
    iterations = {}
    for name, p in prepared.items():
        for _ in range(3):
            p.run()  # warm up
        started = time.perf_counter()
        p.run()
        once = max(time.perf_counter() - started, 1e-7)
        per_round = -(-least // rounds)
        iterations[name] = int(min(max(block / once, per_round, 1), 5000))
    times: dict[str, list[float]] = {name: [] for name in prepared}
    names = list(prepared)
    shuffle = random.Random(0)
    time.sleep(SETTLE)  # the last warm-up's threads go idle before round 0 too
    for _ in range(rounds):
        # A fresh order each round: with a rotation every runtime always followed the same
        # one (opgraph's call column always ran right after numpy's OpenBLAS).
        order = shuffle.sample(names, len(names))
        for name in order:
            run = prepared[name].run
            for _ in range(min(3, iterations[name])):
                run()  # re-warm after another runtime's threads
            for _ in range(iterations[name]):
                started = time.perf_counter_ns()
                run()
                times[name].append((time.perf_counter_ns() - started) * 1e-9)
            time.sleep(SETTLE)  # let this runtime's spinning threads go idle before the next
    return times


def prepare(
    case: Case, cache: Path, interpreter: bool, isa: str = "native"
) -> dict[str, runners.Prepared]:
    prepared = runners.opgraph_cpu(case, THREADS, cache, isa)
    prepared["onnxruntime"] = runners.onnxruntime(case, THREADS)
    prepared["openvino"] = runners.openvino(case, THREADS)
    prepared["torch"] = runners.torch_eager(case, THREADS)
    numpy_runner = runners.numpy_eager(case)
    if numpy_runner is not None:
        prepared["numpy"] = numpy_runner
    if interpreter:
        prepared["INTERPRETER"] = runners.interpreter(case)
    return prepared


def check(case: Case, prepared: dict[str, runners.Prepared]) -> float:
    """Max abs difference of opgraph's outputs from onnxruntime's (raises when too large)."""
    got = prepared["opgraph"].outputs() if prepared["opgraph"].run() is None else []
    want = [np.asarray(w) for w in prepared["onnxruntime"].outputs()]
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        worst = max(worst, float(np.max(np.abs(g - w))) if g.size else 0.0)
        if not np.allclose(g, w, rtol=case.tolerance, atol=case.tolerance):
            raise AssertionError(f"{case.name}: opgraph differs from onnxruntime by {worst}")
    return worst


def fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} µs"


COLUMNS = ("opgraph", "opgraph exe()", "onnxruntime", "openvino", "torch", "numpy", "INTERPRETER")


def add_isa_arguments(parser: argparse.ArgumentParser) -> None:
    """``--isa`` (opgraph's generated code) and ``--peer-isa`` (OpenVINO's oneDNN kernels),
    shared by ``bench/run.py`` and ``bench/zoo.py``."""
    parser.add_argument(
        "--isa",
        default="native",
        choices=sorted(ISA_FLAGS),
        help="instruction set of opgraph's generated code (default: %(default)s)",
    )
    parser.add_argument(
        "--peer-isa",
        default="native",
        choices=["native", *ONEDNN_ISA],
        help="restrict OpenVINO's oneDNN kernels to this ISA; the ratio is then against "
        "OpenVINO alone (default: %(default)s)",
    )


def hold_peers(args: argparse.Namespace) -> None:
    """Hold OpenVINO's oneDNN kernels to ``--peer-isa``: ``ONEDNN_MAX_CPU_ISA``, read when its
    CPU plugin first loads (the first ``compile_model``, after this)."""
    if args.peer_isa != "native":
        os.environ["ONEDNN_MAX_CPU_ISA"] = ONEDNN_ISA[args.peer_isa]


def peers_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The runtimes a ratio is taken against: both peers, or OpenVINO alone when it is
    restricted to an instruction set (``--peer-isa``) that onnxruntime cannot be held to."""
    return PEERS if args.peer_isa == "native" else ("openvino",)


def run_case(case: Case, args: argparse.Namespace) -> dict[str, object]:
    """Measure ``case``; with ``--load N`` each session is a quiet measurement followed by
    one beside N busy loops (result["loaded"])."""
    quiet: list[dict[str, float]] = []
    loaded: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="opgraph-bench-cache-") as tmp:
        prepared = prepare(case, Path(tmp), interpreter=not args.no_interpreter, isa=args.isa)
        error = check(case, prepared)
        for _ in range(args.repeat):
            quiet.append(measure(prepared, args.rounds, args.block))
            if args.load:
                with load.busy_loops(args.load):
                    loaded.append(measure(prepared, args.rounds, args.block))
    peers = peers_of(args)
    result = summarize(case, quiet, prepared, error, peers)
    if loaded:
        result["loaded"] = summarize(case, loaded, prepared, error, peers)
    if args.peer_isa != "native":
        result["peer_kernels"] = prepared["openvino"].kernels
    return result


def summarize(
    case: Case,
    sessions: list[dict[str, float]],
    prepared: dict[str, runners.Prepared],
    error: float,
    peers: tuple[str, ...] = PEERS,
) -> dict[str, object]:
    medians = {n: statistics.median(s[n] for s in sessions) for n in sessions[0]}
    best_peer = min(medians[p] for p in peers)
    return {
        "case": case,
        "medians": medians,
        "sessions": sessions,
        "ratio": medians["opgraph"] / best_peer,
        "ratio_exe": medians["opgraph exe()"] / best_peer,
        "error": error,
        "extra": prepared["opgraph"].extra,
        "peer_compile": {p: prepared[p].compile_seconds for p in PEERS},
        "peers": peers,
    }


def load_table(results: list[dict[str, object]], count: int) -> str:
    """Per case: quiet ratio, loaded ratio, their quotient, and the targets."""
    lines = [
        f"| case | ratio quiet | ratio with {count} busy loop(s) | loaded / quiet | "
        "target (loaded/quiet <= 1.25, loaded <= 1.5) |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        loaded = r["loaded"]
        case = r["case"]
        assert isinstance(loaded, dict) and isinstance(case, Case)
        quiet_ratio, loaded_ratio = float(r["ratio"]), float(loaded["ratio"])  # type: ignore[arg-type]
        quotient = loaded_ratio / quiet_ratio
        met = quotient <= 1.25 and loaded_ratio <= 1.5
        lines.append(
            f"| {case.name} | {quiet_ratio:.2f} | {loaded_ratio:.2f} | **{quotient:.2f}** | "
            f"{'met' if met else 'missed'} |"
        )
    return "\n".join(lines)


def table(results: list[dict[str, object]]) -> str:
    head = "| case | " + " | ".join(COLUMNS) + " | ratio call | ratio exe() | per-run ratios |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 4)]
    for r in results:
        medians = r["medians"]
        assert isinstance(medians, dict)
        cells = [fmt(medians[c]) if c in medians else "—" for c in COLUMNS]
        peers = r.get("peers", PEERS)
        per_run = ", ".join(
            f"{s['opgraph'] / min(s[p] for p in peers):.2f}"  # type: ignore[attr-defined]
            for s in r["sessions"]  # type: ignore[attr-defined]
        )
        case = r["case"]
        assert isinstance(case, Case)
        lines.append(
            f"| {case.name} | "
            + " | ".join(cells)
            + f" | **{r['ratio']:.2f}** | {r['ratio_exe']:.2f} | {per_run} |"
        )
    ratios = [float(r["ratio"]) for r in results]  # type: ignore[arg-type]
    geomean = float(np.exp(np.mean(np.log(ratios))))
    lines.append(f"\nGeometric mean of the ratios (call): **{geomean:.3f}**")
    return "\n".join(lines)


def kernel_table(cases: list[tuple[str, dict[str, int]]]) -> str:
    """Per case (name, kernels), the kernels OpenVINO ran (``--peer-isa``), and those not held
    to AVX2 (MLAS's, which dispatch on CPUID: the widest this CPU has)."""
    lines = ["| case | OpenVINO kernels | of them not held to AVX2 |", "|---|---|---|"]
    for name, kinds in cases:
        listed = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
        free = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()) if "avx2" not in k)
        lines.append(f"| {name} | {listed} | {free or 'none'} |")
    return "\n".join(lines)


def _kernels_of(results: list[dict[str, object]]) -> list[tuple[str, dict[str, int]]]:
    cases = []
    for r in results:
        kinds, case = r["peer_kernels"], r["case"]
        assert isinstance(kinds, dict) and isinstance(case, Case)
        cases.append((case.name, kinds))
    return cases


def compile_table(results: list[dict[str, object]]) -> str:
    lines = [
        "| case | opgraph cold compile | opgraph warm compile | onnxruntime session | "
        "OpenVINO compile | arena peak | intermediates without reuse | max abs diff vs ORT |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        extra, peers, case = r["extra"], r["peer_compile"], r["case"]
        assert isinstance(extra, dict) and isinstance(peers, dict) and isinstance(case, Case)
        cells = [
            f"{extra['cold_compile_s']:.3f} s",
            f"{extra['warm_compile_s'] * 1e3:.1f} ms",
            f"{peers['onnxruntime'] * 1e3:.1f} ms",
            f"{peers['openvino'] * 1e3:.1f} ms",
            f"{extra['arena_bytes'] / 2**20:.2f} MiB",
            f"{extra['unplanned_bytes'] / 2**20:.2f} MiB",
            f"{r['error']:.2e}",
        ]
        lines.append(f"| {case.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="all", choices=["all", *WORKLOADS])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=1, help="measurement sessions")
    parser.add_argument("--block", type=float, default=None, help="seconds per block")
    parser.add_argument("--no-interpreter", action="store_true")
    parser.add_argument("--report", type=Path, default=None, help="write markdown here")
    add_isa_arguments(parser)
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        metavar="N",
        help="also measure each case beside N busy-looping processes (unpinned)",
    )
    args = parser.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 10)
    args.block = args.block or (0.02 if args.quick else 0.1)
    hold_peers(args)
    results = []
    for case in build(args.workload):
        result = run_case(case, args)
        results.append(result)
        print(table([result]).splitlines()[-3], flush=True)
        if args.load:
            print("  loaded: " + table([result["loaded"]]).splitlines()[-3], flush=True)  # type: ignore[list-item]
    average = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    report = (
        f"threads: {THREADS}; opgraph isa: {args.isa}; peers: {args.peer_isa}; CPU: "
        f"{machine.cpu()}; opgraph BLAS kernels: {machine.blas_kernels()}; load average at the "
        f"end: {average}\n\n{table(results)}\n\n{compile_table(results)}\n"
    )
    if args.peer_isa != "native":
        kernels = kernel_table(_kernels_of(results))
        report += f"\nRatios against OpenVINO alone, its kernels:\n\n{kernels}\n"
    if args.load:
        loaded = [r["loaded"] for r in results]
        report += (
            f"\nWith {args.load} busy-looping process(es) beside the measurement "
            f"(bench/load.py, unpinned):\n\n{table(loaded)}\n\n"  # type: ignore[arg-type]
            f"{load_table(results, args.load)}\n"
        )
    print(report)
    if args.report:
        args.report.write_text(report)


if __name__ == "__main__":
    main()
