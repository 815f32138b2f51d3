"""Compile time of the CPU backend, by phase, cold and cached.

``python bench/compile_time.py`` builds four models and compiles each with ``og.backend("CPU")``
(``CpuBackend.compile``, the real path), timing its phases by wrapping the pipeline's functions:

* ``lower``: clone, inline, decompose, rewrites and ``passes.optimize`` (``optimize`` is also
  shown on its own);
* ``fusion``: ``fusion.partition``; ``build``: the rest of ``builder.build_program``;
* ``epilogues``, ``memory`` (the arena plan), ``codegen`` (C generation);
* ``thread CPU``: the compiling thread's CPU time (``time.thread_time``), what the load
  inflates least; ``gc ms``: the garbage collector's time within the compile (the garbage
  of building the model and of earlier compiles is collected before each timed compile);
* ``native``: ``Toolchain.build`` (cache key, gcc, load); ``gcc cpu``: the CPU time (user +
  system) of the C compiler processes, which the machine's load does not inflate as it does
  wall time (on a quiet 2-core machine the wall time of a multi-unit module approaches half).

*First* compiles into an empty temporary cache directory: gcc builds the module, the thread
pool's runtime and the generic kernel units the model calls (``kernels.py``: one unit per
helper, built on demand beside the module), as on a user's first run. *Cold* compiles into a
cache that holds only the runtime and every kernel unit (gcc builds the module: every later
model's first compile). *Cached* compiles the same model again
into the same directory (gcc does not run); *rebuilt* builds the model anew (new ``Function``,
new constant arrays, as in a new process) and compiles it into that cache: the arrays derived
from constants at compile time (Winograd filter transforms, packed weight panels) are made
again, which *cached* reuses (``fused/derived.py``). Each is the median of ``--repeat`` runs;
``--profile`` prints cProfile's top functions of one cached compile.

Models: the demo MLP (``opgraph_examples.models.mlp``: 784-128-64-10, batch 16), the BERT-base layer
(``bench/bert.py``), ResNet-18 ImageNet batch 1 (``bench/resnet.py``), and an unrolled 2-layer
LSTM word language model through the torch bridge (:func:`lstm_lm`).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import gc
import io
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import opgraph as og
from opgraph.backends.cpu import backend as cpu_backend
from opgraph.backends.cpu import compiler as cpu_compiler
from opgraph.backends.cpu.backend import CpuBackend
from opgraph.backends.cpu.config import CpuConfig, default_config
from opgraph.backends.fused import builder, pipeline

PHASES = ("lower", "optimize", "fusion", "build", "epilogues", "memory", "codegen", "native")


# ------------------------------------------------------------------------------- models
@functools.cache
def demo_mlp() -> og.Function:
    from opgraph_examples.models import mlp

    return mlp().function


@functools.cache
def bert_layer() -> og.Function:
    from bench.bert import _opgraph, _weights

    return _opgraph(_weights())


@functools.cache
def resnet18() -> og.Function:
    from bench.resnet import Weights, _opgraph

    return _opgraph(Weights(False, 1000), 1, 224)


@functools.cache
def lstm_lm(steps: int = 18, batch: int = 20, vocab: int = 10000, width: int = 650) -> og.Function:
    """An unrolled 2-layer LSTM word language model (PyTorch's word_language_model sizes:
    650 wide, 10,000 words; 18 steps of a batch of 20), through the torch bridge:
    ``torch.export`` of ``Embedding -> nn.LSTM(2 layers) -> Linear -> log_softmax``, core ATen
    decompositions (which unroll the LSTM), :func:`import_exported`: 800 nodes."""
    import torch
    import torch.nn.functional as F

    from opgraph.frontends.torch.importer import import_exported

    class LanguageModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, width)
            self.lstm = torch.nn.LSTM(width, width, 2)
            self.decode = torch.nn.Linear(width, vocab)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            hidden, _ = self.lstm(self.embed(tokens))
            return F.log_softmax(self.decode(hidden), -1)

    torch.manual_seed(0)
    tokens = torch.randint(0, vocab, (steps, batch))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(LanguageModel().eval(), (tokens,)).run_decompositions()
    return import_exported(program, name="lstm_lm")


MODELS: dict[str, tuple[Callable[[], og.Function], float, float]] = {
    # name: (builder, cold target s, cached target s)
    "demo MLP": (demo_mlp, 2.0, 0.1),
    "BERT layer": (bert_layer, 2.0, 0.1),
    "ResNet-18": (resnet18, 4.0, 0.1),
    "LSTM LM": (lstm_lm, 10.0, 1.0),
}


# ------------------------------------------------------------------------------ timing
class Timers:
    """Seconds per phase, filled by the wrappers :func:`instrument` installs."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.gcc = 0.0
        self.gcc_runs = 0

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed


@contextlib.contextmanager
def instrument(timers: Timers) -> Iterator[None]:
    """Wrap the pipeline's phases (module attributes the compile path looks up)."""
    patches = [
        (pipeline, "lower", "lower"),
        (pipeline, "optimize_function", "optimize"),
        (builder, "partition", "fusion"),
        (pipeline, "build_program", "build"),
        (pipeline, "fuse_epilogues", "epilogues"),
        (pipeline, "plan_memory", "memory"),
        (cpu_backend, "generate", "codegen"),
    ]
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in patches]
    build = cpu_compiler.Toolchain.build
    run = cpu_compiler._run

    def counted_run(command: list[str], work: Path) -> None:
        timers.gcc_runs += 1
        run(command, work)

    try:
        for module, attr, name in patches:
            setattr(module, attr, timers.wrap(name, getattr(module, attr)))
        cpu_compiler.Toolchain.build = timers.wrap("native", build)  # type: ignore[method-assign]
        cpu_compiler._run = counted_run
        yield
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)
        cpu_compiler.Toolchain.build = build  # type: ignore[method-assign]
        cpu_compiler._run = run


class GcTimer:
    """Seconds the garbage collector ran (``gc.callbacks``) while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def compile_once(backend: CpuBackend, make: Callable[[], og.Function]) -> dict[str, float]:
    """One timed compile of ``make()``. The garbage left by building the model and by earlier
    compiles is collected first: otherwise a full collection of the whole process (0.11 s
    of the second ResNet-18 compile after the demo MLP and BERT runs, load 12) lands on
    whichever compile happens to cross the collector's threshold; ``gc ms`` is the
    collector's time during the compile itself."""
    function = make()
    timers = Timers()
    gc.collect()
    with instrument(timers), GcTimer() as collector:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        started, cpu = time.perf_counter(), time.thread_time()
        backend.compile(function)
        total = time.perf_counter() - started
        cpu = time.thread_time() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        timers.gcc = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    phases = dict(timers.seconds)
    phases["build"] -= phases["fusion"]
    phases["lower"] -= phases["optimize"]
    phases["total"] = total
    phases["cpu"] = cpu
    phases["gc"] = collector.seconds
    phases["python"] = total - phases["native"]
    phases["gcc cpu"] = timers.gcc
    phases["gcc runs"] = timers.gcc_runs
    phases["nodes"] = len(function.nodes)
    return phases


def _backend(directory: str, threads: int) -> CpuBackend:
    config = CpuConfig(Path(directory) / "cache", default_config().compiler, threads)
    return CpuBackend(config)


def _libraries(backend: CpuBackend) -> float:
    """Build the libraries modules of a cache share (the thread pool's runtime, and every
    generic kernel unit where this version has them); their seconds."""
    started = time.perf_counter()
    backend.toolchain.runtime()
    kernels = getattr(backend.toolchain, "kernels", None)
    if kernels is not None:
        kernels()
    return time.perf_counter() - started


def measure(name: str, repeat: int, threads: int) -> dict[str, dict[str, float]]:
    """Medians of ``repeat`` runs: ``first`` (an empty cache: the shared libraries are built
    too), ``cold`` (a cache holding only the shared libraries), ``cached``, ``rebuilt`` (the
    model built anew, into the warm cache)."""
    make = MODELS[name][0]
    runs: dict[str, list[dict[str, float]]] = {
        "first": [],
        "cold": [],
        "cached": [],
        "rebuilt": [],
    }
    libraries: list[float] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="og-compile-time-") as directory:
            backend = _backend(directory, threads)
            runs["first"].append(compile_once(backend, make))
            runs["cached"].append(compile_once(backend, make))
            rebuild = make.__wrapped__  # type: ignore[attr-defined]
            runs["rebuilt"].append(compile_once(backend, rebuild))
        with tempfile.TemporaryDirectory(prefix="og-compile-time-") as directory:
            backend = _backend(directory, threads)
            libraries.append(_libraries(backend))
            runs["cold"].append(compile_once(backend, make))
    medians = {
        when: {k: statistics.median(r[k] for r in results) for k in results[0]}
        for when, results in runs.items()
    }
    medians["first"]["libraries"] = statistics.median(libraries)
    return medians


def profile_cached(name: str, threads: int, top: int) -> str:
    make = MODELS[name][0]
    with tempfile.TemporaryDirectory(prefix="og-compile-time-") as directory:
        config = CpuConfig(Path(directory) / "cache", default_config().compiler, threads)
        backend = CpuBackend(config)
        backend.compile(make())
        function = make()
        profiler = cProfile.Profile()
        profiler.enable()
        backend.compile(function)
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    out.write("\n")
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ------------------------------------------------------------------------------ report
def _row(name: str, when: str, r: dict[str, float], target: float) -> str:
    cells = [name, when, f"{int(r['nodes'])}", f"**{r['total']:.2f} s**", f"≤ {target:g} s"]
    cells += [f"{r['cpu']:.3f}", f"{r['gc'] * 1e3:.0f}"]
    cells += [f"{r['python']:.2f}"]
    cells += [f"{r[p] * 1e3:.0f}" for p in PHASES[:-1]]
    cells += [f"{r['native']:.2f}", f"{r['gcc cpu']:.2f} ({int(r['gcc runs'])})"]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| model | compile | nodes | total | target | thread CPU s | gc ms | python s | lower ms "
    "| optimize ms | fusion ms | build ms | epilogues ms | memory ms | codegen ms | native s"
    " | gcc CPU s (runs) |\n"
    "|" + "---|" * 17
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", choices=list(MODELS), help="default: all")
    parser.add_argument("--repeat", type=int, default=3, help="runs per model (median)")
    parser.add_argument("--threads", type=int, default=2, help="CpuConfig.num_threads")
    parser.add_argument("--profile", action="store_true", help="cProfile one cached compile")
    parser.add_argument("--top", type=int, default=30, help="functions shown by --profile")
    args = parser.parse_args(argv)
    names = args.model or list(MODELS)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.repeat} run(s) each, medians")
    if args.profile:
        for name in names:
            report = profile_cached(name, args.threads, args.top)
            print(f"## {name}: cProfile of a cached compile\n{report}")
        return
    print(HEADER)
    for name in names:
        result = measure(name, args.repeat, args.threads)
        _, cold_target, cached_target = MODELS[name]
        print(_row(name, "first", result["first"], cold_target))
        print(_row(name, "cold", result["cold"], cold_target))
        print(_row(name, "cached", result["cached"], cached_target))
        print(_row(name, "rebuilt", result["rebuilt"], cached_target))
        print(
            f"<!-- {name}: shared libraries built in {result['first']['libraries']:.2f} s; "
            f"load average {os.getloadavg()[0]:.2f} -->",
            flush=True,
        )


if __name__ == "__main__":
    main()
