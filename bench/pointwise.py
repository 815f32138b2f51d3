"""The pointwise (1x1) convolutions of EfficientNet-B0, MobileNetV3-Large and ResNet-50, one
at a time: opgraph's CPU backend against onnxruntime.

    python bench/pointwise.py [--models efficientnet_b0,mobilenet_v3,resnet50] [--threads 1]
                              [--rounds 8] [--calls 10] [--only TEXT] [--cpu-time] [--whole]

Each distinct 1x1 convolution of the three models at 224x224, batch 1 (their layer tables:
transformers' EfficientNet-B0 and ResNet-50, torchvision's MobileNetV3-Large table in
bench/models.py) is one ONNX model: Conv with bias (the batch norm folded), then the model's
activation (SiLU as ``x * Sigmoid(x)``, HardSwish, ReLU) or, for a projection, the residual
add where the model has one. opgraph imports it and both runtimes run it in one process,
calls interleaved (``bench/resnet_layers.py``'s ``pair`` and ``measure``). The table gives
per-call medians (best), the ratio, and each layer's share of the model's 1x1 time
(``count`` times its median). ``--whole`` also runs the whole zoo models
(``bench/models.py``, exported once to ``bench/out/zoo``) the same way against onnxruntime:
with ``--threads 1 --cpu-time`` a per-core comparison that holds up on a loaded machine,
unlike ``bench/zoo.py``'s two-thread wall times.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import onnx

import opgraph as og
from bench.onnx_builder import OnnxGraph
from bench.resnet_layers import measure, pair

RNG = np.random.default_rng(0)


@dataclass(frozen=True)
class Pointwise:
    """One 1x1 convolution: ``count`` of them in ``model``."""

    model: str
    channels: int
    out: int
    size: int
    stride: int
    act: str  # "none", "relu", "silu", "hswish"
    residual: bool
    count: int

    @property
    def name(self) -> str:
        s = f" s{self.stride}" if self.stride != 1 else ""
        tail = {"none": "", "relu": " relu", "silu": " silu", "hswish": " hswish"}[self.act]
        return f"{self.channels}->{self.out} {self.size}{s}{tail}{' +res' if self.residual else ''}"


def _efficientnet() -> list[Pointwise]:
    rows: list[Pointwise] = []
    size, cin = 112, 32
    # (expand ratio, out, repeats, stride) of EfficientNet-B0's stages
    for ratio, cout, repeats, stride in (
        (1, 16, 1, 1), (6, 24, 2, 2), (6, 40, 2, 2), (6, 80, 3, 2), (6, 112, 3, 1),
        (6, 192, 4, 2), (6, 320, 1, 1),
    ):  # fmt: skip
        for i in range(repeats):
            hidden = cin * ratio
            if ratio != 1:
                rows.append(Pointwise("efficientnet_b0", cin, hidden, size, 1, "silu", False, 1))
            if i == 0:
                size //= stride
            residual = i > 0
            rows.append(Pointwise("efficientnet_b0", hidden, cout, size, 1, "none", residual, 1))
            cin = cout
    rows.append(Pointwise("efficientnet_b0", 320, 1280, 7, 1, "silu", False, 1))
    return rows


_MOBILENET = (  # kernel, expanded, out, squeeze-excite, hard-swish, stride (bench/models.py)
    (3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1),
)  # fmt: skip


def _mobilenet() -> list[Pointwise]:
    rows: list[Pointwise] = []
    size, cin = 112, 16
    for _, hidden, cout, _, hs, stride in _MOBILENET:
        act = "hswish" if hs else "relu"
        if hidden != cin:
            rows.append(Pointwise("mobilenet_v3", cin, hidden, size, 1, act, False, 1))
        size //= stride
        residual = stride == 1 and cin == cout
        rows.append(Pointwise("mobilenet_v3", hidden, cout, size, 1, "none", residual, 1))
        cin = cout
    rows.append(Pointwise("mobilenet_v3", 160, 960, 7, 1, "hswish", False, 1))
    return rows


def _resnet50() -> list[Pointwise]:
    rows: list[Pointwise] = []
    size, cin = 56, 64
    for width, repeats, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        out = 4 * width
        for i in range(repeats):
            # transformers' bottleneck: 1x1 reduce (stride 1), 3x3 (the stride), 1x1 expand
            rows.append(Pointwise("resnet50", cin, width, size, 1, "relu", False, 1))
            if i == 0:
                rows.append(Pointwise("resnet50", cin, out, size, stride, "none", False, 1))
                size //= stride
            rows.append(Pointwise("resnet50", width, out, size, 1, "relu", True, 1))
            cin = out
    return rows


def layers(models: list[str]) -> list[Pointwise]:
    """The distinct 1x1 convolutions of ``models``, with their counts."""
    every = {"efficientnet_b0": _efficientnet, "mobilenet_v3": _mobilenet, "resnet50": _resnet50}
    counts: dict[Pointwise, int] = {}
    for name in models:
        for row in every[name]():
            key = dataclasses.replace(row, count=1)
            counts[key] = counts.get(key, 0) + 1
    return [dataclasses.replace(key, count=n) for key, n in counts.items()]


def model(layer: Pointwise) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """The layer as an ONNX model, and its inputs."""
    g = OnnxGraph("pointwise")
    c, o, s = layer.channels, layer.out, layer.stride
    x = g.input("x", (1, c, layer.size, layer.size))
    side = (layer.size - 1) // s + 1
    w = RNG.standard_normal((o, c, 1, 1)) * (2.0 / c) ** 0.5
    b = RNG.standard_normal(o) * 0.1
    y = g.op("Conv", x, g.const(w.astype(np.float32)), g.const(b.astype(np.float32)),
             kernel_shape=[1, 1], strides=[s, s])  # fmt: skip
    inputs = [RNG.standard_normal((1, c, layer.size, layer.size)).astype(np.float32)]
    if layer.residual:
        r = g.input("r", (1, o, side, side))
        y = g.op("Add", y, r)
        inputs.append(RNG.standard_normal((1, o, side, side)).astype(np.float32))
    if layer.act == "relu":
        y = g.op("Relu", y)
    elif layer.act == "silu":
        y = g.op("Mul", y, g.op("Sigmoid", y))
    elif layer.act == "hswish":
        y = g.op("HardSwish", y)
    g.output(y, (1, o, side, side))
    return g.model(), inputs


def whole(args: argparse.Namespace, cache: Path) -> None:
    """Each model of ``--models`` whole, against onnxruntime (outputs checked first)."""
    from bench.models import zoo_case

    for name in args.models.split(","):
        case = zoo_case(name)
        assert isinstance(case.onnx, onnx.ModelProto)
        runs = pair(case.function, case.onnx, case.inputs, args.threads, cache, name)
        times = measure(runs, args.rounds, args.calls, args.cpu_time)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        best = {k: min(v) * 1e3 for k, v in times.items()}
        cells = " | ".join(f"{med[k]:.3f} ({best[k]:.3f})" for k in med)
        ratio = med["opgraph"] / med["onnxruntime"]
        print(f"| {name} | whole model | 1 | {cells} | {ratio:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="efficientnet_b0,mobilenet_v3,resnet50")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--only", default="", help="run the layers whose name contains this")
    parser.add_argument("--whole", action="store_true", help="also time the whole models")
    parser.add_argument(
        "--cpu-time", action="store_true", help="time the calling thread's CPU (1 thread only)"
    )
    args = parser.parse_args()
    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time measures the calling thread: use it with --threads 1")
    clock = "thread CPU time" if args.cpu_time else "wall time"
    print(f"load average {os.getloadavg()[0]:.2f}; threads {args.threads}; {clock}")
    totals: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        print("| model | layer | count | opgraph ms | onnxruntime ms | ratio |")
        print("|---|---|---|---|---|---|")
        for layer in layers(args.models.split(",")):
            if args.only not in layer.name:
                continue
            proto, arrays = model(layer)
            function = og.onnx.import_model(proto)
            runs = pair(function, proto, arrays, args.threads, Path(tmp), layer.name)
            times = measure(runs, args.rounds, args.calls, args.cpu_time)
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            best = {k: min(v) * 1e3 for k, v in times.items()}
            cells = " | ".join(f"{med[k]:.4f} ({best[k]:.4f})" for k in med)
            ratio = med["opgraph"] / med["onnxruntime"]
            print(f"| {layer.model} | {layer.name} | {layer.count} | {cells} | {ratio:.2f} |",
                  flush=True)  # fmt: skip
            total = totals.setdefault(layer.model, [0.0, 0.0])
            total[0] += layer.count * med["opgraph"]
            total[1] += layer.count * med["onnxruntime"]
        for name, (ours, theirs) in totals.items():
            print(f"| {name} | weighted sum | | {ours:.3f} | {theirs:.3f} | {ours / theirs:.2f} |")
        if args.whole:
            whole(args, Path(tmp))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
