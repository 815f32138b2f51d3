"""Time the native gathers and CumSum against the reference fallback and onnxruntime.

    python bench/indexing.py [--runs 20] [--threads 2]

Cases: an embedding lookup (a constant 30522x768 f32 table, 8x128 i64 ids: BERT-base's
word embeddings), GatherElements of a 1024x1024 f32 matrix along its rows, GatherND of
65536 (row, column) pairs from a 512x512x64 f32 array, CumSum over 2^20 f32 values (one
sequential chain) and CumSum along each axis of a 1024x1024 f32 matrix. Each line gives the
median and best of ``--runs`` calls (``exe.call_unchecked`` on tensors made once) for the
native CPU code, the same Function with the op forced back to its reference kernel inside
the CPU plan (what ran before these lowerings), and onnxruntime (the same op in an ONNX model,
``--threads`` intra-op threads). Outputs are compared first.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.fused.lowering import GATHERS, STEP_OPS
from opgraph.ops.ordering import CumSum


@dataclasses.dataclass
class Case:
    name: str
    fn: og.Function
    args: list[np.ndarray]
    onnx_op: str
    onnx_attrs: dict[str, Any]
    constant_data: bool = False  # the ONNX model holds the data as an initializer


def cases() -> list[Case]:
    rng = np.random.default_rng(0)
    table = rng.standard_normal((30522, 768), dtype=np.float32)
    ids = rng.integers(0, 30522, (8, 128))
    embed_ids = og.parameter(og.i64, ids.shape, "ids")
    embed = og.Function([ops.gather(og.constant(table), embed_ids, 0)], [embed_ids], "embed")

    m = rng.standard_normal((1024, 1024), dtype=np.float32)
    rows = rng.integers(-1024, 1024, (1024, 1024))
    mx, mi = og.parameter(og.f32, m.shape, "x"), og.parameter(og.i64, rows.shape, "i")
    elements = og.Function([ops.gather_elements(mx, mi, 1)], [mx, mi], "gather_elements")

    cube = rng.standard_normal((512, 512, 64), dtype=np.float32)
    pairs = rng.integers(0, 512, (65536, 2))
    cx, ci = og.parameter(og.f32, cube.shape, "x"), og.parameter(og.i64, pairs.shape, "i")
    nd = og.Function([ops.gather_nd(cx, ci)], [cx, ci], "gather_nd")

    flat = rng.standard_normal(1 << 20, dtype=np.float32)
    fx = og.parameter(og.f32, flat.shape, "x")
    scan = og.Function([ops.cumsum(fx, 0)], [fx], "cumsum_1m")
    out = [
        Case("embedding 30522x768, ids 8x128", embed, [ids], "Gather", {"axis": 0}, True),
        Case("gather_elements 1024x1024", elements, [m, rows], "GatherElements", {"axis": 1}),
        Case("gather_nd 512x512x64, 65536 pairs", nd, [cube, pairs], "GatherND", {}),
        Case("cumsum 2^20", scan, [flat], "CumSum", {}),
    ]
    for axis in (0, 1):
        sx = og.parameter(og.f32, m.shape, "x")
        fn = og.Function([ops.cumsum(sx, axis)], [sx], f"cumsum_axis{axis}")
        out.append(Case(f"cumsum 1024x1024 axis {axis}", fn, [m], "CumSum", {"axis": axis}))
    return out


@contextlib.contextmanager
def reference_fallbacks() -> Iterator[None]:
    """Compile as before the native lowerings: the gathers and CumSum unregistered (the
    registries' private tables are patched for the duration: a benchmark-only measure)."""
    saved_gathers, saved_steps = dict(GATHERS._items), dict(STEP_OPS._items)
    GATHERS._items.clear()
    del STEP_OPS._items[CumSum]
    try:
        yield
    finally:
        GATHERS._items.update(saved_gathers)
        STEP_OPS._items.clear()
        STEP_OPS._items.update(saved_steps)


def timed(call: Callable[[], Any], runs: int) -> tuple[float, float]:
    call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def opgraph_call(backend: CpuBackend, case: Case) -> tuple[Callable[[], Any], np.ndarray]:
    exe = backend.compile(case.fn)
    inputs = []
    for p, a in zip(case.fn.parameters, case.args, strict=True):
        t = backend.create_tensor(p.element_type, p.shape)
        t.write(a)
        inputs.append(t)
    result = case.fn.results[0]
    out = backend.create_tensor(result.element_type, result.shape)
    exe.call([out], inputs)
    return lambda: exe.call_unchecked([out], inputs), out.read()


def onnx_call(case: Case, threads: int) -> tuple[Callable[[], Any], np.ndarray] | None:
    try:
        import onnx
        import onnxruntime as ort
        from onnx import helper, numpy_helper
    except ImportError:
        return None
    names = [f"in{i}" for i in range(len(case.fn.parameters))]
    feeds = dict(zip(names, case.args, strict=True))
    inputs, initializers = list(names), []
    if case.constant_data:  # the embedding table is a weight
        data = case.fn.results[0].node.inputs[0].node.op.value  # type: ignore[attr-defined]
        initializers.append(numpy_helper.from_array(data, "table"))
        inputs = ["table", *names]
    if case.onnx_op == "CumSum":
        initializers.append(numpy_helper.from_array(np.array(case.onnx_attrs.get("axis", 0)), "ax"))
        inputs.append("ax")
        attrs: dict[str, Any] = {}
    else:
        attrs = case.onnx_attrs
    node = helper.make_node(case.onnx_op, inputs, ["y"], **attrs)
    result = case.fn.results[0]
    graph = helper.make_graph(
        [node],
        case.name,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in feeds.items()
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, result.shape)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return lambda: session.run(None, feeds), session.run(None, feeds)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    backend = CpuBackend(dataclasses.replace(default_config(), num_threads=args.threads))
    print(f"{'case':36} {'native ms':>18} {'fallback ms':>18} {'onnxruntime ms':>18}")
    for case in cases():
        native, want = opgraph_call(backend, case)
        with reference_fallbacks():
            fallback, got = opgraph_call(backend, case)
        np.testing.assert_array_equal(got, want)
        row = [timed(native, args.runs), timed(fallback, args.runs)]
        peer = onnx_call(case, args.threads)
        if peer is not None:
            np.testing.assert_allclose(peer[1], want, rtol=1e-6, atol=1e-6)
            row.append(timed(peer[0], args.runs))
        cells = [f"{med * 1e3:8.3f} ({best * 1e3:7.3f})" for med, best in row]
        print(f"{case.name:36} " + " ".join(f"{c:>18}" for c in cells), flush=True)
    print("median (best) of", args.runs, "calls each; threads:", args.threads)


if __name__ == "__main__":
    main()
