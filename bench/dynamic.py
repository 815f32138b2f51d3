"""One dynamic compile against static compiles (issue 16): the BERT-base layer at sequence
lengths 16, 64, 128, 384 and ResNet-18 (ImageNet) at batch 1 and 8, each size run by the one
symbolic CPU executable, by a CPU executable compiled for that size, and by onnxruntime
(a session of the same model at that size). Ratios are taken within this run; the load
average is printed with the table.

Also measured: the first call at a new binding against the calls after it (the issue allows
5 ms more), as the median over several fresh bindings.

Run: ``python -m bench.dynamic [--repeat N] [--threads N] [--only bert|resnet]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np
import onnxruntime as ort

import opgraph as og
from bench import bert, resnet
from opgraph.backends.cpu import CpuBackend, default_config

BERT_LENGTHS = (16, 64, 128, 384)
#: Seconds of sleep after each timed call (longer than onnxruntime's spin-wait).
PAUSE = 0.05
RESNET_BATCHES = (1, 8)


def _cpu(threads: int) -> CpuBackend:
    """The CPU backend with ``threads`` threads (the same count onnxruntime gets)."""
    return CpuBackend(dataclasses.replace(default_config(), num_threads=threads))


def _median_seconds(run: Callable[[], object], repeat: int) -> float:
    run()  # warm: arena, caches
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _session(model: object, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(),  # type: ignore[attr-defined]
        options,
        providers=["CPUExecutionProvider"],
    )


def _first_call_extra(
    exe: og.Executable, make: Callable[[int], np.ndarray], sizes: Sequence[int]
) -> float:
    """Median over ``sizes`` (bindings not seen yet) of the first call's time minus the
    median of the next calls at that binding."""
    extras = []
    for size in sizes:
        x = make(size)
        started = time.perf_counter()
        exe(x)
        first = time.perf_counter() - started
        extras.append(first - _median_seconds(lambda x=x: exe(x), 5))
    return statistics.median(extras)


def _times(
    dynamic: og.Executable,
    static: og.Executable,
    session: ort.InferenceSession,
    name: str,
    x: np.ndarray,
    repeat: int,
) -> list[float]:
    """Median seconds of each, the calls interleaved (load changes hit all three alike), the
    first runtime of a round rotating, and a pause after each call: onnxruntime's threads
    spin after a call and would otherwise slow whichever call comes next."""
    runs: list[Callable[[], object]] = [
        lambda: dynamic(x),
        lambda: static(x),
        lambda: session.run(None, {name: x}),
    ]
    times: list[list[float]] = [[], [], []]
    for run in runs:
        run()  # warm: arenas, caches
    for r in range(repeat):
        for k in range(3):
            i = (r + k) % 3
            started = time.perf_counter()
            runs[i]()
            times[i].append(time.perf_counter() - started)
            time.sleep(PAUSE)
    return [statistics.median(seconds) for seconds in times]


def _plan_seconds(exe: og.Executable, binding: dict[str, int]) -> float:
    """What a new binding costs before the native call: its plan and bounds check."""
    started = time.perf_counter()
    exe.bound_plan(binding)  # type: ignore[attr-defined]
    return time.perf_counter() - started


def _row(name: str, size: int, dynamic: float, static: float, onnx: float) -> str:
    return (
        f"| {name} | {size} | {dynamic * 1e3:.2f} | {static * 1e3:.2f} | {onnx * 1e3:.2f} | "
        f"{dynamic / static:.3f} | {dynamic / onnx:.3f} |"
    )


def bench_bert(repeat: int, threads: int) -> list[str]:
    w = bert._weights()
    seq = og.dim("seq", max=512)
    started = time.perf_counter()
    dynamic = _cpu(threads).compile(bert._opgraph(w, seq))
    compile_seconds = time.perf_counter() - started
    rows = []
    rng = np.random.default_rng(6)

    def make(n: int) -> np.ndarray:
        return rng.standard_normal((1, n, bert.HIDDEN)).astype(np.float32)

    for n in BERT_LENGTHS:
        x = make(n)
        static = _cpu(threads).compile(bert._opgraph(w, n))
        session = _session(bert._onnx(w, n).model(), threads)
        got, want = dynamic(x)[0], static(x)[0]
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
        times = _times(dynamic, static, session, "hidden", x, repeat)
        rows.append(_row("BERT layer", n, *times))
    lengths = (20, 33, 47, 70, 90, 111, 150, 200, 250)
    plan = statistics.median(_plan_seconds(dynamic, {"seq": n + 1}) for n in lengths)
    extra = _first_call_extra(dynamic, make, lengths)
    rows.append(f"per-binding Python work (plan and bounds check, BERT): {plan * 1e3:.2f} ms")
    rows.append(f"first call at a new binding (BERT, median of {len(lengths)} lengths): "
                f"{extra * 1e3:+.2f} ms; fallbacks: {dynamic.fallback_ops() or 'none'}; "
                f"one dynamic compile {compile_seconds:.1f} s")  # fmt: skip
    return rows


def bench_resnet(repeat: int, threads: int) -> list[str]:
    w = resnet.Weights(False, 1000)
    batch = og.dim("batch", max=64)
    dynamic = _cpu(threads).compile(resnet._opgraph(w, batch, 224))  # type: ignore[arg-type]
    rows = []
    rng = np.random.default_rng(8)

    def make(n: int) -> np.ndarray:
        return rng.standard_normal((n, 3, 224, 224)).astype(np.float32)

    for n in RESNET_BATCHES:
        x = make(n)
        static = _cpu(threads).compile(resnet._opgraph(w, n, 224))
        session = _session(resnet._onnx(w, n, 224).model(), threads)
        got, want = dynamic(x)[0], static(x)[0]
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
        times = _times(dynamic, static, session, "image", x, repeat)
        rows.append(_row("ResNet-18", n, *times))
    extra = _first_call_extra(dynamic, make, (2, 3))
    rows.append(f"first call at a new binding (ResNet-18, batch 2 and 3): {extra * 1e3:+.2f} ms; "
                f"fallbacks: {dynamic.fallback_ops() or 'none'}")  # fmt: skip
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", choices=("bert", "resnet"))
    args = parser.parse_args(argv)
    rows = [
        "| model | size | dynamic ms | static ms | onnxruntime ms | dynamic/static | "
        "dynamic/onnxruntime |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name, run in (("bert", bench_bert), ("resnet", bench_resnet)):
        if args.only in (None, name):
            found = run(args.repeat, args.threads)
            rows += [r for r in found if r.startswith("|")]
            notes += [r for r in found if not r.startswith("|")]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{stamp}, load average {os.getloadavg()[0]:.2f}, {args.threads} thread(s)")
    print("\n".join([*rows, "", *notes]))


if __name__ == "__main__":
    main()
