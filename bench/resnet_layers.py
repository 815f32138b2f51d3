"""ResNet-18's convolution layers one at a time: opgraph's CPU backend against onnxruntime.

    python bench/resnet_layers.py [--model imagenet|cifar|both] [--threads 1] [--rounds 8]
                                  [--calls 10] [--only NAME] [--isa avx2 [--isa native]]

Every distinct convolution of ResNet-18 (ImageNet batch 1, CIFAR batch 32; bench/resnet.py)
is one ONNX model: Conv with bias (the batch norm folded, as exported models have it), then
ReLU, or for the second convolution of a block the residual add and ReLU. opgraph imports
that model (``og.onnx.import_model``) and both run it in one process, calls interleaved
round by round, with the same number of threads. Outputs are checked against onnxruntime's
first. ``--isa`` (repeatable) compiles opgraph's code for each instruction set named
(``CpuConfig.isa``), one column each, interleaved in the same rounds. The table gives
per-call medians (best), the ratio, and the layer's share of the
model (``count`` times its median, over the sum of all layers).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import onnx
import onnxruntime as ort

import opgraph as og
from bench import resnet
from bench.onnx_builder import OnnxGraph
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config

RNG = np.random.default_rng(0)


@dataclass(frozen=True)
class Layer:
    """One convolution of ResNet-18: ``count`` of them in the model."""

    name: str
    batch: int
    channels: int
    out: int
    size: int
    kernel: int
    stride: int
    residual: bool
    count: int


def layers(cifar: bool) -> list[Layer]:
    """The distinct convolutions of ResNet-18 (bench/resnet.py), with their counts."""
    n = 32 if cifar else 1
    size = 32 if cifar else 56
    rows = [Layer("stem 3x3", n, 3, 64, 32, 3, 1, False, 1)] if cifar else []
    if not cifar:
        rows.append(Layer("stem 7x7 s2", n, 3, 64, 224, 7, 2, False, 1))
    c = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        if stride == 2:
            rows.append(Layer(f"{c}->{width} 3x3 s2 {size}", n, c, width, size, 3, 2, False, 1))
            rows.append(Layer(f"{c}->{width} 1x1 s2 {size}", n, c, width, size, 1, 2, False, 1))
            size //= 2
            rows.append(Layer(f"{width} 3x3 {size} +res", n, width, width, size, 3, 1, True, 2))
            rows.append(Layer(f"{width} 3x3 {size}", n, width, width, size, 3, 1, False, 1))
        else:
            rows.append(Layer(f"{width} 3x3 {size}", n, width, width, size, 3, 1, False, 2))
            rows.append(Layer(f"{width} 3x3 {size} +res", n, width, width, size, 3, 1, True, 2))
        c = width
    return rows


def model(layer: Layer) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """The layer as an ONNX model, and its inputs."""
    g = OnnxGraph("layer")
    n, c, o, k, s = layer.batch, layer.channels, layer.out, layer.kernel, layer.stride
    x = g.input("x", (n, c, layer.size, layer.size))
    side = (layer.size + 2 * (k // 2) - k) // s + 1
    w = RNG.standard_normal((o, c, k, k)) * (2.0 / (k * k * c)) ** 0.5
    b = RNG.standard_normal(o) * 0.1
    y = g.op("Conv", x, g.const(w.astype(np.float32)), g.const(b.astype(np.float32)),
             kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4)  # fmt: skip
    inputs = [RNG.standard_normal((n, c, layer.size, layer.size)).astype(np.float32)]
    if layer.residual:
        r = g.input("r", (n, o, side, side))
        y = g.op("Add", y, r)
        inputs.append(RNG.standard_normal((n, o, side, side)).astype(np.float32))
    if layer.kernel != 1:
        y = g.op("Relu", y)
    g.output(y, (n, o, side, side))
    return g.model(), inputs


def runners(
    layer: Layer, threads: int, cache: Path, isas: tuple[str, ...] = ("native",)
) -> dict[str, Callable[[], object]]:
    proto, arrays = model(layer)
    return pair(og.onnx.import_model(proto), proto, arrays, threads, cache, layer.name, isas)


def pair(
    function: og.Function,
    proto: onnx.ModelProto,
    arrays: list[np.ndarray],
    threads: int,
    cache: Path,
    name: str,
    isas: tuple[str, ...] = ("native",),
) -> dict[str, Callable[[], object]]:
    """opgraph (``function``, once per ISA in ``isas``) and onnxruntime (``proto``) on
    ``arrays``, outputs checked; the first ISA's runner is ``opgraph``, the others
    ``opgraph-<isa>``."""
    runs: dict[str, Callable[[], object]] = {}
    for i, isa in enumerate(isas):
        key = "opgraph" if i == 0 else f"opgraph-{isa}"
        runs[key] = _opgraph_runner(function, arrays, threads, cache, isa)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays, strict=True)}
    runs["onnxruntime"] = lambda: session.run(None, feeds)[0]
    want = np.asarray(runs["onnxruntime"]())
    for key, run in runs.items():
        got = np.asarray(run())
        error = float(np.max(np.abs(got - want))) / (float(np.max(np.abs(want))) + 1e-30)
        if error > 1e-4:
            raise SystemExit(f"{name}: {key} differs from onnxruntime by {error:.2e}")
    return runs


def _opgraph_runner(
    function: og.Function, arrays: list[np.ndarray], threads: int, cache: Path, isa: str
) -> Callable[[], object]:
    """``exe.call`` of ``function`` compiled for ``isa``, returning its first output."""
    config = CpuConfig(cache, default_config().compiler, num_threads=threads, isa=isa)
    exe_backend = CpuBackend(config)
    exe = exe_backend.compile(function)
    inputs = [exe_backend.create_tensor(og.f32, a.shape, a.copy()) for a in arrays]
    outputs = [exe_backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]

    def call() -> object:
        exe.call(outputs, inputs)
        return outputs[0].read()

    return call


def measure(
    runs: dict[str, Callable[[], object]], rounds: int, calls: int, cpu: bool
) -> dict[str, list[float]]:
    """Per-call seconds of each runner, interleaved; ``cpu``: this thread's CPU time (with
    one thread, both runtimes compute on the calling thread), else wall time."""
    clock = time.thread_time if cpu else time.perf_counter
    times: dict[str, list[float]] = {key: [] for key in runs}
    for r in range(rounds):
        keys = list(runs)[r % 2 :] + list(runs)[: r % 2]
        for key in keys:
            for _ in range(2):
                runs[key]()  # re-warm after the other runtime
            for _ in range(calls):
                started = clock()
                runs[key]()
                times[key].append(clock() - started)
            time.sleep(0.05)  # let the other runtime's spinning threads go idle
    return times


def _ratios(times: dict[str, float]) -> str:
    """Each opgraph runner's time over onnxruntime's, as table cells."""
    return " | ".join(
        f"{v / times['onnxruntime']:.2f}" for k, v in times.items() if k != "onnxruntime"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="both", choices=["imagenet", "cifar", "both"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--only", default="", help="run the layers whose name contains this")
    parser.add_argument(
        "--cpu-time", action="store_true", help="time the calling thread's CPU (1 thread only)"
    )
    parser.add_argument("--whole", action="store_true", help="also time the whole model")
    parser.add_argument("--isa", action="append", choices=("native", "avx2", "avx512"))
    args = parser.parse_args()
    isas = tuple(args.isa or ["native"])
    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time measures the calling thread: use it with --threads 1")
    kinds = {"imagenet": [False], "cifar": [True], "both": [False, True]}[args.model]
    clock = "thread CPU time" if args.cpu_time else "wall time"
    print(f"load average {os.getloadavg()[0]:.2f}; threads {args.threads}; {clock}")
    with tempfile.TemporaryDirectory() as tmp:
        for cifar in kinds:
            print(f"\n{'CIFAR batch 32' if cifar else 'ImageNet batch 1'}: ms median (best)")
            extra = [f"opgraph-{isa}" for isa in isas[1:]]
            print(
                f"| layer | count | opgraph ({isas[0]}) | {' | '.join([*extra, 'onnxruntime'])}"
                f" | ratio{''.join(f' | {e} ratio' for e in extra)} | share of opgraph |"
            )
            print("|---" * (6 + 2 * len(extra)) + "|")
            rows = []
            for layer in layers(cifar):
                if args.only not in layer.name:
                    continue
                runs = runners(layer, args.threads, Path(tmp), isas)
                times = measure(runs, args.rounds, args.calls, args.cpu_time)
                med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
                best = {k: min(v) * 1e3 for k, v in times.items()}
                rows.append((layer, med, best))
            total = sum(layer.count * med["opgraph"] for layer, med, _ in rows)
            for layer, med, best in rows:
                cells = " | ".join(f"{med[k]:.3f} ({best[k]:.3f})" for k in med)
                share = layer.count * med["opgraph"] / total
                print(f"| {layer.name} | {layer.count} | {cells} | {_ratios(med)} | {share:.0%} |")
            if rows:
                sums = {k: sum(layer.count * med[k] for layer, med, _ in rows) for k in rows[0][1]}
                cells = " | ".join(f"{v:.3f}" for v in sums.values())
                print(f"| weighted sum | | {cells} | {_ratios(sums)} | |")
            if args.whole:
                case = resnet.resnet18_cifar() if cifar else resnet.resnet18_imagenet()
                runs = pair(
                    case.function, case.onnx, case.inputs, args.threads, Path(tmp), "model", isas
                )
                times = measure(runs, args.rounds, args.calls, args.cpu_time)
                med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
                cells = " | ".join(f"{med[k]:.3f} ({min(v) * 1e3:.3f})" for k, v in times.items())
                print(f"| whole model (bench/resnet.py) | 1 | {cells} | {_ratios(med)} | |")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
