"""torch eager vs torch.compile(inductor) vs torch.compile(backend="opgraph").

    python bench/torch_bench.py [--workload w3|w4|w5|all] [--rounds 5] [--block 0.25]
                                [--opgraph-backend CPU|INTERPRETER] [--report out.md]

Workloads (all in evaluation mode under ``torch.no_grad()``):

* W3: MLP 784-512-512-10, ReLU, softmax; batch 1 and 256.
* W4: ResNet-18 (written here; torchvision is not a dependency): ImageNet shape, batch 1
  (1×3×224×224, 1000 classes), and the CIFAR variant (3×3 stride-1 stem, no max-pool,
  10 classes) at batch 32×3×32×32.
* W5: one BERT-base encoder layer: hidden 768, 12 heads, FFN 3072, erf-GELU, post-LN,
  batch 1 × 128 tokens.

Every runtime gets the same threads (2 by default, ``BENCH_THREADS``). Runtimes run
interleaved in one process: round after round, each runtime a block of iterations (the
starting runtime rotating), after a short rest (so the previous runtime's spinning BLAS or
OpenMP threads do not tax it) and re-warming. Reported: per-runtime medians and each one's
ratio to the fastest. Outputs are checked against eager first (max abs difference).
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPGRAPH_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))  # before numpy and torch start their pools
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

import opgraph.frontends.torch  # noqa: E402, F401 - registers the "opgraph" backend


# ------------------------------------------------------------------------------- models
class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.l2(torch.relu(self.l1(x))))
        return torch.softmax(self.l3(h), dim=-1)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000, cifar: bool = False) -> None:
        super().__init__()
        if cifar:  # 3x3 stride-1 stem, no max-pool
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()
            )
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            )
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class BertLayer(nn.Module):
    """One BERT-base encoder layer: self-attention, post-LN residuals, erf-GELU FFN."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out, self.ln1 = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps=1e-12)
        self.ff1, self.ff2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        return x.view(b, t, self.heads, h // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(x.shape)
        x = self.ln1(x + self.out(context))
        return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


def _randomize_norms(model: nn.Module) -> nn.Module:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)
    return model.eval()


@dataclass
class Case:
    workload: str
    name: str
    model: nn.Module
    inputs: tuple[torch.Tensor, ...]


def cases(workload: str) -> list[Case]:
    torch.manual_seed(0)
    table: dict[str, Callable[[], list[Case]]] = {
        "w3": lambda: [
            Case("W3", f"MLP batch {n}", MLP().eval(), (torch.randn(n, 784),)) for n in (1, 256)
        ],
        "w4": lambda: [
            Case(
                "W4",
                "ResNet-18 1x3x224x224",
                _randomize_norms(ResNet18()),
                (torch.randn(1, 3, 224, 224),),
            ),
            Case(
                "W4",
                "ResNet-18 CIFAR 32x3x32x32",
                _randomize_norms(ResNet18(10, cifar=True)),
                (torch.randn(32, 3, 32, 32),),
            ),
        ],
        "w5": lambda: [
            Case("W5", "BERT-base layer 1x128", BertLayer().eval(), (torch.randn(1, 128, 768),))
        ],
    }
    names = list(table) if workload == "all" else [workload]
    return [c for n in names for c in table[n]()]


# ------------------------------------------------------------------------------ runtimes
def runtimes(case: Case, opgraph_backend: str | None) -> dict[str, Callable[[], object]]:
    """Callables running the case once; each is warmed (compiled) here."""
    options = {"backend": opgraph_backend} if opgraph_backend else None
    candidates: dict[str, Callable[[], Callable[..., object]]] = {
        "eager": lambda: case.model,
        "inductor": lambda: torch.compile(case.model),
        "opgraph": lambda: torch.compile(case.model, backend="opgraph", options=options),
    }
    ready: dict[str, Callable[[], object]] = {}
    with torch.no_grad():
        want = case.model(*case.inputs)
        for name, make in candidates.items():
            torch._dynamo.reset()
            try:
                fn = make()
                started = time.perf_counter()
                got = fn(*case.inputs)
                compile_seconds = time.perf_counter() - started
            except Exception as error:  # report why a runtime cannot run, keep the others
                print(f"  {name}: FAILED ({type(error).__name__}: {str(error)[:300]})")
                traceback.print_exc(limit=2)
                continue
            diff = float((got - want).abs().max())
            print(f"  {name}: first call {compile_seconds:.1f} s, max |diff| vs eager {diff:.2e}")
            ready[name] = _bound(fn, case.inputs)
    return ready


def _bound(fn: Callable[..., object], inputs: tuple[torch.Tensor, ...]) -> Callable[[], object]:
    def run() -> object:
        with torch.no_grad():
            return fn(*inputs)

    return run


def measure(
    ready: dict[str, Callable[[], object]], rounds: int, block: float, idle: float
) -> dict[str, float]:
    """Median seconds per call of each runtime, interleaved; each block starts after
    ``idle`` seconds so the previous runtime's spinning worker threads have gone to sleep."""
    iterations = {}
    for name, run in ready.items():
        for _ in range(3):
            run()
        started = time.perf_counter()
        run()
        once = max(time.perf_counter() - started, 1e-7)
        iterations[name] = int(min(max(block / once, 1), 5000))
    samples: dict[str, list[float]] = {name: [] for name in ready}
    names = list(ready)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = ready[name]
            time.sleep(idle)
            for _ in range(min(3, iterations[name])):
                run()  # re-warm after another runtime ran
            for _ in range(iterations[name]):
                started = time.perf_counter_ns()
                run()
                samples[name].append((time.perf_counter_ns() - started) * 1e-9)
    return {name: statistics.median(times) for name, times in samples.items()}


def table(rows: list[tuple[Case, dict[str, float]]]) -> str:
    header = (
        "| workload | case | eager ms | inductor ms | opgraph ms | ratio to fastest (e / i / o) |"
    )
    lines = [header, "|---|---|---:|---:|---:|---|"]
    for case, medians in rows:
        fastest = min(medians.values())
        cells = [
            f"{medians[n] * 1e3:.3f}" if n in medians else "failed"
            for n in ("eager", "inductor", "opgraph")
        ]
        ratios = " / ".join(
            f"{medians[n] / fastest:.2f}" if n in medians else "-"
            for n in ("eager", "inductor", "opgraph")
        )
        lines.append(f"| {case.workload} | {case.name} | {' | '.join(cells)} | {ratios} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="all", choices=["w3", "w4", "w5", "all"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=float, default=0.25, help="seconds per timing block")
    parser.add_argument("--idle", type=float, default=0.1, help="seconds of rest before a block")
    parser.add_argument("--opgraph-backend", default=None, help="default: CPU if registered")
    parser.add_argument("--report", default=None, help="also write the table to this file")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    from opgraph.frontends.torch.dynamo import default_backend

    print(
        f"torch {torch.__version__}, {THREADS} threads, opgraph backend "
        f"{args.opgraph_backend or default_backend()}"
    )
    rows = []
    for case in cases(args.workload):
        print(f"{case.workload} {case.name}")
        ready = runtimes(case, args.opgraph_backend)
        medians = measure(ready, args.rounds, args.block, args.idle)
        print("  " + ", ".join(f"{n} {t * 1e3:.3f} ms" for n, t in medians.items()))
        rows.append((case, medians))
    text = table(rows)
    print(text)
    if args.report:
        with open(args.report, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
