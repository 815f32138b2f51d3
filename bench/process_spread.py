"""ResNet-18 batch 1 across fresh processes: opgraph's own time per process, and what differs
in the slow ones.

    python bench/process_spread.py [--processes 10] [--calls 200] [--precision f32|int8|both]
                                   [--threads 1,2] [--peer] [--steps] [--log FILE]
    python bench/process_spread.py --summarize FILE...

Each process compiles ResNet-18 ImageNet batch 1 (f32, or its QDQ model quantized once by
``bench/int8.py``'s ``quantized``) from the warm cache and times ``--calls`` calls of
``exe.call`` (median). Beside the time it records where the big buffers landed (the arena's
and the inputs'/outputs' addresses modulo 4 KiB and 2 MiB, the packed constants' alignment,
transparent huge pages backing the arena), the page faults of the first calls and of the
timed ones, the CPUs the caller and the pool's worker ran on, the pool's waits
(``og_pool_counters``) and, with ``--peer``, onnxruntime's median in the same process (the
same model, the same threads) between two opgraph runs. ``--steps`` adds the per-step
medians of the profiled call (the same executable) and prints the steps whose time differs
most between the fastest and slowest process.

Processes of the configurations alternate (f32/int8, 1/2 threads), so a quiet or busy spell
of the shared machine falls on all of them. The load average is printed per process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KIB4, MIB2 = 4096, 2 << 20


def _cpu_of(task: str) -> int:
    """The CPU a task last ran on (/proc/.../stat field 39)."""
    with open(task) as f:
        text = f.read()
    return int(text[text.rindex(")") + 2 :].split()[36])


def _threads() -> dict[str, int]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            out[f"{name}:{tid}"] = _cpu_of(f"/proc/self/task/{tid}/stat")
        except OSError:
            continue
    return out


def _huge_kib(start: int, size: int) -> int:
    """AnonHugePages (KiB) of the mappings that overlap [start, start + size)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo < start + size and start < hi
            elif inside and head == "AnonHugePages:":
                total += int(line.split()[1])
    return total


def _minflt() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def child(args: argparse.Namespace) -> dict[str, Any]:
    import ctypes
    import time

    import numpy as np
    import onnx

    import opgraph as og
    from bench import resnet
    from bench.int8 import _session
    from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config
    from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters
    from opgraph.frontends.onnx import import_model

    case = resnet.resnet18_imagenet()
    config = CpuConfig(Path(args.cache), default_config().compiler, num_threads=args.child_threads)
    backend = CpuBackend(config)
    if args.child_precision == "int8":
        model = onnx.load(args.model)
        exe = backend.compile(import_model(model))
    else:
        model = case.onnx
        exe = backend.compile(case.function)
    ins = [backend.create_tensor(og.f32, a.shape, a.copy()) for a in case.inputs]
    outs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
    lib = backend.toolchain.runtime()
    rec: dict[str, Any] = {"precision": args.child_precision, "threads": args.child_threads}
    f0 = _minflt()
    exe.call(outs, ins)
    rec["faults_first"] = _minflt() - f0
    for _ in range(9):
        exe.call(outs, ins)
    rec["faults_warm"] = _minflt() - f0 - rec["faults_first"]

    def timed(call: Any, key: str = "") -> float:
        walls, cpus = [], []
        p0 = time.process_time_ns()
        for _ in range(args.calls):
            t, c = time.perf_counter_ns(), time.thread_time_ns()
            call()
            walls.append(time.perf_counter_ns() - t)
            cpus.append(time.thread_time_ns() - c)
        if key:  # the caller's thread CPU time per call, and the process's (all threads)
            rec[key + "_caller_cpu_min"] = min(cpus) / 1e6
            rec[key + "_caller_cpu_med"] = statistics.median(cpus) / 1e6
            rec[key + "_process_cpu"] = (time.process_time_ns() - p0) / args.calls / 1e6
            rec[key + "_wall_min"] = min(walls) / 1e6
        return statistics.median(walls) / 1e6

    c0, f1 = runtime_counters(lib), _minflt()
    rec["og_ms"] = timed(lambda: exe.call(outs, ins), "og")
    c1 = runtime_counters(lib)
    rec["faults_timed"] = _minflt() - f1
    per = {k: (getattr(c1, k) - getattr(c0, k)) / args.calls for k in c0._fields}
    rec["pool"] = {k: round(v, 2) for k, v in per.items() if v}
    slot = exe._pool.free[-1]  # type: ignore[union-attr]
    arena = int(slot[1].value or 0)
    rec["arena"] = {"mod4k": arena % KIB4, "mod2m": arena % MIB2, "bytes": exe.memory_plan().peak}
    rec["arena_huge_kib"] = _huge_kib(arena, exe.memory_plan().peak)
    consts = [c for c in exe._constants if c is not None]  # type: ignore[union-attr]
    big = [c for c in consts if c.nbytes >= 64 << 10]
    rec["consts"] = {
        "n": len(consts),
        "bytes": sum(c.nbytes for c in consts),
        "mis64": sum(1 for c in consts if c.ctypes.data % 64),
        "big": len(big),
        "big_mod4k": sorted({c.ctypes.data % KIB4 for c in big})[:8],
        "big_huge_kib": sum(_huge_kib(c.ctypes.data, c.nbytes) for c in big),
    }
    rec["io_mod4k"] = [t.buffer.ctypes.data % KIB4 for t in (*ins, *outs)]
    rec["tasks"] = _threads()
    if args.steps:  # a profiled build of the same function (its own arena)
        prof = backend.compile(import_model(model) if args.child_precision == "int8"
                               else case.function, profile=True)  # fmt: skip
        steps: dict[str, list[float]] = {}
        for _ in range(40):
            prof._counters.clear()
            prof.call(outs, ins)
            for c in prof.performance_counters():
                steps.setdefault(c.node, []).append(c.total_seconds)
        rec["steps_us"] = {k: round(statistics.median(v) * 1e6, 1) for k, v in steps.items()}
    if args.peer:
        session = _session(model) if args.child_threads == 2 else _one(model, _session)
        feeds = {i.name: a for i, a in zip(session.get_inputs(), case.inputs, strict=True)}
        for _ in range(10):
            session.run(None, feeds)
        time.sleep(0.2)
        rec["ort_ms"] = timed(lambda: session.run(None, feeds), "ort")
        time.sleep(0.2)
        for _ in range(10):
            exe.call(outs, ins)
        rec["og_after_ms"] = timed(lambda: exe.call(outs, ins))
    rec["load"] = round(os.getloadavg()[0], 2)
    del ctypes, np
    return rec


def _one(model: Any, make: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _quantize(folder: Path) -> Path:
    from bench import resnet
    from bench.int8 import quantized

    target = folder / "resnet18_b1_int8.onnx"
    if not target.exists():
        import onnx

        onnx.save(quantized(resnet.resnet18_imagenet(), folder), target)
    return target


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def parent(args: argparse.Namespace) -> None:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="opgraph-spread-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = os.environ.get("OPGRAPH_CACHE_DIR") or str(work / "cache")
    precisions = ["f32", "int8"] if args.precision == "both" else [args.precision]
    model = _quantize(work) if "int8" in precisions else Path("-")
    threads = [int(t) for t in args.threads.split(",")]
    configs = [(p, t) for p in precisions for t in threads]
    records: list[dict[str, Any]] = []
    for i in range(args.processes):
        for p, t in configs:
            command = [sys.executable, os.path.abspath(__file__), "--child", "--cache", cache,
                       "--model", str(model), "--child-precision", p, "--child-threads", str(t),
                       "--calls", str(args.calls)]  # fmt: skip
            command += ["--peer"] * args.peer + ["--steps"] * args.steps
            env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t))
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode:
                print(done.stderr[-2000:], file=sys.stderr)
                continue
            rec = json.loads(done.stdout.strip().splitlines()[-1])
            rec["process"] = i
            records.append(rec)
            shown = {k: v for k, v in rec.items() if k != "steps_us"}
            print(json.dumps(shown), flush=True)
    if args.log:
        Path(args.log).write_text("\n".join(json.dumps(r) for r in records) + "\n")
    print("\nconfig: opgraph ms min / median / max over processes [ort] [opgraph after ort]")
    for p, t in configs:
        rs = [r for r in records if r["precision"] == p and r["threads"] == t]
        line = f"{p} {t} thread(s), {len(rs)} processes: {_spread([r['og_ms'] for r in rs])}"
        if args.peer:
            line += f"  ort {_spread([r['ort_ms'] for r in rs])}"
            line += f"  after {_spread([r['og_after_ms'] for r in rs])}"
        print(line)
        if args.steps and len(rs) > 1:
            _step_diff(rs)
    print(f"load average at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


def summarize(paths: list[str]) -> None:
    """The distributions over processes of JSON-lines logs (``--log``, or the lines printed)."""
    for path in paths:
        records = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
        print(f"{path}:")
        for p, t in sorted({(r["precision"], r["threads"]) for r in records}):
            rs = [r for r in records if r["precision"] == p and r["threads"] == t]

            def col(key: str, rs: list[dict[str, Any]] = rs) -> str:
                return _spread([float(r[key]) for r in rs if key in r])

            def pool(key: str, rs: list[dict[str, Any]] = rs) -> str:
                return _spread([float(r["pool"].get(key, 0.0)) for r in rs])

            print(f"  {p} {t} thread(s), {len(rs)} processes (min / median / max): "
                  f"wall median {col('og_ms')} ms, wall min {col('og_wall_min')} ms, "
                  f"caller CPU min {col('og_caller_cpu_min')} ms, process CPU "
                  f"{col('og_process_cpu')} ms per call; worker blocks {pool('worker_blocks')}, "
                  f"wakes {pool('wakes')} per call; load {col('load')}")  # fmt: skip


def _step_diff(rs: list[dict[str, Any]]) -> None:
    fast, slow = min(rs, key=lambda r: r["og_ms"]), max(rs, key=lambda r: r["og_ms"])
    diffs = sorted(
        ((slow["steps_us"].get(k, 0.0) - v, k, v) for k, v in fast["steps_us"].items()),
        reverse=True,
    )
    for d, k, v in diffs[:6]:
        print(f"    {k}: fastest process {v:.0f} µs, slowest {v + d:.0f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--precision", default="both", choices=["f32", "int8", "both"])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--peer", action="store_true")
    parser.add_argument("--steps", action="store_true")
    parser.add_argument("--workdir", default="")
    parser.add_argument("--log", default="")
    parser.add_argument("--summarize", nargs="+", default=[], help="JSON-lines logs to read")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", default="", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="", help=argparse.SUPPRESS)
    parser.add_argument("--child-precision", default="f32", help=argparse.SUPPRESS)
    parser.add_argument("--child-threads", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
    elif args.summarize:
        summarize(args.summarize)
    else:
        parent(args)


if __name__ == "__main__":
    main()
