"""ResNet-18's convolution layers one at a time in bf16: opgraph against OpenVINO's bf16.

    python bench/bf16_layers.py [--only NAME] [--rounds 8] [--calls 10] [--model imagenet|cifar]

The layers of ``bench/resnet_layers.py`` (Conv with bias, then ReLU or the residual add and
ReLU), each compiled by opgraph with ``precision="bf16"`` and by OpenVINO with
``INFERENCE_PRECISION_HINT`` bf16, both on one thread, calls interleaved round by round;
the figures are each runtime's minimum thread CPU time per call (``time.thread_time``: time
descheduled is not counted) and their ratio, with the load average. Outputs are checked
against OpenVINO's bf16 output (within 3e-2 of its scale: both round to bf16).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

import opgraph as og
from bench import resnet_layers, runners
from bench.models import Case
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config


def _case(layer: resnet_layers.Layer) -> Case:
    proto, arrays = resnet_layers.model(layer)
    return Case(layer.name, "layer", og.onnx.import_model(proto), proto, arrays, lambda: None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="imagenet", choices=["imagenet", "cifar"])
    parser.add_argument("--only", default="", help="run the layers whose name contains this")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR", tempfile.mkdtemp()))
    config = CpuConfig(cache, default_config().compiler, num_threads=1)
    for layer in resnet_layers.layers(args.model == "cifar"):
        if args.only not in layer.name:
            continue
        case = _case(layer)
        exe = CpuBackend(config).compile(case.function, precision="bf16")
        arrays = [a.copy() for a in case.inputs]
        peer = runners.openvino(case, 1, "bf16")
        want = np.asarray(peer.outputs()[0])
        got = np.asarray(exe(*arrays)[0])
        error = float(np.max(np.abs(got - want))) / (float(np.max(np.abs(want))) + 1e-30)
        if error > 3e-2:
            raise SystemExit(f"{layer.name}: opgraph bf16 differs from OpenVINO's by {error:.2e}")
        runs = {"opgraph": lambda exe=exe, arrays=arrays: exe(*arrays), "openvino": peer.run}
        times = resnet_layers.measure(runs, args.rounds, args.calls, cpu=True)
        best = {key: min(values) for key, values in times.items()}
        print(
            f"{layer.name:24s} opgraph {best['opgraph'] * 1e3:7.3f} ms  "
            f"openvino {best['openvino'] * 1e3:7.3f} ms  "
            f"ratio {best['opgraph'] / best['openvino']:.3f}  error {error:.1e}  "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
