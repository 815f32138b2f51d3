"""Size and save/load time of a ResNet-18-shaped Function (about 11.7 M f32 weights held in
Constants). Not a test (tests never time anything): run it by hand for the numbers.

    python tests/serialize/measure_resnet_sized.py [--repeat 5] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.serialize import load, save


def resnet18_shaped(image: int = 64) -> og.Function:
    """Convolutions with folded batch norm (a per-channel bias), basic residual blocks
    (64-128-256-512), max pooling, global average pooling and a 1000-way classifier."""
    rng = np.random.default_rng(0)

    def weight(*shape: int) -> og.Output:
        fan_in = int(np.prod(shape[1:]))
        return og.constant(rng.standard_normal(shape, dtype=np.float32) / float(np.sqrt(fan_in)))

    def conv(x: og.Output, out: int, k: int, stride: int = 1) -> og.Output:
        pad = (k // 2, k // 2)
        y = ops.convolution(x, weight(out, x.shape[1], k, k), (stride, stride), None, pad, pad)
        bias = ops.broadcast(weight(out), y.shape, (0, 2, 3))
        return ops.add(y, bias)

    def block(x: og.Output, out: int, stride: int) -> og.Output:
        y = ops.relu(conv(x, out, 3, stride))
        y = conv(y, out, 3)
        shortcut = conv(x, out, 1, stride) if stride != 1 or x.shape[1] != out else x
        return ops.relu(ops.add(y, shortcut))

    x = og.parameter(og.f32, (1, 3, image, image), name="image")
    y = ops.relu(conv(x, 64, 7, 2))
    y = ops.max_pool(y, (3, 3), (2, 2), (1, 1), (1, 1))
    for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        y = block(block(y, out, stride), out, 1)
    pooled = ops.reduce_mean(y, (2, 3))
    logits = ops.add(ops.dot(pooled, weight(512, 1000)), ops.broadcast(weight(1000), (1, 1000)))
    return og.Function([logits], [x], name="resnet18_shaped")


def best_of(repeat: int, action: Callable[[], object]) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to write the file (default: a tmp dir)")
    args = parser.parse_args()
    fn = resnet18_shaped()
    weights = sum(n.op.value.size for n in fn.nodes if isinstance(n.op, og.ops.Constant))
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        path = os.path.join(directory, "resnet18_shaped.opgraph")
        save_best, save_median = best_of(args.repeat, lambda: save(fn, path))
        load_best, load_median = best_of(args.repeat, lambda: load(path))
        size = os.path.getsize(path)
        loaded = load(path)
        assert str(loaded) == str(fn)
    print(f"nodes {len(fn.nodes)}, f32 weights {weights:,} ({weights * 4 / 1e6:.1f} MB)")
    print(f"file size {size:,} bytes ({size / 1e6:.1f} MB, {size / (weights * 4):.4f}x the data)")
    print(f"save: best {save_best * 1e3:.0f} ms, median {save_median * 1e3:.0f} ms")
    print(f"load: best {load_best * 1e3:.0f} ms, median {load_median * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
