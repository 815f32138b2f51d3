"""Time the native ArgMax, TopK, scatters, OneHot and Pad against the reference fallback and
onnxruntime.

    python bench/selection.py [--runs 20] [--threads 2]

Cases (f32 data): ArgMax over the last axis of 256x32000 logits (a language model's next
tokens), TopK 50 of 64x32000 logits (top-k sampling), ScatterElements of 1024x64 updates
into a 1024x1024 matrix along its rows, ScatterND with add of 2048 rows of 256 into a
4096x256 table (an embedding gradient: duplicate rows), OneHot of 8x128 ids to depth 1024,
and Pad of an 8x64x56x56 image by 1 on H and W, constant and reflect. Each line gives the
median and best of ``--runs`` calls (``exe.call_unchecked`` on tensors made once) for the
native CPU code, the same Function with the op forced back to its reference kernel inside
the CPU plan (what ran before these lowerings), and onnxruntime (the same op in an ONNX
model, ``--threads`` intra-op threads), then the ratios native/fallback and
native/onnxruntime. Outputs are compared first.
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
from opgraph.backends.fused.lowering import REWRITES, STEP_OPS
from opgraph.ops.indexing import OneHot, ScatterElements, ScatterND
from opgraph.ops.ordering import ArgMax, TopK
from opgraph.ops.rearrange import Pad


@dataclasses.dataclass
class Case:
    name: str
    fn: og.Function
    args: list[np.ndarray]
    onnx_op: str
    onnx_attrs: dict[str, Any]
    constants: list[np.ndarray]  # extra ONNX inputs, as initializers (k, depth, pads, …)


def cases() -> list[Case]:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((256, 32000), dtype=np.float32)
    lx = og.parameter(og.f32, logits.shape, "x")
    arg = og.Function([ops.arg_max(lx, -1)], [lx], "arg_max")

    top = logits[:64]
    tx = og.parameter(og.f32, top.shape, "x")
    values, _ = ops.top_k(tx, 50, -1)
    topk = og.Function([values], [tx], "top_k")

    m = rng.standard_normal((1024, 1024), dtype=np.float32)
    cols = np.stack([rng.permutation(1024)[:64] for _ in range(1024)])
    upd = rng.standard_normal((1024, 64), dtype=np.float32)
    sx, si, su = (og.parameter(og.f32, m.shape), og.parameter(og.i64, cols.shape),
                  og.parameter(og.f32, upd.shape))  # fmt: skip
    elements = og.Function([ops.scatter_elements(sx, si, su, 1)], [sx, si, su], "scatter_el")

    table = rng.standard_normal((4096, 256), dtype=np.float32)
    rows = rng.integers(0, 4096, (2048, 1))
    grads = rng.standard_normal((2048, 256), dtype=np.float32)
    nx, ni, nu = (og.parameter(og.f32, table.shape), og.parameter(og.i64, rows.shape),
                  og.parameter(og.f32, grads.shape))  # fmt: skip
    nd = og.Function([ops.scatter_nd(nx, ni, nu, "add")], [nx, ni, nu], "scatter_nd")

    ids = rng.integers(0, 1024, (8, 128))
    oi = og.parameter(og.i64, ids.shape)
    hot = og.Function([ops.one_hot(oi, 1024)], [oi], "one_hot")

    image = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
    pads = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)
    out = [
        Case("arg_max 256x32000", arg, [logits], "ArgMax", {"axis": -1, "keepdims": 0}, []),
        Case("top_k 50 of 64x32000", topk, [top], "TopK", {}, [np.array([50])]),
        Case(
            "scatter_elements 1024x1024",
            elements,
            [m, cols, upd],
            "ScatterElements",
            {"axis": 1},
            [],
        ),
        Case(
            "scatter_nd add 4096x256",
            nd,
            [table, rows, grads],
            "ScatterND",
            {"reduction": "add"},
            [],
        ),
        Case(
            "one_hot 8x128 depth 1024",
            hot,
            [ids],
            "OneHot",
            {},
            [np.array(1024), np.array([0.0, 1.0], np.float32)],
        ),
    ]
    for mode in ("constant", "reflect"):
        px = og.parameter(og.f32, image.shape)
        fn = og.Function([ops.pad(px, (0, 0, 1, 1), (0, 0, 1, 1), mode)], [px], f"pad_{mode}")
        out.append(Case(f"pad {mode} 8x64x56x56", fn, [image], "Pad", {"mode": mode}, [pads]))
    return out


@contextlib.contextmanager
def reference_fallbacks() -> Iterator[None]:
    """Compile as before the native lowerings: these ops unregistered (the registries'
    private tables are patched for the duration: a benchmark-only measure)."""
    saved_steps, saved_rewrites = dict(STEP_OPS._items), dict(REWRITES._items)
    for cls in (ArgMax, TopK, ScatterElements, ScatterND, Pad):
        del STEP_OPS._items[cls]
    del REWRITES._items[OneHot]
    try:
        yield
    finally:
        STEP_OPS._items.clear()
        STEP_OPS._items.update(saved_steps)
        REWRITES._items.clear()
        REWRITES._items.update(saved_rewrites)


def timed(call: Callable[[], Any], runs: int) -> tuple[float, float]:
    call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def opgraph_call(backend: CpuBackend, case: Case) -> tuple[Callable[[], Any], np.ndarray, Any]:
    exe = backend.compile(case.fn)
    inputs = []
    for p, a in zip(case.fn.parameters, case.args, strict=True):
        t = backend.create_tensor(p.element_type, p.shape)
        t.write(a)
        inputs.append(t)
    result = case.fn.results[0]
    out = backend.create_tensor(result.element_type, result.shape)
    exe.call([out], inputs)
    return lambda: exe.call_unchecked([out], inputs), out.read(), exe


def onnx_call(case: Case, threads: int) -> tuple[Callable[[], Any], np.ndarray] | None:
    try:
        import onnxruntime as ort
        from onnx import helper, numpy_helper
    except ImportError:
        return None
    names = [f"in{i}" for i in range(len(case.fn.parameters))]
    feeds = dict(zip(names, case.args, strict=True))
    extra = [f"c{i}" for i in range(len(case.constants))]
    initializers = [
        numpy_helper.from_array(c, n) for c, n in zip(case.constants, extra, strict=True)
    ]
    outputs = ["y", "y_indices"] if case.onnx_op == "TopK" else ["y"]
    node = helper.make_node(case.onnx_op, names + extra, outputs, **case.onnx_attrs)
    result = case.fn.results[0]
    graph = helper.make_graph(
        [node],
        case.name,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in feeds.items()
        ],
        [
            helper.make_tensor_value_info(
                "y", helper.np_dtype_to_tensor_dtype(result.element_type.dtype), result.shape
            )
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return lambda: session.run(["y"], feeds), session.run(["y"], feeds)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    backend = CpuBackend(dataclasses.replace(default_config(), num_threads=args.threads))
    head = ["native ms", "fallback ms", "onnxruntime ms", "/fallback", "/ort"]
    print(f"{'case':28} " + " ".join(f"{h:>18}" for h in head[:3]) + f" {head[3]:>9} {head[4]:>6}")
    for case in cases():
        native, want, exe = opgraph_call(backend, case)
        assert exe.fallback_ops() == [], exe.fallback_ops()
        with reference_fallbacks():
            fallback, got, old = opgraph_call(backend, case)
        assert old.fallback_ops(), "the forced fallback did not fall back"
        np.testing.assert_array_equal(got, want)
        row = [timed(native, args.runs), timed(fallback, args.runs)]
        peer = onnx_call(case, args.threads)
        if peer is not None:
            np.testing.assert_allclose(peer[1], want, rtol=1e-6, atol=1e-6)
            row.append(timed(peer[0], args.runs))
        cells = [f"{med * 1e3:8.3f} ({best * 1e3:7.3f})" for med, best in row]
        ratios = [row[0][0] / r[0] for r in row[1:]]
        text = f"{ratios[0]:9.2f}" + (f" {ratios[1]:6.2f}" if len(ratios) > 1 else "")
        print(f"{case.name:28} " + " ".join(f"{c:>18}" for c in cells) + f" {text}", flush=True)
    print("median (best) of", args.runs, "calls each; threads:", args.threads)


if __name__ == "__main__":
    main()
