"""The ``opgraph`` command line."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np


def _demo(args: argparse.Namespace) -> int:
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
            rows.append(
                (
                    model.name,
                    name,
                    len(model.function.nodes),
                    (compiled - started) * 1e3,
                    (ran - compiled) * 1e3,
                    error,
                    agrees,
                )
            )
    header = ("model", "backend", "nodes", "compile ms", "run ms", "max |err|")
    print("{:<24} {:<12} {:>5} {:>10} {:>8} {:>10}  oracle".format(*header))
    for model, backend, nodes, compile_ms, run_ms, error, agrees in rows:
        verdict = "agrees" if agrees else "DIFFERS"
        cells = (model, backend, nodes, compile_ms, run_ms, error, verdict)
        print("{:<24} {:<12} {:>5} {:>10.2f} {:>8.2f} {:>10.2e}  {}".format(*cells))
    if args.verbose:
        print()
        print(models()[0].function)
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="opgraph", description="opgraph: typed tensor graphs")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="run the demo models on every backend and compare with the oracle"
    )
    demo.add_argument("--verbose", action="store_true", help="also print the seed Function")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
