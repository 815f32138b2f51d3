"""``opgraph train-demo``: train a classifier on scikit-learn's digits with a compiled step.

The training itself is :mod:`opgraph_examples.train_demo`, outside the library.
"""

from __future__ import annotations

import argparse
from typing import Any

from opgraph.cli._common import example_module, png_path, positive_float, positive_int


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "train-demo",
        help="train an MLP or a CNN on the digits data set (one compiled call per batch)",
        description="Train a classifier on scikit-learn's 8x8 digits with one compiled "
        "training-step call per batch; print accuracy and time per epoch.",
    )
    demo.add_argument("--epochs", type=positive_int, default=10, help="passes over the data (10)")
    demo.add_argument(
        "--backend",
        default=None,
        help="backend name (default: CPU if registered, else INTERPRETER)",
    )
    demo.add_argument("--batch-size", type=positive_int, default=32, help="examples per step (32)")
    demo.add_argument(
        "--plot", metavar="PATH.png", type=png_path, default=None, help="write the loss curve here"
    )
    demo.add_argument("--model", choices=("mlp", "cnn"), default="mlp", help="the classifier (mlp)")
    demo.add_argument(
        "--hidden", type=positive_int, nargs="+", default=[128], help="MLP hidden widths (128)"
    )
    demo.add_argument("--channels", type=positive_int, default=16, help="CNN filters (16)")
    demo.add_argument(
        "--lr", type=positive_float, default=1e-2, help="peak Adam learning rate (0.01)"
    )
    demo.add_argument("--seed", type=int, default=0, help="split, initialisation, shuffling (0)")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return int(example_module("train_demo").run(args))
