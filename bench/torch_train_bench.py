"""Training step (forward + backward + SGD-momentum update): eager vs Inductor vs
torch.compile(backend="opgraph") vs opgraph's one-call ``compile_train_step``.

    python bench/torch_train_bench.py [--workload mlp|resnet|bert|all] [--rounds 5]
                                      [--iterations 5] [--min-block 0.05] [--skip inductor]
                                      [--phases] [--report out.md]

Workloads (training mode, the models of ``bench/torch_bench.py``):

* MLP 784-512-512-10, batch 256, cross-entropy;
* ResNet-18 CIFAR (3×3 stem, no max-pool, BatchNorm in training mode), batch 32×3×32×32,
  cross-entropy;
* one BERT-base encoder layer (768 hidden, 12 heads, FFN 3072), batch 8 × 128 tokens, loss the
  mean square of its output.

Every runtime gets the same threads (2 by default, ``BENCH_THREADS``) and its own copy of the
model and optimizer (``SGD(lr=0.01, momentum=0.9)``). Runtimes run interleaved: round after
round, each runtime a block of steps, the starting runtime rotating, after a short rest; a
block lasts at least ``--min-block`` seconds (0.05: the MLP's blocks are then about 9 steps
of 6 ms instead of 3, no longer mostly the first steps after the rest).
Reported: each runtime's median step time and its ratio to the faster of eager and Inductor;
and, under each workload, where opgraph's parallel jobs ran in the measured steps of its two
runtimes (the CPU runtime's ``og_pool_counters``): jobs shared out, those on torch's OpenMP
team, and team jobs that waited for a late (descheduled) team thread. On a quiet machine a
``torch.compile`` row with jobs off the team ran them on opgraph's own pool beside torch's
spinning workers, after a late team thread (docs/torch.md, "Training speed"). With
``--phases``, each autograd runtime's median wall-clock zero_grad, forward, loss, backward and
optimizer over its measured steps.
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPGRAPH_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))  # before numpy and torch start their pools
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import copy  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

import opgraph as og  # noqa: E402
import opgraph.frontends.torch as og_torch  # noqa: E402
from bench.torch_bench import MLP, BertLayer, ResNet18  # noqa: E402
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters  # noqa: E402

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _mean_square(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (output - target).square().mean()


@dataclass
class Case:
    name: str
    make: Callable[[], nn.Module]
    inputs: torch.Tensor
    target: torch.Tensor
    loss: Loss


def cases(workload: str) -> list[Case]:
    torch.manual_seed(0)
    found = {
        "mlp": lambda: Case(
            "MLP b256", MLP, torch.randn(256, 784), torch.randint(0, 10, (256,)),
            nn.functional.cross_entropy,
        ),
        "resnet": lambda: Case(
            "ResNet-18 CIFAR b32", lambda: ResNet18(10, cifar=True), torch.randn(32, 3, 32, 32),
            torch.randint(0, 10, (32,)), nn.functional.cross_entropy,
        ),
        "bert": lambda: Case(
            "BERT-base layer b8×128", BertLayer, torch.randn(8, 128, 768),
            torch.randn(8, 128, 768), _mean_square,
        ),
    }  # fmt: skip
    names = list(found) if workload == "all" else [workload]
    return [found[n]() for n in names]


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


class Phases:
    """Wall-clock seconds of each part of an autograd step (``--phases``), recorded while
    ``on`` (the measured blocks only)."""

    NAMES = ("zero_grad", "forward", "loss", "backward", "optimizer")

    def __init__(self) -> None:
        self.on = False
        self.times: dict[str, list[float]] = {n: [] for n in self.NAMES}

    def add(self, marks: list[float]) -> None:
        for name, start, end in zip(self.NAMES, marks, marks[1:], strict=False):
            self.times[name].append(end - start)

    def line(self) -> str:
        return ", ".join(
            f"{n} {statistics.median(v) * 1e3:.2f} ms" for n, v in self.times.items() if v
        )


def _autograd_step(
    model: nn.Module, run: Callable[..., torch.Tensor], case: Case, phases: Phases | None = None
) -> Callable:
    optimizer = _optimizer(model)
    clock = time.perf_counter

    def step() -> torch.Tensor:
        timed = phases is not None and phases.on
        marks = [clock()] if timed else []
        optimizer.zero_grad(set_to_none=True)
        if timed:
            marks.append(clock())
        output = run(case.inputs)
        if timed:
            marks.append(clock())
        loss = case.loss(output, case.target)
        if timed:
            marks.append(clock())
        loss.backward()
        if timed:
            marks.append(clock())
        optimizer.step()
        if phases is not None and timed:
            marks.append(clock())
            phases.add(marks)
        return loss

    return step


def runtimes(
    case: Case, skip: set[str], phases: dict[str, Phases] | None = None
) -> dict[str, Callable[[], torch.Tensor]]:
    """Each runtime's step; ``phases`` (when given) gets a :class:`Phases` per autograd
    runtime (eager, inductor, opgraph)."""
    torch.manual_seed(1)
    base = case.make().train()
    steps: dict[str, Callable[[], torch.Tensor]] = {}
    runs: dict[str, Callable[[nn.Module], Callable[..., torch.Tensor]]] = {
        "eager": lambda m: m,
        "inductor": lambda m: torch.compile(m),  # type: ignore[return-value]
        "opgraph": lambda m: torch.compile(m, backend="opgraph"),  # type: ignore[return-value]
    }
    for name, wrap in runs.items():
        if name in skip:
            continue
        model = copy.deepcopy(base)
        record = phases.setdefault(name, Phases()) if phases is not None else None
        steps[name] = _autograd_step(model, wrap(model), case, record)
    if "step" not in skip:
        model = copy.deepcopy(base)
        one_call = og_torch.compile_train_step(model, case.loss, _optimizer(model))
        steps["opgraph step"] = lambda: one_call(case.inputs, case.target)
    return steps


def _pool_counters() -> Callable[[], tuple[int, int, int]] | None:
    """(jobs, team jobs, late team jobs) so far of the CPU backend's runtime library, or None
    without the CPU backend."""
    if "CPU" not in og.backends():
        return None
    runtime = og.backend("CPU").toolchain.runtime()  # type: ignore[attr-defined]

    def read() -> tuple[int, int, int]:
        counts = runtime_counters(runtime)
        return counts.jobs, counts.team_jobs, counts.team_late

    return read


def measure(
    steps: dict[str, Callable[[], torch.Tensor]],
    rounds: int,
    iterations: int,
    pools: dict[str, list[int]] | None = None,
    min_block: float = 0.0,
    phases: dict[str, Phases] | None = None,
) -> dict[str, float]:
    """Median seconds per step of each runtime, interleaved round by round; ``pools`` gets
    each runtime's (jobs, team jobs, late team jobs) over its measured steps.

    A measured block runs ``iterations`` steps, or more when those would take less than
    ``min_block`` seconds (counted once per workload from the fastest warm-up step, the same
    count for every runtime and round), so that a block of short steps (the MLP's 6 ms) is
    not mostly the first steps after the rest between blocks."""
    names = list(steps)
    fastest = float("inf")
    for name in names:  # compile and warm up
        try:
            for _ in range(2):
                steps[name]()
            start = time.perf_counter()
            steps[name]()
            fastest = min(fastest, time.perf_counter() - start)
        except Exception:  # a failing runtime is reported, not fatal
            traceback.print_exc()
            del steps[name]
    names = list(steps)
    if fastest < float("inf") and fastest > 0:
        iterations = max(iterations, math.ceil(min_block / fastest))
    samples: dict[str, list[float]] = {n: [] for n in names}
    counters = _pool_counters()
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            time.sleep(0.2)
            steps[name]()  # re-warm
            before = counters() if counters else (0, 0, 0)
            recording = (phases or {}).get(name)
            if recording is not None:
                recording.on = True
            start = time.perf_counter()
            for _ in range(iterations):
                steps[name]()
            samples[name].append((time.perf_counter() - start) / iterations)
            if recording is not None:
                recording.on = False
            after = counters() if counters else (0, 0, 0)
            if pools is not None:
                total = pools.setdefault(name, [0, 0, 0])
                for i in range(3):
                    total[i] += after[i] - before[i]
    return {n: statistics.median(s) for n, s in samples.items()}


def table(rows: list[tuple[Case, dict[str, float]]]) -> str:
    runtimes_seen = ["eager", "inductor", "opgraph", "opgraph step"]
    header = "| workload | " + " | ".join(runtimes_seen) + " |"
    lines = [header, "|---" * (len(runtimes_seen) + 1) + "|"]
    for case, times in rows:
        best = min(times[n] for n in ("eager", "inductor") if n in times)
        cells = []
        for name in runtimes_seen:
            if name not in times:
                cells.append("—")
            else:
                cells.append(f"{times[name] * 1e3:.1f} ms ({times[name] / best:.2f}×)")
        lines.append(f"| {case.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pool_line(pools: dict[str, list[int]]) -> str:
    parts = [
        f"{name}: {jobs} jobs, {team} on torch's team, {late} late"
        for name, (jobs, team, late) in pools.items()
        if name.startswith("opgraph")
    ]
    return "  opgraph's parallel jobs (measured steps): " + ("; ".join(parts) or "none")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="all", choices=["mlp", "resnet", "bert", "all"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument(
        "--min-block",
        type=float,
        default=0.05,
        help="seconds a measured block lasts at least (more steps than --iterations if needed)",
    )
    parser.add_argument("--skip", action="append", default=[], help="a runtime to leave out")
    parser.add_argument(
        "--phases",
        action="store_true",
        help="print each autograd runtime's median zero_grad/forward/loss/backward/optimizer",
    )
    parser.add_argument("--report", help="write the markdown table here too")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    rows = []
    for case in cases(args.workload):
        pools: dict[str, list[int]] = {}
        phases: dict[str, Phases] | None = {} if args.phases else None
        steps = runtimes(case, set(args.skip), phases)
        times = measure(steps, args.rounds, args.iterations, pools, args.min_block, phases)
        rows.append((case, times))
        print(table([(case, times)]).splitlines()[-1], flush=True)
        print(_pool_line(pools), flush=True)
        for name, recorded in (phases or {}).items():
            print(f"  {name} phases (median of measured steps): {recorded.line()}", flush=True)
    text = table(rows)
    print(f"\n{THREADS} threads, median step time (ratio to the faster of eager/Inductor)\n")
    print(text)
    if args.report:
        with open(args.report, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
