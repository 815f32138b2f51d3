"""``opgraph demo``: the demo models on every backend, checked against the oracle."""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="run the demo models on every backend and compare with the oracle"
    )
    demo.add_argument("--verbose", action="store_true", help="also print the seed Function")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import opgraph as og
    from opgraph.demo import models
    from opgraph.testing.oracle import evaluate

    rows = []
    ok = True
    for model in models():
        want = evaluate(model.function, model.arguments)
        for name in og.backends():
            started = time.perf_counter()
            exe = og.backend(name).compile(model.function)
            compiled = time.perf_counter()
            got = exe(*model.arguments)
            ran = time.perf_counter()
            error = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
            agrees = error <= 1e-4
            ok &= agrees
            nodes = len(model.function.nodes)
            rows.append(
                (model.name, name, nodes, compiled - started, ran - compiled, error, agrees)
            )
    header = ("model", "backend", "nodes", "compile ms", "run ms", "max |err|")
    print("{:<24} {:<12} {:>5} {:>10} {:>8} {:>10}  oracle".format(*header))
    for model_name, backend, nodes, compile_s, run_s, error, agrees in rows:
        verdict = "agrees" if agrees else "DIFFERS"
        cells = (model_name, backend, nodes, compile_s * 1e3, run_s * 1e3, error, verdict)
        print("{:<24} {:<12} {:>5} {:>10.2f} {:>8.2f} {:>10.2e}  {}".format(*cells))
    if args.verbose:
        print()
        print(models()[0].function)
    return 0 if ok else 1
