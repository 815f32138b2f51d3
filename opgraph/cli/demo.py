"""``opgraph demo``: the demo models on every backend, checked against a reference.

The demo itself is :mod:`opgraph_examples.demo`, outside the library.
"""

from __future__ import annotations

import argparse
from typing import Any

from opgraph.cli._common import example_module


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="run the demo models on every backend and compare with a reference"
    )
    demo.add_argument("--verbose", action="store_true", help="also print the seed Function")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return int(example_module("demo").run(args))
