"""Depthwise and grouped convolutions: the CPU backend's direct kernel against its previous
path (im2col and one GEMM per group) and onnxruntime, same threads, calls interleaved.

    python bench/depthwise.py [--threads 2] [--rounds 15] [--calls 20] [--only NAME[,NAME]]
                              [--old im2col|rows]

Every case is one ONNX model (convolutions with bias, as exported models have them), imported
into opgraph and run by onnxruntime. "opgraph old" compiles the same Function with the direct
kernel switched off (the lowering's ``_direct`` selection), so both opgraph columns are
measured in the same process; ``--old rows`` makes it the direct kernel without the
channel-blocked form of narrow planes (``DIRECT_BLOCKED_WIDTH`` 0: the row-wise vectors)
and max pools by rows, not whole planes (``windows.PLANE_MAX``).
Each round calls every runtime ``--calls`` times in turn; the table gives the median and
best per-call time over all rounds, and checks that the outputs agree with onnxruntime's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import onnx
import onnxruntime as ort

import opgraph as og
from bench.onnx_builder import OnnxGraph
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config
from opgraph.backends.cpu.codegen import windows
from opgraph.backends.fused.lowering import convolution

RNG = np.random.default_rng(0)


def _conv(g: OnnxGraph, x: str, c: int, o: int, k: int, stride: int, groups: int) -> str:
    w = RNG.standard_normal((o, c // groups, k, k)) * (2.0 / (k * k * c / groups)) ** 0.5
    b = RNG.standard_normal(o) * 0.1
    pads = [k // 2] * 4
    return g.op(
        "Conv",
        x,
        g.const(w.astype(np.float32)),
        g.const(b.astype(np.float32)),
        kernel_shape=[k, k],
        strides=[stride, stride],
        pads=pads,
        group=groups,
    )


def conv_case(
    c: int, size: int, k: int, stride: int, groups: int, o: int | None = None, relu: bool = True
) -> tuple[onnx.ModelProto, np.ndarray]:
    g = OnnxGraph("conv")
    x = g.input("x", (1, c, size, size))
    y = _conv(g, x, c, o or c, k, stride, groups)
    if relu:
        y = g.op("Relu", y)
    side = (size + 2 * (k // 2) - k) // stride + 1
    g.output(y, (1, o or c, side, side))
    return g.model(), RNG.standard_normal((1, c, size, size)).astype(np.float32)


def pool_case(c: int, size: int, k: int, stride: int) -> tuple[onnx.ModelProto, np.ndarray]:
    g = OnnxGraph("pool")
    x = g.input("x", (1, c, size, size))
    pads = [k // 2] * 4
    y = g.op("MaxPool", x, kernel_shape=[k, k], strides=[stride, stride], pads=pads)
    side = (size + 2 * (k // 2) - k) // stride + 1
    g.output(y, (1, c, side, side))
    return g.model(), RNG.standard_normal((1, c, size, size)).astype(np.float32)


def mobilenet_block(
    c: int = 24, size: int = 56, expand: int = 6
) -> tuple[onnx.ModelProto, np.ndarray]:
    """MobileNetV2 inverted residual: 1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 project,
    residual add."""
    g = OnnxGraph("mbv2")
    x = g.input("x", (1, c, size, size))
    hidden = c * expand
    lo, hi = g.const(np.float32(0)), g.const(np.float32(6))
    y = g.op("Clip", _conv(g, x, c, hidden, 1, 1, 1), lo, hi)
    y = g.op("Clip", _conv(g, y, hidden, hidden, 3, 1, hidden), lo, hi)
    y = g.op("Add", _conv(g, y, hidden, c, 1, 1, 1), x)
    g.output(y, (1, c, size, size))
    return g.model(), RNG.standard_normal((1, c, size, size)).astype(np.float32)


CASES: dict[str, Callable[[], tuple[onnx.ModelProto, np.ndarray]]] = {
    "dw3x3 144ch 56x56 s1": lambda: conv_case(144, 56, 3, 1, 144),
    "dw3x3 144ch 56x56 s2": lambda: conv_case(144, 56, 3, 2, 144),
    "dw3x3 32ch 112x112 s1": lambda: conv_case(32, 112, 3, 1, 32),
    "dw5x5 240ch 28x28 s1": lambda: conv_case(240, 28, 5, 1, 240),
    "dw5x5 240ch 28x28 s2": lambda: conv_case(240, 28, 5, 2, 240),
    "dw3x3 960ch 7x7 s1": lambda: conv_case(960, 7, 3, 1, 960),
    "dw3x3 64ch 112x112 s2": lambda: conv_case(64, 112, 3, 2, 64),
    "dw5x5 72ch 56x56 s2": lambda: conv_case(72, 56, 5, 2, 72),
    "dw5x5 960ch 7x7 s1": lambda: conv_case(960, 7, 5, 1, 960),
    "dw7x7 96ch 56x56 s1": lambda: conv_case(96, 56, 7, 1, 96),
    "dw7x7 192ch 28x28 s1": lambda: conv_case(192, 28, 7, 1, 192),
    "dw7x7 384ch 14x14 s1": lambda: conv_case(384, 14, 7, 1, 384),
    "dw7x7 768ch 7x7 s1": lambda: conv_case(768, 7, 7, 1, 768),
    "dw3x3 480ch 14x14 s1": lambda: conv_case(480, 14, 3, 1, 480),
    "dw5x5 672ch 14x14 s1": lambda: conv_case(672, 14, 5, 1, 672),
    "dw5x5 672ch 14x14 s2": lambda: conv_case(672, 14, 5, 2, 672),
    "dw3x3 1152ch 7x7 s1": lambda: conv_case(1152, 7, 3, 1, 1152),
    "dw3x3 72ch 13x13 s1 (odd)": lambda: conv_case(72, 13, 3, 1, 72),
    "maxpool 3x3 s2 64ch 112x112": lambda: pool_case(64, 112, 3, 2),
    "maxpool 3x3 s1 192ch 28x28": lambda: pool_case(192, 28, 3, 1),
    "maxpool 3x3 s2 256ch 56x56": lambda: pool_case(256, 56, 3, 2),
    "MobileNetV2 block 24->144->24 56x56": lambda: mobilenet_block(),
    "grouped 3x3 128ch 32g 56x56": lambda: conv_case(128, 56, 3, 1, 32),
    "grouped 3x3 256ch 32g 28x28": lambda: conv_case(256, 28, 3, 1, 32),
    "grouped 3x3 512ch 32g 14x14": lambda: conv_case(512, 14, 3, 1, 32),
    "grouped 3x3 1024ch 32g 7x7": lambda: conv_case(1024, 7, 3, 1, 32),
}


def _opgraph(
    model: onnx.ModelProto, threads: int, cache: Path, old: str
) -> Callable[[np.ndarray], object]:
    fn = og.onnx.import_model(model)
    config = CpuConfig(cache, default_config().compiler, num_threads=threads)
    backend = CpuBackend(config)
    if old == "rows":
        with (
            mock.patch.object(convolution, "DIRECT_BLOCKED_WIDTH", 0),
            mock.patch.object(windows, "PLANE_MAX", False),
        ):
            exe = backend.compile(fn)
    elif old == "im2col":
        with mock.patch.object(convolution, "_direct", lambda *args: False):
            exe = backend.compile(fn)
    else:
        exe = backend.compile(fn)

    def make(x: np.ndarray) -> Callable[[], object]:
        inputs = [backend.create_tensor(og.f32, x.shape, x.copy())]
        outputs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]

        def call() -> object:
            exe.call(outputs, inputs)
            return outputs[0].read()

        return call

    return make


def measure(
    name: str, threads: int, rounds: int, calls: int, cache: Path, old: str
) -> dict[str, list[float]]:
    model, x = CASES[name]()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    runs: dict[str, Callable[[], object]] = {
        "opgraph": _opgraph(model, threads, cache, "")(x),
        "opgraph old": _opgraph(model, threads, cache, old)(x),
        "onnxruntime": lambda: session.run(None, {"x": x})[0],
    }
    want = np.asarray(runs["onnxruntime"]())
    for key in ("opgraph", "opgraph old"):
        got = np.asarray(runs[key]())
        scale = float(np.max(np.abs(want))) + 1e-30
        error = float(np.max(np.abs(got - want))) / scale
        if error > 1e-4:
            raise SystemExit(f"{name}: {key} differs from onnxruntime by {error:.2e} of the scale")
    times: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            for _ in range(calls):
                started = time.perf_counter()
                run()
                times[key].append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument(
        "--only", default="", help="run the cases whose name contains this (or one of a,b)"
    )
    parser.add_argument(
        "--old",
        choices=("im2col", "rows"),
        default="im2col",
        help="the 'opgraph old' column: im2col and GEMM, or the direct kernel without the "
        "channel-blocked form",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(
            f"threads {args.threads}; per-call ms, median (best) over "
            f"{args.rounds} interleaved rounds of {args.calls} calls"
        )
        print("| case | opgraph | opgraph old | onnxruntime | old / new | new / ort |")
        print("|---|---|---|---|---|---|")
        for name in CASES:
            if not any(part in name for part in args.only.split(",")):
                continue
            times = measure(name, args.threads, args.rounds, args.calls, Path(tmp), args.old)
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            best = {k: min(v) * 1e3 for k, v in times.items()}
            cells = [f"{med[k]:.3f} ({best[k]:.3f})" for k in times]
            ratio_old = med["opgraph old"] / med["opgraph"]
            ratio_ort = med["opgraph"] / med["onnxruntime"]
            print(
                f"| {name} | {' | '.join(cells)} | {ratio_old:.2f} | {ratio_ort:.2f} |", flush=True
            )


if __name__ == "__main__":
    main()
