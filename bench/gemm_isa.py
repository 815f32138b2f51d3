"""Products by a constant weight matrix on each instruction set (``CpuConfig.isa``).

    python bench/gemm_isa.py [--rows 128] [--inner 768] [--cols 768] [--rounds 7]

Times ``x (rows x inner) @ W (inner x cols)`` with W a Constant (opgraph's generated panel
GEMM) for each ISA this CPU can run, with W a Parameter (OpenBLAS), and in onnxruntime with W
an initializer; every runtime on the same number of threads, interleaved round by round.
Prints each one's median and best per call.
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph import ops  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402
from opgraph.backends.cpu.config import ISA_FLAGS, supports_isa  # noqa: E402


def opgraph_runner(config: CpuConfig, a: np.ndarray, w: np.ndarray, constant: bool) -> Callable:
    backend = CpuBackend(config)
    x = og.parameter(og.f32, a.shape)
    if constant:
        fn = og.Function([ops.matmul(x, og.constant(w))], [x])
        args = [backend.create_tensor(og.f32, a.shape, a)]
    else:
        wp = og.parameter(og.f32, w.shape)
        fn = og.Function([ops.matmul(x, wp)], [x, wp])
        args = [
            backend.create_tensor(og.f32, a.shape, a),
            backend.create_tensor(og.f32, w.shape, w),
        ]
    exe = backend.compile(fn)
    out = [backend.create_tensor(og.f32, (a.shape[0], w.shape[1]))]
    exe.call(out, args)
    np.testing.assert_allclose(out[0].read(), a @ w, rtol=1e-3, atol=1e-3)
    return lambda: exe.call(out, args)


def onnxruntime_runner(
    a: np.ndarray, w: np.ndarray, threads: int = THREADS
) -> Callable[[], object]:
    """onnxruntime's MatMul of ``a`` by ``w`` held as an initializer (a constant weight)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [a.shape[0], w.shape[1]])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": a})


def measure(runners: dict[str, Callable], rounds: int, block: float) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for r in range(rounds):
        names = list(runners)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = runners[name]
            run()
            started = time.perf_counter()
            while time.perf_counter() - started < block:
                t0 = time.perf_counter_ns()
                run()
                samples[name].append((time.perf_counter_ns() - t0) * 1e-9)
            time.sleep(0.05)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--inner", type=int, default=768)
    parser.add_argument("--cols", type=int, default=768)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--block", type=float, default=0.2, help="seconds per runtime per round")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.rows, args.inner)).astype(np.float32)
    w = rng.standard_normal((args.inner, args.cols)).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="opgraph-gemm-isa-") as tmp:
        base = CpuConfig(Path(tmp), default_config().compiler, num_threads=THREADS)
        runners = {
            f"opgraph constant W, isa={isa}": opgraph_runner(
                dataclasses.replace(base, isa=isa), a, w, True
            )
            for isa in ISA_FLAGS
            if supports_isa(isa)
        }
        runners["opgraph Parameter W (OpenBLAS)"] = opgraph_runner(base, a, w, False)
        runners["onnxruntime (W initializer)"] = onnxruntime_runner(a, w)
        samples = measure(runners, args.rounds, args.block)
    print(f"{args.rows}x{args.inner} @ {args.inner}x{args.cols}, {THREADS} threads")
    for name, times in samples.items():
        median, best = statistics.median(times) * 1e3, min(times) * 1e3
        print(f"  {name:36s} median {median:8.3f} ms   best {best:8.3f} ms   ({len(times)} runs)")
    print(f"load average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
