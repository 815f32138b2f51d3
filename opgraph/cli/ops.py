"""``opgraph ops``: list the registered ops, or print the Markdown op reference."""

from __future__ import annotations

import argparse
from typing import Any

import opgraph  # noqa: F401 - registers every op
from opgraph.opdocs import markdown, op_classes


def register(commands: Any) -> None:
    parser = commands.add_parser("ops", help="list the registered ops (--markdown: docs/ops.md)")
    parser.add_argument("--markdown", action="store_true", help="print the full op reference")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:

    if args.markdown:
        print(markdown())
        return 0
    classes = op_classes()
    for cls in classes:
        print(f"{cls.__module__.rsplit('.', 1)[-1]:<14} {cls.__name__}")
    print(f"{len(classes)} ops")
    return 0
