"""``opgraph run MODEL.onnx``: import an ONNX model, compile it, run it and report.

Inputs come from ``--input name=file.npy``; the others are random (seeded, of the input's
element type: standard normal floats, integers in ``[0, 2)``, random booleans). ``--shape``
fixes symbolic dimensions. The report gives each output's shape and a min/max/mean summary,
and the import time, compile time and median run time over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np


def register(commands: Any) -> None:
    run_parser = commands.add_parser(
        "run", help="import an ONNX model, compile and run it, and time it"
    )
    run_parser.add_argument("model", help="an ONNX model file")
    run_parser.add_argument(
        "--backend", default="INTERPRETER", help="backend (default: %(default)s)"
    )
    run_parser.add_argument(
        "--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input's value"
    )
    run_parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="an input's shape (for symbolic dimensions)",
    )
    run_parser.add_argument("--repeat", type=int, default=1, help="runs to time (median)")
    run_parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run_parser.add_argument("--verbose", action="store_true", help="op counts and fallbacks")
    run_parser.add_argument(
        "--progress", action="store_true", help="show progress even when stderr is no terminal"
    )
    run_parser.set_defaults(run=run)


class Progress:
    """Import and compile progress on stderr: tqdm when installed, else a plain bar."""

    def __init__(self, enabled: bool, stream: TextIO = sys.stderr) -> None:
        self.enabled = enabled
        self.stream = stream
        self._bar: Any = None
        self._label = ""

    def stage(self, label: str, total: int) -> None:
        self.close()
        if not self.enabled:
            return
        self._label = label
        try:
            from tqdm import tqdm
        except ImportError:
            self._bar = None
            self._draw(0, total)
            return
        self._bar = tqdm(total=total, desc=label, file=self.stream, leave=False, unit="op")

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.total = total
            self._bar.n = done
            self._bar.refresh()
        else:
            self._draw(done, total)

    def _draw(self, done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self._label:<8} [{bar}] {done}/{total}")
        self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._label:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()
        self._label = ""


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``name=1,3,224,224`` items as a dict."""
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        if not name or not dims:
            raise ValueError(f"--shape wants NAME=D0,D1,..., got {item!r}")
        shapes[name] = tuple(int(d) for d in dims.split(",") if d.strip())
    return shapes


def load_inputs(items: Sequence[str]) -> dict[str, np.ndarray]:
    """``name=file.npy`` items, loaded."""
    values = {}
    for item in items:
        name, _, path = item.partition("=")
        if not name or not path:
            raise ValueError(f"--input wants NAME=FILE.npy, got {item!r}")
        values[name] = np.load(path)
    return values


def random_input(element_type: Any, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    """A seeded random array of ``element_type``'s dtype."""
    dtype = np.dtype(element_type.dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def run(args: argparse.Namespace) -> int:
    from opgraph.core.errors import OpgraphError

    try:
        return _run(args)
    except (OpgraphError, ValueError, OSError) as error:
        print(f"opgraph run: {error}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    import opgraph as og
    from opgraph.cli._progress import compile_with_progress
    from opgraph.frontends.onnx import import_model

    given = load_inputs(args.input)
    shapes = {**parse_shapes(args.shape), **{n: v.shape for n, v in given.items()}}
    progress = Progress(args.progress or sys.stderr.isatty())
    progress.stage("import", 1)
    started = time.perf_counter()
    fn = import_model(args.model, input_shapes=shapes, progress=progress.update)
    imported = time.perf_counter()
    progress.close()
    backend = og.backend(args.backend)
    exe = compile_with_progress(backend, fn, "compile", enabled=progress.enabled)
    compiled = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    arguments = []
    for p in fn.parameters:
        name = p.node.name or ""
        value = given.get(name)
        arguments.append(value if value is not None else random_input(p.element_type, p.shape, rng))
    times, outputs = [], []
    for _ in range(max(1, args.repeat)):
        begin = time.perf_counter()
        outputs = exe(*arguments)
        times.append(time.perf_counter() - begin)
    _report(fn, exe, outputs, args, imported - started, compiled - imported, times)
    return 0


def _report(
    fn: Any,
    exe: Any,
    outputs: Sequence[np.ndarray],
    args: argparse.Namespace,
    import_s: float,
    compile_s: float,
    times: list[float],
) -> None:
    print(f"model    {args.model}  ({len(fn.nodes)} nodes, backend {args.backend})")
    for result, value in zip(fn.results, outputs, strict=True):
        name = result.node.name or "<unnamed>"
        summary = _summary(np.asarray(value))
        print(f"output   {name}: {value.dtype}{list(value.shape)}  {summary}")
    print(f"import   {import_s * 1e3:.1f} ms")
    print(f"compile  {compile_s * 1e3:.1f} ms")
    print(f"run      {statistics.median(times) * 1e3:.3f} ms (median of {len(times)})")
    if not args.verbose:
        return
    counts = Counter(node.op.name for node in fn.nodes)
    print("ops:")
    width = max((len(name) for name in counts), default=0)
    for name, count in counts.most_common():
        print(f"  {name:<{width}}  {count}")
    fallbacks = getattr(exe, "fallback_ops", None)
    if callable(fallbacks):
        names = fallbacks()
        print("reference-kernel fallbacks: " + (", ".join(names) if names else "none"))
    placement = getattr(exe, "placement", None)
    if callable(placement):
        print("placement:")
        print(placement())


def _summary(value: np.ndarray) -> str:
    if value.size == 0:
        return "(empty)"
    numbers = value.astype(np.float64)
    return f"min {numbers.min():.6g}  max {numbers.max():.6g}  mean {numbers.mean():.6g}"
