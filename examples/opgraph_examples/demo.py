"""What ``opgraph demo`` runs: the demo models on every backend, checked against a reference.

The built-in models (:mod:`opgraph_examples.models`) are checked against the numpy oracle;
the small ONNX model of :mod:`opgraph_examples.onnx_mlp` is built, imported and checked
against onnxruntime when it is installed, else against the oracle. Without the onnx package
the ONNX row is skipped with a note.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

TOLERANCE = 1e-4


@dataclass(frozen=True)
class Case:
    """A model to run on every backend and the reference it is checked against."""

    name: str
    function: Any
    arguments: list[np.ndarray]
    reference: Callable[[], list[np.ndarray]]


def _builtin_cases() -> list[Case]:
    from opgraph.testing.oracle import evaluate
    from opgraph_examples.models import models

    return [
        Case(m.name, m.function, m.arguments, functools.partial(evaluate, m.function, m.arguments))
        for m in models()
    ]


def onnx_case() -> tuple[Case | None, str]:
    """The demo ONNX model as a Case and the reference's label, or None and why not."""
    from opgraph.core.errors import ConversionError

    try:
        from opgraph.frontends.onnx import import_model
    except ConversionError as error:  # the bridge says so when onnx is not installed
        return None, f"skipped the ONNX model: {error}"
    from opgraph_examples.onnx_mlp import build

    model = build().SerializeToString()
    fn = import_model(model)
    x = np.random.default_rng(0).standard_normal(fn.parameters[0].shape).astype(np.float32)
    try:
        import onnxruntime
    except ImportError:
        from opgraph.testing.oracle import evaluate

        return Case("mlp.onnx (oracle)", fn, [x], lambda: evaluate(fn, [x])), "oracle"

    def reference() -> list[np.ndarray]:
        session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        return list(session.run(None, {"x": x}))

    return Case("mlp.onnx (onnxruntime)", fn, [x], reference), "onnxruntime"


def run(args: argparse.Namespace) -> int:
    """Run every case on every usable backend and print a table; 0 when all agree."""
    import opgraph as og
    from opgraph.cli._common import cpu_note
    from opgraph.cli._progress import compile_with_progress

    missing_cpu = cpu_note()
    if missing_cpu:
        print(missing_cpu, file=sys.stderr)
    cases = _builtin_cases()
    extra, note = onnx_case()
    if extra is not None:
        cases.append(extra)
    rows, ok = [], True
    for case in cases:
        want = case.reference()
        for name in og.backends():
            started = time.perf_counter()
            label = f"compiling {case.name} on {name}"
            exe = compile_with_progress(og.backend(name), case.function, label)
            compiled = time.perf_counter()
            got = exe(*case.arguments)
            ran = time.perf_counter()
            error = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
            agrees = error <= TOLERANCE
            ok &= agrees
            nodes = len(case.function.nodes)
            rows.append((case.name, name, nodes, compiled - started, ran - compiled, error, agrees))
    _print(rows)
    if extra is None:
        print(note)
    if args.verbose:
        print()
        print(cases[0].function)
    return 0 if ok else 1


def _print(rows: list[tuple[Any, ...]]) -> None:
    header = ("model", "backend", "nodes", "compile ms", "run ms", "max |err|")
    print("{:<24} {:<12} {:>5} {:>10} {:>8} {:>10}  reference".format(*header))
    for model_name, backend, nodes, compile_s, run_s, error, agrees in rows:
        verdict = "agrees" if agrees else "DIFFERS"
        cells = (model_name, backend, nodes, compile_s * 1e3, run_s * 1e3, error, verdict)
        print("{:<24} {:<12} {:>5} {:>10.2f} {:>8.2f} {:>10.2e}  {}".format(*cells))
