"""``opgraph viz MODEL -o out.svg``: draw a Function with Graphviz."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The built-in demo models ``opgraph viz`` accepts by name.
DEMO_MODELS = ("seed", "mlp")


def register(commands: Any) -> None:
    viz = commands.add_parser(
        "viz",
        help="draw a model as Graphviz DOT, SVG or PNG",
        description=(
            "Draw a model with Graphviz. MODEL is a built-in demo model "
            f"({', '.join(DEMO_MODELS)}) or the path of a file saved with og.save (when "
            "opgraph.serialize is available). The output format comes from the suffix of -o: "
            ".dot writes the Graphviz text; .svg and .png also need the Graphviz 'dot' program "
            "(the .dot file is written beside them either way)."
        ),
    )
    viz.add_argument("model", metavar="MODEL", help=f"{' or '.join(DEMO_MODELS)}, or a saved file")
    viz.add_argument("-o", "--output", help="output file: .dot, .svg or .png (default: MODEL.svg)")
    viz.add_argument(
        "--optimize", action="store_true", help="draw the graph after the default pipeline"
    )
    viz.add_argument(
        "--max-label", type=int, default=40, help="truncate attribute lines to this many chars"
    )
    viz.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from opgraph.core.errors import OpgraphError
    from opgraph.passes.pipeline import optimize
    from opgraph.visualize import visualize

    try:
        fn = load_model(args.model)
    except (OpgraphError, OSError, LookupError) as error:
        print(f"opgraph viz: {error}", file=sys.stderr)
        return 2
    if args.optimize:
        fn = optimize(fn)
    output = Path(args.output or f"{Path(args.model).stem}.svg")
    try:
        written = visualize(fn, output, max_label=args.max_label)
    except OpgraphError as error:
        print(f"opgraph viz: {error}", file=sys.stderr)
        return 1
    print(f"wrote {written} ({len(fn.nodes)} nodes)")
    return 0


def load_model(model: str) -> Any:
    """The Function named by MODEL: a demo model name, or a saved file.

    Raises:
        LookupError: neither a demo name nor an existing file.
    """
    from opgraph import demo

    builders: dict[str, Callable[[], Any]] = {"seed": demo.seed_example, "mlp": demo.mlp}
    if model in builders:
        return builders[model]().function
    if os.path.exists(model):
        try:
            from opgraph.serialize import load
        except ImportError:
            raise LookupError(
                f"{model!r} is a file, but this opgraph cannot load files (no opgraph.serialize)"
            ) from None
        return load(model)
    raise LookupError(
        f"unknown model {model!r}: expected a demo model ({', '.join(DEMO_MODELS)}) or the path "
        "of a saved file"
    )
