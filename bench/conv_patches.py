"""Convolutions on their patch matrix (``PointwiseConvStep`` with ``compact`` patches, see
``fused/lowering/pointwise.py``) against the path they took before (im2col blocks and
OpenBLAS, ``ConvStep``) and onnxruntime, one layer at a time.

    python bench/conv_patches.py [--threads 1] [--cpu-time] [--rounds 6] [--calls 8]
                                 [--only NAME]

Layers: the ResNet stems (7x7 stride 2 at 224x224; CIFAR's 3x3 at batch 32), the stride-2
3x3 convolutions of ResNet-50 and ResNet-18 (batch 1), CIFAR's (batch 32), and Whisper-tiny's
two Conv1d layers with GELU. Each is one ONNX model (Conv with bias, then ReLU; GELU for
Whisper's) imported into opgraph twice: as it compiles now ("patches") and with
``PATCH_FLOATS`` set to 0 at compile time ("before"); all three run in one process, calls
interleaved (``bench/resnet_layers.py``'s ``measure``), outputs checked against
onnxruntime's (1e-4 of the output scale).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import onnx

import opgraph as og
from bench.onnx_builder import OnnxGraph
from bench.resnet_layers import measure, pair
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config
from opgraph.backends.fused.lowering import pointwise

RNG = np.random.default_rng(0)

#: name: (batch, channels, out, (height, width), kernel, stride, activation)
LAYERS: dict[str, tuple[int, int, int, tuple[int, int], int, int, str]] = {
    "stem 7x7 s2 224": (1, 3, 64, (224, 224), 7, 2, "Relu"),
    "r50 128 3x3 s2 56": (1, 128, 128, (56, 56), 3, 2, "Relu"),
    "r50 256 3x3 s2 28": (1, 256, 256, (28, 28), 3, 2, "Relu"),
    "r50 512 3x3 s2 14": (1, 512, 512, (14, 14), 3, 2, "Relu"),
    "r18 64->128 3x3 s2 56": (1, 64, 128, (56, 56), 3, 2, "Relu"),
    "cifar stem 3x3 b32": (32, 3, 64, (32, 32), 3, 1, "Relu"),
    "cifar 64->128 3x3 s2 b32": (32, 64, 128, (32, 32), 3, 2, "Relu"),
    "cifar 128->256 3x3 s2 b32": (32, 128, 256, (16, 16), 3, 2, "Relu"),
    "cifar 256->512 3x3 s2 b32": (32, 256, 512, (8, 8), 3, 2, "Relu"),
    "whisper conv1 80->384 k3": (1, 80, 384, (1, 3000), 3, 1, "Gelu"),
    "whisper conv2 384 k3 s2": (1, 384, 384, (1, 3000), 3, 2, "Gelu"),
}


def model(name: str) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    n, c, o, (h, w), k, s, act = LAYERS[name]
    one_d = h == 1
    g = OnnxGraph("layer")
    shape = (n, c, w) if one_d else (n, c, h, w)
    x = g.input("x", shape)
    kernel = [k] if one_d else [k, k]
    weights = RNG.standard_normal((o, c, *kernel)) * (2.0 / (k * len(kernel) * c)) ** 0.5
    bias = RNG.standard_normal(o) * 0.1
    pad = k // 2
    w, b = g.const(weights.astype(np.float32)), g.const(bias.astype(np.float32))
    y = g.op(
        "Conv",
        x,
        w,
        b,
        kernel_shape=kernel,
        strides=[s] * len(kernel),
        pads=[pad] * 2 * len(kernel),
    )
    if act == "Gelu":  # erf form, as exported (opset 17 has no Gelu)
        half = g.op("Mul", y, g.const(np.array(0.5, np.float32)))
        erf = g.op("Erf", g.op("Div", y, g.const(np.array(2**0.5, np.float32))))
        y = g.op("Mul", half, g.op("Add", erf, g.const(np.array(1.0, np.float32))))
    else:
        y = g.op(act, y)
    side = [(d + 2 * pad - k) // s + 1 for d in shape[2:]]
    g.output(y, (n, o, *side))
    return g.model(), [RNG.standard_normal(shape).astype(np.float32)]


def runners(name: str, threads: int, cache: Path) -> dict[str, Callable[[], object]]:
    proto, arrays = model(name)
    runs = pair(og.onnx.import_model(proto), proto, arrays, threads, cache, name)
    saved = pointwise.PATCH_FLOATS
    pointwise.PATCH_FLOATS = 0
    try:
        before = CpuBackend(CpuConfig(cache, default_config().compiler, num_threads=threads))
        exe = before.compile(og.onnx.import_model(proto))
    finally:
        pointwise.PATCH_FLOATS = saved
    return {
        "patches": runs["opgraph"],
        "before": lambda: exe(*arrays),
        "onnxruntime": runs["onnxruntime"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--only", default="", help="the layers whose name contains this")
    parser.add_argument("--cpu-time", action="store_true", help="thread CPU time (1 thread)")
    args = parser.parse_args()
    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time measures the calling thread: use it with --threads 1")
    clock = "thread CPU time" if args.cpu_time else "wall time"
    print(f"load average {os.getloadavg()[0]:.2f}; threads {args.threads}; {clock}; ms median")
    print("| layer | patches | before | onnxruntime | patches / before | patches / ort |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(os.environ.get("OPGRAPH_CACHE_DIR", tmp))
        for name in LAYERS:
            if args.only not in name:
                continue
            runs = runners(name, args.threads, cache)
            times = measure(runs, args.rounds, args.calls, args.cpu_time)
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            print(
                f"| {name} | {med['patches']:.3f} | {med['before']:.3f} | "
                f"{med['onnxruntime']:.3f} | {med['patches'] / med['before']:.2f} | "
                f"{med['patches'] / med['onnxruntime']:.2f} |",
                flush=True,
            )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
