"""``opgraph viz MODEL -o out.svg``: draw a Function with Graphviz."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from opgraph.cli._common import (
    CliError,
    check_shape_names,
    example_module,
    positive_int,
    shape_item,
)
from opgraph.passes.pipeline import optimize
from opgraph.serialize import load
from opgraph.visualize import visualize

#: The built-in demo models ``opgraph viz`` accepts by name.
DEMO_MODELS = ("seed", "mlp")


def register(commands: Any) -> None:
    viz = commands.add_parser(
        "viz",
        help="draw a model as Graphviz DOT, SVG or PNG",
        description=(
            "Draw a model with Graphviz. MODEL is a built-in demo model "
            f"({', '.join(DEMO_MODELS)}), an ONNX model (a .onnx file; symbolic dimensions "
            "are 1 unless --shape gives them) or a file saved with og.save. The output format "
            "comes from the suffix of -o: "
            ".dot writes the Graphviz text; .svg and .png also need the Graphviz 'dot' program "
            "(the .dot file is written beside them either way)."
        ),
    )
    viz.add_argument(
        "model", metavar="MODEL", help=f"{', '.join(DEMO_MODELS)}, a .onnx file, or a saved file"
    )
    viz.add_argument("-o", "--output", help="output file: .dot, .svg or .png (default: MODEL.svg)")
    viz.add_argument(
        "--optimize", action="store_true", help="draw the graph after the default pipeline"
    )
    viz.add_argument(
        "--max-label",
        type=positive_int,
        default=40,
        help="truncate attribute lines to this many chars",
    )
    viz.add_argument(
        "--shape",
        action="append",
        default=[],
        type=shape_item,
        metavar="NAME=D0xD1x...",
        help="an ONNX input's shape (symbolic dimensions default to 1)",
    )
    viz.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:

    fn = load_model(args.model, dict(args.shape))
    if args.optimize:
        fn = optimize(fn)
    output = Path(args.output or f"{Path(args.model).stem}.svg")
    written = visualize(fn, output, max_label=args.max_label)
    print(f"wrote {written} ({len(fn.nodes)} nodes)")
    return 0


def load_model(model: str, shapes: Mapping[str, tuple[int, ...]] | None = None) -> Any:
    """The Function named by MODEL: a demo model name, an ONNX file, or a saved file.

    Raises:
        CliError: neither a demo name nor an existing file, or a file that cannot be loaded.
    """
    if model in DEMO_MODELS:
        demo = example_module("models")
        builders: dict[str, Callable[[], Any]] = {"seed": demo.seed_example, "mlp": demo.mlp}
        return builders[model]().function
    if Path(model).suffix.lower() == ".onnx":
        return _load_onnx(model, dict(shapes or {}))
    if shapes:
        raise CliError("--shape applies to ONNX models (a .onnx file) only")
    if os.path.exists(model):
        return load(model)
    raise CliError(
        f"unknown model {model!r}: expected a demo model ({', '.join(DEMO_MODELS)}), a .onnx "
        "file, or the path of a file saved with og.save"
    )


def _load_onnx(path: str, shapes: dict[str, tuple[int, ...]]) -> Any:
    """The imported Function; symbolic dimensions without a --shape are 1 (said on stderr)."""
    # deferred: the ONNX bridge needs onnx, an optional dependency
    from opgraph.frontends.onnx import InferenceSession, import_model

    inputs = InferenceSession(path, backend="INTERPRETER").get_inputs()
    check_shape_names(inputs, shapes)
    defaulted = []
    for arg in inputs:
        if arg.name in shapes or arg.shape is None or all(isinstance(d, int) for d in arg.shape):
            continue
        shapes[arg.name] = tuple(d if isinstance(d, int) else 1 for d in arg.shape)
        defaulted.append(f"{arg.name}={'x'.join(map(str, shapes[arg.name]))}")
    if defaulted:
        print(
            f"note: symbolic dimensions set to 1 ({', '.join(defaulted)}); --shape chooses them",
            file=sys.stderr,
        )
    return import_model(path, input_shapes=shapes)
