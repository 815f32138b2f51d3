"""``bench/run.py --load N``'s quotient split into its parts, session by session.

    python bench/load_split.py [--workload w2] [--sessions 12] [--load 1]
                               [--isa avx2] [--peer-isa avx2]

``bench/run.py --load N`` reports per case the loaded ratio (opgraph / faster peer, beside N
busy loops) over the quiet one, each the median of ``--repeat`` sessions. That quotient is
opgraph's own loaded/quiet time over the faster peer's, and either can move it. This tool
measures sessions as ``bench/run.py --quick`` does (``run.samples``: the same interleaved
rounds of every runtime, quiet and then beside the busy loops) and prints, per session, each
runtime's median quiet and loaded, and for opgraph also its mean (a median can sit in the fast
mode of a two-mode spread while the mean is at the throughput bound), the share of its loaded
calls within 1.25x of its quiet median, and its time on one thread (``opgraph 1t``: what the
caller takes alone). Then, per runtime, the spread over sessions of its loaded/quiet time,
and the quotient ``bench/run.py --repeat 3`` would report for each three sessions in a row.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import statistics
import tempfile
import time
from pathlib import Path

# run before runners (which imports numpy): it sets the BLAS thread counts
from bench import load, run, runners
from bench.models import Case
from bench.workloads import WORKLOADS, build

#: A loaded call at most this many times opgraph's quiet median counts as fast.
FAST = 1.25
ONE_THREAD = "opgraph 1t"
Session = dict[str, list[float]]


def prepare(case: Case, cache: Path, isa: str) -> dict[str, runners.Prepared]:
    """``bench/run.py``'s runtimes less the interpreter, and opgraph on one thread."""
    prepared = run.prepare(case, cache, interpreter=False, isa=isa)
    prepared[ONE_THREAD] = runners.opgraph_cpu(case, 1, cache, isa)["opgraph"]
    return prepared


def medians(session: Session) -> dict[str, float]:
    return {name: statistics.median(times) for name, times in session.items()}


def fast_share(quiet: Session, loaded: Session) -> float:
    """The share of opgraph's loaded calls within ``FAST`` times its quiet median."""
    bound = FAST * statistics.median(quiet["opgraph"])
    return sum(t <= bound for t in loaded["opgraph"]) / len(loaded["opgraph"])


def session_line(quiet: Session, loaded: Session) -> str:
    """One session: each runtime's median quiet -> loaded (ms), opgraph's mean and fast share."""
    q, lo = medians(quiet), medians(loaded)
    cells = [f"{n} {q[n] * 1e3:.3f} -> {lo[n] * 1e3:.3f}" for n in q]
    mean_q, mean_l = statistics.fmean(quiet["opgraph"]), statistics.fmean(loaded["opgraph"])
    return (
        f"{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}: " + ", ".join(cells)
        + f"; opgraph mean {mean_q * 1e3:.3f} -> {mean_l * 1e3:.3f}, "
        + f"loaded calls fast {fast_share(quiet, loaded):.2f}"
    )  # fmt: skip


def quotients(
    case: Case,
    prepared: dict[str, runners.Prepared],
    rows: list[tuple[Session, Session]],
    peers: tuple[str, ...],
) -> list[float]:
    """For each three sessions in a row, ``bench/run.py --repeat 3``'s loaded/quiet quotient."""
    out = []
    for i in range(0, len(rows) - 2, 3):
        three = rows[i : i + 3]
        quiet = ratio(case, prepared, [q for q, _ in three], peers)
        out.append(ratio(case, prepared, [lo for _, lo in three], peers) / quiet)
    return out


def ratio(
    case: Case,
    prepared: dict[str, runners.Prepared],
    sessions: list[Session],
    peers: tuple[str, ...],
) -> float:
    """``bench/run.py``'s ratio over ``sessions``: opgraph's median over the faster peer's."""
    summarized = run.summarize(case, [medians(s) for s in sessions], prepared, 0.0, peers)
    return float(summarized["ratio"])  # type: ignore[arg-type]


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def summary(
    case: Case,
    prepared: dict[str, runners.Prepared],
    rows: list[tuple[Session, Session]],
    peers: tuple[str, ...],
) -> str:
    """Per runtime, loaded/quiet over the sessions; the quotient of each three in a row."""
    q = [medians(quiet) for quiet, _ in rows]
    lo = [medians(loaded) for _, loaded in rows]
    lines = [f"{case.name}: loaded / quiet per session, min / median / max"]
    lines += [f"  {n}: {spread([b[n] / a[n] for a, b in zip(q, lo, strict=True)])}" for n in q[0]]
    lines.append(
        "  opgraph's loaded calls within 1.25x of its quiet median: "
        + spread([fast_share(quiet, loaded) for quiet, loaded in rows])
    )
    found = quotients(case, prepared, rows, peers)
    if found:
        lines.append("  bench/run.py --repeat 3 quotients: " + ", ".join(f"{x:.2f}" for x in found))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="w2", choices=list(WORKLOADS))
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--load", type=int, default=1, help="busy-looping processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--block", type=float, default=0.02, help="seconds per block")
    run.add_isa_arguments(parser)
    args = parser.parse_args()
    run.hold_peers(args)
    for case in build(args.workload):
        with tempfile.TemporaryDirectory(prefix="opgraph-load-split-") as tmp:
            prepared = prepare(case, Path(tmp), args.isa)
            rows = []
            for _ in range(args.sessions):
                quiet = run.samples(prepared, args.rounds, args.block)
                with load.busy_loops(args.load):
                    loaded = run.samples(prepared, args.rounds, args.block)
                rows.append((quiet, loaded))
                print(session_line(quiet, loaded), flush=True)
            print(summary(case, prepared, rows, run.peers_of(args)), flush=True)


if __name__ == "__main__":
    main()
