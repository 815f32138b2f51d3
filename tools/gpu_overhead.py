"""Where the host time of one small GPU call goes: cProfile over many calls of ``(a+b)*c``
on 32x32 device tensors (``python tools/gpu_overhead.py``; needs a CUDA device)."""

from __future__ import annotations

import cProfile
import pstats
import time

import numpy as np

import opgraph as og


def main() -> None:
    backend = og.backend("GPU")
    a, b, c = (og.parameter(og.f32, (32, 32), n) for n in "abc")
    exe = backend.compile(og.Function([(a + b) * c], [a, b, c], name="w1"))
    inputs = [backend.create_tensor(og.f32, (32, 32)) for _ in range(3)]
    for t in inputs:
        t.write(np.ones((32, 32), np.float32))
    out = [backend.create_tensor(og.f32, (32, 32))]
    for _ in range(200):
        exe.call(out, inputs)
    started = time.perf_counter()
    for _ in range(2000):
        exe.call(out, inputs)
    print(f"{(time.perf_counter() - started) / 2000 * 1e6:.1f} us per call, unprofiled")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        exe.call(out, inputs)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
