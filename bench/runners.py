"""One runner per runtime: prepare a case once, then a zero-argument ``run`` closure that
executes it on tensors created once. Every runtime gets the same number of threads."""

from __future__ import annotations

import collections
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
import torch

import opgraph as og
from bench.models import Case
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config


@dataclass
class Prepared:
    """A case ready to time on one runtime."""

    run: Callable[[], object]
    outputs: Callable[[], list[np.ndarray]]
    compile_seconds: float
    extra: dict[str, float]
    #: The kernels the runtime chose for its convolutions and products, with their counts,
    #: where it reports them (OpenVINO: :func:`openvino_kernels`).
    kernels: dict[str, int] = field(default_factory=dict)


def opgraph_cpu(case: Case, threads: int, cache: Path, isa: str = "native") -> dict[str, Prepared]:
    """opgraph CPU twice: ``exe.call(outputs, inputs)`` on tensors made once, and ``exe(*a)``.
    Compile time is measured cold (empty cache directory) and warm (same directory). ``isa``
    forces the instruction set of the generated code (``CpuConfig.isa``)."""
    config = CpuConfig(cache, default_config().compiler, num_threads=threads, isa=isa)
    started = time.perf_counter()
    exe = CpuBackend(config).compile(case.function)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    exe = CpuBackend(config).compile(case.function)
    warm = time.perf_counter() - started
    backend = CpuBackend(config)
    inputs = [
        backend.create_tensor(og.element.from_dtype(a.dtype), a.shape, a.copy())
        for a in case.inputs
    ]
    outputs = [backend.create_tensor(t.element_type, t.shape) for t in exe.result_types]
    plan = exe.memory_plan()
    extra = {
        "cold_compile_s": cold,
        "warm_compile_s": warm,
        "arena_bytes": float(plan.peak),
        "unplanned_bytes": float(sum(plan.sizes.values())),
        "fallbacks": float(len(exe.fallback_ops())),
    }

    def call() -> None:
        exe.call(outputs, inputs)

    arrays = [a.copy() for a in case.inputs]
    return {
        "opgraph": Prepared(call, lambda: [o.read() for o in outputs], cold, extra),
        "opgraph exe()": Prepared(lambda: exe(*arrays), lambda: exe(*arrays), cold, {}),
    }


def interpreter(case: Case) -> Prepared:
    started = time.perf_counter()
    exe = og.backend("INTERPRETER").compile(case.function)
    seconds = time.perf_counter() - started
    arrays = [a.copy() for a in case.inputs]
    return Prepared(lambda: exe(*arrays), lambda: exe(*arrays), seconds, {})


def onnxruntime(case: Case, threads: int) -> Prepared:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    started = time.perf_counter()
    session = ort.InferenceSession(
        case.onnx.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    seconds = time.perf_counter() - started
    feeds = {i.name: a.copy() for i, a in zip(session.get_inputs(), case.inputs, strict=True)}
    return Prepared(lambda: session.run(None, feeds), lambda: session.run(None, feeds), seconds, {})


def compile_openvino(
    model: onnx.ModelProto, threads: int, precision: str = "f32", perf_count: bool = False
) -> tuple[ov.CompiledModel, float]:
    """``model`` compiled by OpenVINO for the CPU (``precision``: its
    ``INFERENCE_PRECISION_HINT``, f32 or bf16; ``perf_count``: its per-node profiler,
    ``PERF_COUNT``), and the seconds the compile took."""
    core = ov.Core()
    config = {
        "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": precision,
        "PERFORMANCE_HINT": "LATENCY",
        "PERF_COUNT": perf_count,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(model.SerializeToString())
        started = time.perf_counter()
        compiled = core.compile_model(str(path), "CPU", config)
        return compiled, time.perf_counter() - started


def openvino(case: Case, threads: int, precision: str = "f32") -> Prepared:
    """OpenVINO on the CPU; ``precision`` is its ``INFERENCE_PRECISION_HINT`` (f32 or bf16)."""
    compiled, seconds = compile_openvino(case.onnx, threads, precision)
    request = compiled.create_infer_request()
    feeds = {i: a.copy() for i, a in enumerate(case.inputs)}

    def run() -> object:
        return request.infer(feeds, share_inputs=True, share_outputs=True)

    def outputs() -> list[np.ndarray]:
        result = request.infer(feeds)
        return [np.array(result[o]) for o in compiled.outputs]

    return Prepared(run, outputs, seconds, {}, openvino_kernels(compiled))


def openvino_kernels(compiled: ov.CompiledModel) -> dict[str, int]:
    """The kernels OpenVINO's CPU plugin chose for a compiled model's convolutions and products
    (``primitiveType`` of its runtime model, e.g. ``brgconv_avx2_f32``, ``gemm_mlas_f32``), with
    their counts: which instruction set the peer really ran."""
    kinds: collections.Counter[str] = collections.Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) in HEAVY_LAYERS:
            kinds[info["primitiveType"].astype(str)] += 1
    return dict(kinds)


#: OpenVINO's layer types whose kernels :func:`openvino_kernels` lists.
HEAVY_LAYERS = frozenset({"Convolution", "GroupConvolution", "FullyConnected", "MatMul"})


def torch_eager(case: Case, threads: int) -> Prepared:
    torch.set_num_threads(threads)
    tensors = [torch.from_numpy(a.copy()) for a in case.inputs]

    def run() -> object:
        with torch.inference_mode():
            return case.torch_fn(*tensors)

    def outputs() -> list[np.ndarray]:
        result = run()
        return [result.numpy()] if isinstance(result, torch.Tensor) else [r.numpy() for r in result]

    return Prepared(run, outputs, 0.0, {})


def numpy_eager(case: Case) -> Prepared | None:
    if case.numpy_fn is None:
        return None
    fn = case.numpy_fn
    arrays = [a.copy() for a in case.inputs]
    return Prepared(lambda: fn(*arrays), lambda: [np.asarray(fn(*arrays))], 0.0, {})


def thread_cpu_medians(
    runs: dict[str, Callable[[], object]], rounds: int, warm: int = 5
) -> dict[str, float]:
    """Each run's median thread CPU seconds per call: ``warm`` calls each first, then
    ``rounds`` rounds of three calls of each in turn, every call timed by ``time.thread_time``."""
    for run in runs.values():
        for _ in range(warm):
            run()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            for _ in range(3):
                started = time.thread_time()
                run()
                samples[name].append(time.thread_time() - started)
    return {name: statistics.median(s) for name, s in samples.items()}
