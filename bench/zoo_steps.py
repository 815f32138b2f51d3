"""Where a zoo model loses, step by step: opgraph's profiled steps against onnxruntime's and
OpenVINO's profiled nodes, grouped by kind, on the same threads.

    python bench/zoo_steps.py [--models efficientnet_b0,mobilenet_v3] [--threads 1]
                              [--calls 30] [--steps] [--exports /work/zoo-exports]

opgraph runs the model compiled with ``profile=True`` (``exe.performance_counters()``: one
time per step and call), onnxruntime with its profiler on (``enable_profiling``: one time per
node and call) and OpenVINO with ``PERF_COUNT`` (``profiling_info``: each executed node's
``real_time`` per call), in turn in blocks of ``BLOCK`` calls; each step's and node's time
is its minimum over ``--calls`` calls (the least disturbed by other processes on a shared
machine and by the other runtimes' spinning pool threads). Steps and
nodes are grouped into kinds that correspond across the runtimes: convolutions by output
plane (depthwise apart), the squeeze-excite parts (global pool with its activation, the two
small convolutions, the channel scale), activations the peers run as nodes of their own,
their layout reorders, and the rest by op (OpenVINO's fused element-wise ``Subgraph`` and
``Eltwise`` nodes by where they sit: next to a softmax they are attention, on a transformer's
``[batch, tokens, hidden]`` rows the residual adds). The table is sorted by opgraph's loss
against the faster peer of each kind. ``--steps`` also lists every opgraph step with its time.

The per-step times include the profilers' overhead and add up to more than an unprofiled
call; compare kinds, not the totals, with ``bench/per_core.py`` or ``bench/pointwise.py
--whole`` for whole calls.
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
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import onnxruntime as ort  # noqa: E402
import openvino as ov  # noqa: E402

from bench.models import ZOO, ZOO_CACHE, zoo_case  # noqa: E402
from bench.runners import compile_openvino  # noqa: E402
from bench.step_kinds import node_kind, openvino_kind, step_kind  # noqa: E402
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config  # noqa: E402

#: Calls of each runtime in a row (see ``_Peers.run``); ``--calls`` is rounded up to blocks.
BLOCK = 5


def _openvino_kinds(compiled: ov.CompiledModel) -> dict[str, str]:
    """Each OpenVINO runtime node's kind by its name (as ``profiling_info`` names it)."""
    ops = compiled.get_runtime_model().get_ordered_ops()

    def shape(port: Any) -> list[int]:
        return [int(d) for d in port.get_partial_shape().to_shape()]

    softmax = {
        tuple(shape(op.output(0)))
        for op in ops
        if op.get_rt_info()["layerType"].astype(str) == "Softmax"
    }
    kinds: dict[str, str] = {}
    for op in ops:
        layer = op.get_rt_info()["layerType"].astype(str)
        if layer in ("Const", "Input", "Output"):
            continue
        out = shape(op.output(0))
        inputs = [shape(op.input_value(i)) for i in range(op.get_input_size())]
        near_softmax = layer in ("Subgraph", "Eltwise") and tuple(out) in softmax
        kinds[op.get_friendly_name()] = openvino_kind(layer, inputs, out, near_softmax)
    return kinds


#: Each peer's node minimums (seconds) with the nodes' kinds, by peer.
Minimums = dict[str, tuple[dict[str, float], dict[str, str]]]


class _Peers:
    """onnxruntime (profiler on) and OpenVINO (``PERF_COUNT``) on one zoo case: ``run`` calls
    both once (OpenVINO's times per node collected after each call), ``minimums`` ends the
    profile and gives each runtime's node minimums in seconds with the nodes' kinds."""

    def __init__(self, case: Any, name: str, threads: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_profiling = True
        self.profiles = tempfile.TemporaryDirectory(prefix="zoo-steps-ort-")
        options.profile_file_prefix = str(Path(self.profiles.name) / name)
        self.session = ort.InferenceSession(
            case.onnx.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        self.feeds = {
            i.name: a for i, a in zip(self.session.get_inputs(), case.inputs, strict=True)
        }
        compiled, _ = compile_openvino(case.onnx, threads, perf_count=True)
        self.ov_kinds = _openvino_kinds(compiled)
        self.request = compiled.create_infer_request()
        self.ov_feeds = {i: a.copy() for i, a in enumerate(case.inputs)}
        self.ov_times: dict[str, list[float]] = collections.defaultdict(list)
        self.calls: dict[str, list[float]] = {"onnxruntime": [], "openvino": []}

    def run(self, calls: int, record: bool) -> None:
        """``calls`` calls of onnxruntime, then as many of OpenVINO (blocks: each runtime's
        pool threads spin for a while after a call, and a call of the other runtime started
        in that while shares the cores with them; the blocks' first calls are the ones so
        disturbed, and the minima skip them)."""
        for _ in range(calls):
            started = time.perf_counter()
            self.session.run(None, self.feeds)
            self.calls["onnxruntime"].append(time.perf_counter() - started)
        for _ in range(calls):
            started = time.perf_counter()
            self.request.infer(self.ov_feeds, share_inputs=True, share_outputs=True)
            self.calls["openvino"].append(time.perf_counter() - started)
            if record:
                for info in self.request.profiling_info:
                    if info.status == info.Status.EXECUTED and info.node_name in self.ov_kinds:
                        self.ov_times[info.node_name].append(info.real_time.total_seconds())

    def minimums(self) -> Minimums:
        with self.profiles:
            records = json.loads(Path(self.session.end_profiling()).read_text())
        nodes: dict[str, list[float]] = collections.defaultdict(list)
        kinds: dict[str, str] = {}
        for record in records:
            if record.get("cat") == "Node" and record["name"].endswith("_kernel_time"):
                nodes[record["name"]].append(record["dur"] * 1e-6)
                kinds[record["name"]] = node_kind(record["args"]["op_name"], record["args"])
        return {
            "onnxruntime": ({k: min(v) for k, v in nodes.items()}, kinds),
            "openvino": ({k: min(v) for k, v in self.ov_times.items()}, self.ov_kinds),
        }


def profile(
    name: str, threads: int, calls: int, cache: Path, exports: Path
) -> tuple[dict[str, float], Minimums, dict[str, float]]:
    """(opgraph step minimums, each peer's node minimums with the nodes' kinds) in seconds,
    and each runtime's fastest profiled call (wall clock, ms)."""
    case = zoo_case(name, folder=exports)
    config = CpuConfig(cache, default_config().compiler, num_threads=threads)
    exe = CpuBackend(config).compile(case.function, profile=True)
    peers = _Peers(case, name, threads)
    for _ in range(3):
        exe(*case.inputs)
    peers.run(3, record=False)
    steps: dict[str, list[float]] = collections.defaultdict(list)
    ours: list[float] = []
    for _ in range(-(-calls // BLOCK)):
        for _ in range(BLOCK):
            exe._counters.clear()  # one call's times (the counters accumulate)
            started = time.perf_counter()
            exe(*case.inputs)
            ours.append(time.perf_counter() - started)
            for counter in exe.performance_counters():
                steps[counter.node].append(counter.total_seconds)
        peers.run(BLOCK, record=True)
    calls_ms = {"opgraph": min(ours) * 1e3} | {k: min(v) * 1e3 for k, v in peers.calls.items()}
    return {k: min(v) for k, v in steps.items()}, peers.minimums(), calls_ms


def _by_kind(
    times: dict[str, float], kind_of: Any
) -> tuple[dict[str, float], collections.Counter[str]]:
    """Milliseconds and counts of ``times`` (seconds by step or node) summed by kind."""
    ms: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for key, seconds in times.items():
        kind = kind_of(key)
        ms[kind] += seconds * 1e3
        count[kind] += 1
    return ms, count


def table(name: str, threads: int, calls: int, cache: Path, list_steps: bool, exports: Path) -> str:
    ours, peers, calls_ms = profile(name, threads, calls, cache, exports)
    columns = {"opgraph": _by_kind(ours, step_kind)} | {
        peer: _by_kind(times, kinds.__getitem__) for peer, (times, kinds) in peers.items()
    }
    og_ms = columns["opgraph"][0]
    kinds = sorted({k for ms, _ in columns.values() for k in ms})

    def best(kind: str) -> float:
        return min(columns[p][0].get(kind, 0.0) for p in peers)

    order = sorted(kinds, key=lambda k: best(k) - og_ms.get(k, 0.0))
    head = " | ".join(f"{c} n | {c} ms" for c in columns)
    lines = [
        f"{name}, {threads} thread(s), minimum of {calls} profiled calls, load "
        f"{os.getloadavg()[0]:.2f}",
        "",
        f"| kind | {head} | loss ms (against the faster peer) |",
        "|---" * (2 * len(columns) + 2) + "|",
    ]
    for kind in order:
        cells = " | ".join(f"{n[kind]} | {ms.get(kind, 0.0):.3f}" for ms, n in columns.values())
        lines.append(f"| {kind} | {cells} | {og_ms.get(kind, 0.0) - best(kind):+.3f} |")
    totals = " | ".join(f"{sum(n.values())} | {sum(ms.values()):.3f}" for ms, n in columns.values())
    lines.append(f"| total | {totals} | |")
    whole = " | ".join(f"| {calls_ms[c]:.3f}" for c in columns)
    lines.append(f"| profiled call (wall, minimum) {whole} | |")
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
    parser.add_argument("--exports", type=Path, default=ZOO_CACHE, help="export cache folder")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(ZOO))
    if unknown:
        parser.error(f"unknown models {unknown}; the zoo has {sorted(ZOO)}")
    cache = Path(os.environ.get("OPGRAPH_CACHE_DIR") or tempfile.mkdtemp(prefix="zoo-steps-"))
    for name in names:
        print(table(name, args.threads, args.calls, cache, args.steps, args.exports), flush=True)
        print()


if __name__ == "__main__":
    main()
