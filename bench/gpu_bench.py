"""opgraph's GPU backend against torch eager and torch.compile (inductor) on the same GPU.

    python bench/gpu_bench.py --backend GPU [--workload w1|w2|w3|w4|w5|all] [--rounds 5]
                              [--block 0.25] [--report gpu.md]

Run on an NVIDIA H200 on 2026-11-26; its table is in docs/gpu.md.

Workloads (evaluation mode, ``torch.no_grad()``), each one torch module whose weights opgraph
imports through ``torch.export`` (the same weights on both sides):

* W1: ``(a + b) * c`` on 32x32, 1024x1024 and 4096x4096 f32 (16 bytes moved per element).
* W2: ``tanh(x*0.5+1)*sigmoid(x) - x/3`` on 4M f32 — also reported as achieved memory
  bandwidth (32 MiB moved per call) against the device's peak (from its memory clock and bus
  width, when the driver reports them) and against a device-to-device copy measured here.
* W3: MLP 784-512-512-10 with ReLU and softmax, batch 256.
* W4: ResNet-18, ImageNet shape 1x3x224x224 and the CIFAR variant 32x3x32x32.
* W5: one BERT-base encoder layer, 1x128 tokens.

Inputs and outputs live on the device for every runtime (opgraph: device tensors from
``create_tensor``; torch: CUDA tensors), so no host copy is timed. Each timed call ends when
its results are complete (opgraph's ``call`` synchronizes its stream; torch calls are
followed by ``torch.cuda.synchronize()``). Runtimes run interleaved, round after round, the
first one rotating. Outputs are checked against torch eager before timing.

torch must be a CUDA build of the pinned version (torch==2.13.0 from the CUDA wheel index);
with a CPU-only torch the script stops and says so.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import functools
import math
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.fx.experimental.symbolic_shapes as symbolic_shapes
from torch import nn


def _static_hint(value: Any) -> Any:
    """``guarding_hint_or_throw`` for the static shapes of these workloads (torch < 2.13)."""
    return value if isinstance(value, int | bool) else int(value)


if not hasattr(symbolic_shapes, "guarding_hint_or_throw"):
    # The PyTorch bridge is pinned to torch 2.13; a GPU machine may have an older CUDA torch
    # (the lent H200 had 2.11), which lacks only this helper for the static shapes here.
    print(f"gpu_bench: torch {torch.__version__} predates the pinned 2.13; static-shape shim")
    symbolic_shapes.guarding_hint_or_throw = _static_hint  # type: ignore[assignment]

import opgraph as og  # noqa: E402
from bench.torch_bench import MLP, BertLayer, ResNet18, _randomize_norms  # noqa: E402
from opgraph.frontends.torch import import_exported  # noqa: E402

W2_SIZE = 1 << 22


class W1(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a + b) * c


class W2(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * 0.5 + 1) * torch.sigmoid(x) - x / 3


@dataclass
class Case:
    workload: str
    name: str
    model: nn.Module
    inputs: tuple[torch.Tensor, ...]  # on the CPU; moved to the GPU per runtime
    bytes_moved: int = 0  # memory traffic of one call, for a bandwidth figure


def cases(workload: str) -> list[Case]:
    torch.manual_seed(0)
    table: dict[str, Callable[[], list[Case]]] = {
        "w1": lambda: [
            Case("W1", f"(a+b)*c {n}x{n}", W1(), tuple(torch.rand(n, n) for _ in "abc"), 16 * n * n)
            for n in (32, 1024, 4096)
        ],
        "w2": lambda: [
            Case(
                "W2", "tanh(x*0.5+1)*sigmoid(x)-x/3 4M", W2(), (torch.randn(W2_SIZE),), 8 * W2_SIZE
            )
        ],
        "w3": lambda: [Case("W3", "MLP batch 256", MLP().eval(), (torch.randn(256, 784),))],
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
    # all: ResNet-18 (the longest torch.compile) last
    names = ["w1", "w2", "w3", "w5", "w4"] if workload == "all" else [workload]
    return [c for n in names for c in table[n]()]


# ------------------------------------------------------------------------------- runtimes
def opgraph_runtime(
    case: Case, backend_name: str
) -> tuple[Callable[[], object], Callable[[], list[np.ndarray]], float]:
    """(run, outputs, compile seconds): the module imported through torch.export, compiled
    for ``backend_name``, called on tensors created once (device tensors on the GPU)."""
    with torch.no_grad():
        exported = torch.export.export(case.model.eval(), case.inputs).run_decompositions()
    fn = import_exported(exported, name=case.workload.lower())
    backend = og.backend(backend_name)
    started = time.perf_counter()
    exe = backend.compile(fn)
    compile_seconds = time.perf_counter() - started
    inputs = []
    for value, t in zip(case.inputs, exe.parameter_types, strict=True):
        tensor = backend.create_tensor(t.element_type, t.shape)
        tensor.write(value.numpy())
        inputs.append(tensor)
    outputs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
    placement = getattr(exe, "placement", None)
    if callable(placement):
        summary = placement().splitlines()[-1]
        print(f"  opgraph {backend_name}: {summary}")

    def run() -> None:
        exe.call(outputs, inputs)

    return run, lambda: [o.read() for o in outputs], compile_seconds


def torch_runtimes(
    case: Case,
) -> dict[str, tuple[Callable[[], object], Callable[[], list[np.ndarray]]]]:
    model = case.model.cuda().eval()
    inputs = tuple(x.cuda() for x in case.inputs)
    found: dict[str, tuple[Callable[[], object], Callable[[], list[np.ndarray]]]] = {}
    for name, fn in (("torch eager", model), ("torch.compile", torch.compile(model))):
        result: list[Any] = []

        def run(fn: Any = fn, result: list[Any] = result) -> None:
            with torch.no_grad():
                out = fn(*inputs)
            torch.cuda.synchronize()
            result[:] = [out]

        def outputs(result: list[Any] = result) -> list[np.ndarray]:
            return [result[0].detach().cpu().numpy()]

        found[name] = (run, outputs)
    return found


def measure(ready: dict[str, Callable[[], object]], rounds: int, block: float) -> dict[str, float]:
    """Median seconds per call of each runtime, interleaved (each call synchronized)."""
    iterations = {}
    for name, run in ready.items():
        for _ in range(5):
            run()
        started = time.perf_counter()
        run()
        iterations[name] = int(min(max(block / max(time.perf_counter() - started, 1e-7), 3), 10000))
    samples: dict[str, list[float]] = {name: [] for name in ready}
    names = list(ready)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = ready[name]
            for _ in range(3):
                run()
            for _ in range(iterations[name]):
                started = time.perf_counter_ns()
                run()
                samples[name].append((time.perf_counter_ns() - started) * 1e-9)
    return {name: statistics.median(times) for name, times in samples.items()}


# ------------------------------------------------------------------------------ bandwidth
@functools.cache
def peak_bandwidth() -> float | None:
    """Theoretical DRAM bandwidth in bytes/s (memory clock × 2 × bus width), or None when the
    driver does not report it."""
    import cupy

    runtime = cupy.cuda.runtime
    device = cupy.cuda.Device().id
    try:
        clock_khz = runtime.deviceGetAttribute(runtime.cudaDevAttrMemoryClockRate, device)
        bus_bits = runtime.deviceGetAttribute(runtime.cudaDevAttrGlobalMemoryBusWidth, device)
    except Exception:  # attribute missing from this CUDA/CuPy
        return None
    return 2.0 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else None


@functools.cache
def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), measured."""
    import cupy

    source = cupy.empty(nbytes, cupy.uint8)
    target = cupy.empty_like(source)
    for _ in range(3):
        target[...] = source
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(10):
        started = time.perf_counter()
        target[...] = source
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - started)
    return 2 * nbytes / statistics.median(times)


def bandwidth_lines(case: Case, seconds: float) -> list[str]:
    achieved = case.bytes_moved / seconds
    lines = [
        f"  {case.workload} {case.name} moves {case.bytes_moved / 2**20:.1f} MiB per call: "
        f"{achieved / 1e9:.0f} GB/s"
    ]
    peak = peak_bandwidth()
    if peak:
        lines.append(f"  = {100 * achieved / peak:.0f}% of the theoretical {peak / 1e9:.0f} GB/s")
    copy = copy_bandwidth()
    lines.append(f"  = {100 * achieved / copy:.0f}% of a device copy's {copy / 1e9:.0f} GB/s")
    return lines


# ----------------------------------------------------------------------------------- main
def run_case(
    case: Case, backend_name: str, rounds: int, block: float
) -> tuple[dict[str, float], list[str]]:
    print(f"{case.workload} {case.name}")
    # opgraph first: it exports the module on the host; torch_runtimes moves it to the GPU
    run, outputs, compile_seconds = opgraph_runtime(case, backend_name)
    torch_ready = torch_runtimes(case)
    print(f"  opgraph compile {compile_seconds:.2f} s")
    eager_run, eager_outputs = torch_ready["torch eager"]
    eager_run()
    want = eager_outputs()
    run()
    for g, w in zip(outputs(), want, strict=True):
        print(
            f"  max |opgraph - torch eager| = {float(np.max(np.abs(g - w))) if g.size else 0.0:.2e}"
        )
    ready = {f"opgraph {backend_name}": run, **{n: r for n, (r, _) in torch_ready.items()}}
    medians = measure(ready, rounds, block)
    print("  " + ", ".join(f"{n} {t * 1e3:.3f} ms" for n, t in medians.items()))
    opgraph_seconds = medians[f"opgraph {backend_name}"]
    extra = bandwidth_lines(case, opgraph_seconds) if case.bytes_moved >= 1 << 20 else []
    for line in extra:
        print(line)
    return medians, extra


def table(rows: list[tuple[Case, dict[str, float]]], backend_name: str) -> str:
    names = [f"opgraph {backend_name}", "torch eager", "torch.compile"]
    lines = [
        "| workload | case | "
        + " | ".join(f"{n} ms" for n in names)
        + " | opgraph / fastest torch |",
        "|---|---|" + "---:|" * len(names) + "---:|",
    ]
    for case, medians in rows:
        cells = [f"{medians[n] * 1e3:.3f}" if n in medians else "-" for n in names]
        fastest_torch = min(medians[n] for n in names[1:] if n in medians)
        ratio = medians[names[0]] / fastest_torch
        lines.append(f"| {case.workload} | {case.name} | {' | '.join(cells)} | {ratio:.2f} |")
    ratios = {
        peer: [m[names[0]] / m[peer] for _, m in rows if peer in m and names[0] in m]
        for peer in names[1:]
    }
    for peer, found in ratios.items():
        if found:
            geomean = math.exp(sum(math.log(r) for r in found) / len(found))
            lines.append(f"\ngeomean opgraph / {peer}: {geomean:.2f} over {len(found)} case(s)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="GPU", help="opgraph backend (default: %(default)s)")
    parser.add_argument("--workload", default="all", choices=["w1", "w2", "w3", "w4", "w5", "all"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=float, default=0.25, help="seconds per timing block")
    parser.add_argument("--report", default=None, help="also write the table to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_bench: this torch has no CUDA; install the CUDA build of torch==2.13.0")
    if args.backend.upper() not in og.backends():
        sys.exit(
            f"gpu_bench: backend {args.backend} is not registered ({', '.join(og.backends())})"
        )
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, opgraph {args.backend}")
    rows: list[tuple[Case, dict[str, float]]] = []
    notes: list[str] = []
    for case in cases(args.workload):
        try:
            medians, extra = run_case(case, args.backend.upper(), args.rounds, args.block)
        except Exception as error:  # reported; the other workloads still run
            traceback.print_exc()
            notes.append(f"{case.workload} {case.name} failed: {type(error).__name__}: {error}")
            continue
        rows.append((case, medians))
        notes += extra
        if args.report:  # the table so far, in case a later workload does not finish
            write_report(args.report, rows, notes, args.backend.upper())
    text = "\n".join([table(rows, args.backend.upper()) if rows else "no workload ran", "", *notes])
    print(text)
    if args.report:
        write_report(args.report, rows, notes, args.backend.upper())


def write_report(
    path: str, rows: list[tuple[Case, dict[str, float]]], notes: list[str], backend: str
) -> None:
    with open(path, "w") as handle:
        handle.write("\n".join([table(rows, backend), "", *notes]) + "\n")


if __name__ == "__main__":
    main()
