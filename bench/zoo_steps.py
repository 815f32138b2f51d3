"""Where a zoo model loses, step by step: opgraph's profiled steps against onnxruntime's
profiled nodes, grouped by kind, on the same threads.

    python bench/zoo_steps.py [--models efficientnet_b0,mobilenet_v3] [--threads 1]
                              [--calls 30] [--steps]

opgraph runs the model compiled with ``profile=True`` (``exe.performance_counters()``: one
time per step and call) and onnxruntime with its profiler on (``enable_profiling``: one
time per node and call), calls interleaved; each step's and node's time is its minimum over
``--calls`` calls (the least disturbed by other processes on a shared machine). Steps and
nodes are grouped into kinds that correspond across the two runtimes: convolutions by output
plane (depthwise apart), the squeeze-excite parts (global pool with its activation, the two
small convolutions, the channel scale), activations onnxruntime runs as nodes of their own,
its layout reorders, and the rest by op. The table is sorted by opgraph's loss (its time
minus onnxruntime's). ``--steps`` also lists every opgraph step with its time.

Both runtimes' per-step times include their profilers' overhead and add up to more than an
unprofiled call; compare kinds, not the totals, with ``bench/per_core.py`` or
``bench/pointwise.py --whole`` for whole calls.
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import onnxruntime as ort  # noqa: E402

from bench.models import ZOO, zoo_case  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402

ACTIVATIONS = ("QuickGelu", "Sigmoid", "HardSigmoid", "HardSwish", "Relu", "Gelu", "Clip")


def _plane(shape: list[int] | tuple[str, ...]) -> str:
    return "x".join(str(d) for d in shape[2:]) or "1"


def step_kind(label: str) -> str:
    """The kind of an opgraph step, from its label (``"<index>: %y = Op[...](...) : f32[...]"``)."""
    body = label.split(": ", 1)[1]
    first = body.split(";")[0]
    shape = re.search(r": \w+\[([\d,]*)\]", first)
    out = tuple(shape.group(1).split(",")) if shape else ()
    ops = re.findall(r"= (\w+)[\[(]", body)
    if ops and ops[0] == "Convolution":
        groups = re.search(r"groups=(\d+)", first)
        if groups and int(groups.group(1)) > 1:
            return f"depthwise {_plane(out)}"
        return "SE small conv" if out[2:] == ("1", "1") else f"conv {_plane(out)}"
    if "Attention" in ops:
        return "attention (QK, softmax, V)"
    if "Dot" in ops or ops[:1] == ["MatMul"]:
        return "matrix product (Gemm)"
    if "Sqrt" in ops and "ReduceSum" in ops:
        return "layer norm (+ residual add)"
    if any(op in ("ReduceSum", "ReduceMean") for op in ops):
        return "SE pool (+ activation)"
    if ops == ["Mul"] or ops == ["Multiply"]:
        return "SE scale"
    return "+".join(sorted(set(ops)))[:40] or "other"


def node_kind(op: str, args: dict[str, Any]) -> str:
    """The kind of an onnxruntime node, from its profile record."""
    out = next(iter(args["output_type_shape"][0].values()))
    if op == "Conv":
        weight = next(iter(args["input_type_shape"][1].values()))
        if len(weight) == 4 and weight[1] == 1 and weight[0] > 1 and weight[2] > 1:
            return f"depthwise {_plane(out)}"
        return "SE small conv" if out[2:] == [1, 1] else f"conv {_plane(out)}"
    if op in ACTIVATIONS:
        return "SE small conv" if out[2:] == [1, 1] else "activation (own node)"
    if op in ("ReduceMean", "GlobalAveragePool"):
        return "SE pool (+ activation)"
    if op in ("LayerNormalization", "SkipLayerNormalization") or (op == "Add" and len(out) == 3):
        return "layer norm (+ residual add)"
    if op == "Softmax" or (op in ("MatMul", "FusedMatMul") and len(out) == 4):
        return "attention (QK, softmax, V)"  # per-head products over [batch, heads, ...]
    if op == "Mul":
        return "SE scale" if len(out) == 4 else "scale (own node)"
    if op in ("Gemm", "MatMul", "FusedMatMul"):
        return "matrix product (Gemm)"
    if op in ("Transpose", "Reshape"):
        return "layout (Transpose, Reshape)"
    return op


def profile(
    name: str, threads: int, calls: int, cache: Path
) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """(opgraph step minimums, onnxruntime node minimums, their kinds) in seconds."""
    case = zoo_case(name)
    config = CpuConfig(cache, default_config().compiler, num_threads=threads)
    exe = CpuBackend(config).compile(case.function, profile=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    profiles = tempfile.TemporaryDirectory(prefix="zoo-steps-ort-")
    options.profile_file_prefix = str(Path(profiles.name) / name)
    session = ort.InferenceSession(
        case.onnx.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {i.name: a for i, a in zip(session.get_inputs(), case.inputs, strict=True)}
    for _ in range(3):
        exe(*case.inputs)
        session.run(None, feeds)
    steps: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(calls):
        exe._counters.clear()  # one call's times (the counters accumulate)
        exe(*case.inputs)
        for counter in exe.performance_counters():
            steps[counter.node].append(counter.total_seconds)
        session.run(None, feeds)
    with profiles:
        records = json.loads(Path(session.end_profiling()).read_text())
    nodes: dict[str, list[float]] = collections.defaultdict(list)
    kinds: dict[str, str] = {}
    for record in records:
        if record.get("cat") == "Node" and record["name"].endswith("_kernel_time"):
            nodes[record["name"]].append(record["dur"] * 1e-6)
            kinds[record["name"]] = node_kind(record["args"]["op_name"], record["args"])
    ours = {k: min(v) for k, v in steps.items()}
    theirs = {k: min(v) for k, v in nodes.items()}
    return ours, theirs, kinds


def table(name: str, threads: int, calls: int, cache: Path, list_steps: bool) -> str:
    ours, theirs, kinds = profile(name, threads, calls, cache)
    og_ms: dict[str, float] = collections.defaultdict(float)
    ort_ms: dict[str, float] = collections.defaultdict(float)
    og_n: collections.Counter[str] = collections.Counter()
    ort_n: collections.Counter[str] = collections.Counter()
    for label, seconds in ours.items():
        og_ms[step_kind(label)] += seconds * 1e3
        og_n[step_kind(label)] += 1
    for node, seconds in theirs.items():
        ort_ms[kinds[node]] += seconds * 1e3
        ort_n[kinds[node]] += 1
    order = sorted(set(og_ms) | set(ort_ms), key=lambda k: ort_ms[k] - og_ms[k])
    lines = [
        f"{name}, {threads} thread(s), minimum of {calls} profiled calls, load "
        f"{os.getloadavg()[0]:.2f}",
        "",
        "| kind | opgraph steps | opgraph ms | onnxruntime nodes | onnxruntime ms | loss ms |",
        "|---|---|---|---|---|---|",
    ]
    for kind in order:
        lines.append(
            f"| {kind} | {og_n[kind]} | {og_ms[kind]:.3f} | {ort_n[kind]} | "
            f"{ort_ms[kind]:.3f} | {og_ms[kind] - ort_ms[kind]:+.3f} |"
        )
    lines.append(
        f"| total | {sum(og_n.values())} | {sum(og_ms.values()):.3f} | "
        f"{sum(ort_n.values())} | {sum(ort_ms.values()):.3f} | |"
    )
    if list_steps:
        lines += ["", "| step | kind | ms |", "|---|---|---|"]
        for label, seconds in ours.items():
            lines.append(f"| {label[:90]} | {step_kind(label)} | {seconds * 1e3:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="efficientnet_b0,mobilenet_v3")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--steps", action="store_true", help="also list every opgraph step")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(ZOO))
    if unknown:
        parser.error(f"unknown models {unknown}; the zoo has {sorted(ZOO)}")
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR") or tempfile.mkdtemp(prefix="zoo-steps-"))
    for name in names:
        print(table(name, args.threads, args.calls, cache, args.steps), flush=True)
        print()


if __name__ == "__main__":
    main()
