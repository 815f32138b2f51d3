"""Fused attention (``softmax(q·kᵀ * scale) · v`` per head) against the unfused steps and
onnxruntime.

    python bench/attention.py [--rounds 7] [--block 0.2]

Each case is BERT's layout: q, k, v of shape (1, tokens, heads x 64) split into heads by
views, the context merged back. "opgraph fused" is the graph as written (one AttentionStep);
"opgraph unfused" scales the scores by a Parameter holding the same value, which the
attention pattern does not match (a constant factor), so the chain runs as before: a batched
GEMM, the softmax row kernel, a second batched GEMM. Every runtime on the same number of
threads, interleaved round by round; medians and best per call.
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import opgraph as og  # noqa: E402
from bench.gemm_isa import measure  # noqa: E402
from bench.onnx_builder import OnnxGraph  # noqa: E402
from opgraph import ops  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402
from opgraph.backends.fused.lowering.attention import AttentionStep  # noqa: E402

HEAD = 64
CASES = {"BERT-base 1x128": (128, 12), "ViT-B/16 1x197": (197, 12), "BERT-base 1x512": (512, 12)}


def _function(tokens: int, heads: int, fused: bool) -> og.Function:
    width = heads * HEAD
    q, k, v = (og.parameter(og.f32, (1, tokens, width), n) for n in "qkv")

    def split(x: og.Output, perm: tuple[int, ...]) -> og.Output:
        return ops.transpose(ops.reshape(x, (1, tokens, heads, HEAD)), perm)

    scores = ops.matmul(split(q, (0, 2, 1, 3)), split(k, (0, 2, 3, 1)))
    params = [q, k, v]
    if fused:
        scores = scores * (1.0 / math.sqrt(HEAD))
    else:
        factor = og.parameter(og.f32, (), "scale")
        scores = ops.multiply(scores, ops.broadcast_to(factor, scores.shape))
        params.append(factor)
    context = ops.matmul(ops.softmax(scores, -1), split(v, (0, 2, 1, 3)))
    merged = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (1, tokens, width))
    return og.Function([merged], params)


def _onnx(tokens: int, heads: int) -> bytes:
    width = heads * HEAD
    g = OnnxGraph("attention")
    q, k, v = (g.input(n, (1, tokens, width)) for n in "qkv")
    split = g.const(np.array([1, tokens, heads, HEAD], np.int64))

    def heads_of(x: str, perm: list[int]) -> str:
        return g.op("Transpose", g.op("Reshape", x, split), perm=perm)

    scale = g.const(np.array(1.0 / math.sqrt(HEAD), np.float32))
    scores = g.op(
        "Mul", g.op("MatMul", heads_of(q, [0, 2, 1, 3]), heads_of(k, [0, 2, 3, 1])), scale
    )
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), heads_of(v, [0, 2, 1, 3]))
    merged = g.op(
        "Reshape",
        g.op("Transpose", context, perm=[0, 2, 1, 3]),
        g.const(np.array([1, tokens, width], np.int64)),
    )
    g.output(merged, (1, tokens, width))
    return g.model().SerializeToString()


def runners(config: CpuConfig, tokens: int, heads: int) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, tokens, heads * HEAD)).astype(np.float32) for _ in "qkv"]
    backend = CpuBackend(config)
    found: dict[str, Callable[[], object]] = {}
    results = []
    for fused in (True, False):
        exe = backend.compile(_function(tokens, heads, fused))
        steps = exe.program.steps  # type: ignore[attr-defined]
        assert any(isinstance(s, AttentionStep) for s in steps) == fused
        args = [*data] if fused else [*data, np.array(1.0 / math.sqrt(HEAD), np.float32)]
        tensors = [backend.create_tensor(og.f32, a.shape, a) for a in args]
        out = [backend.create_tensor(og.f32, data[0].shape)]
        exe.call(out, tensors)
        results.append(out[0].read())
        found[f"opgraph {'fused' if fused else 'unfused'}"] = (
            lambda exe=exe, out=out, tensors=tensors: exe.call(out, tensors)
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(_onnx(tokens, heads), options, ["CPUExecutionProvider"])
    feed = dict(zip("qkv", data, strict=True))
    want = session.run(None, feed)[0]
    for got in results:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    found["onnxruntime"] = lambda: session.run(None, feed)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--block", type=float, default=0.2, help="seconds per runtime per round")
    args = parser.parse_args()
    print(f"load average at start: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="opgraph-attention-") as tmp:
        config = CpuConfig(Path(tmp), default_config().compiler, num_threads=THREADS)
        for name, (tokens, heads) in CASES.items():
            samples = measure(runners(config, tokens, heads), args.rounds, args.block)
            print(f"{name} ({heads} heads of {HEAD}), {THREADS} threads")
            for runtime, times in samples.items():
                median, best = statistics.median(times) * 1e3, min(times) * 1e3
                print(f"  {runtime:18s} median {median:7.3f} ms   best {best:7.3f} ms")
    print(f"load average at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
