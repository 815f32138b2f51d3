"""``opgraph train-demo``: train a classifier on scikit-learn's digits with a compiled step."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from opgraph.cli._common import (
    CliError,
    check_writable_directory,
    png_path,
    positive_float,
    positive_int,
)


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
    from opgraph.optim.digits import (
        DigitsConfig,
        default_backend,
        format_epoch,
        load_digits_split,
        plot_losses,
        train_digits,
    )
    from opgraph.optim.models import cnn, mlp

    _check_before_training(args)
    config = DigitsConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        backend=args.backend or default_backend(),
        hidden=tuple(args.hidden),
        learning_rate=args.lr,
        seed=args.seed,
        progress=not args.no_progress,
    )
    if args.backend is None:
        from opgraph.cli.demo import cpu_note

        missing_cpu = cpu_note()
        if missing_cpu:
            print(missing_cpu, file=sys.stderr)
    model = cnn(args.channels) if args.model == "cnn" else mlp((64, *config.hidden, 10))
    data = load_digits_split(seed=config.seed)
    if config.batch_size > len(data.x_train):
        raise CliError(
            f"--batch-size {config.batch_size} is larger than the training set "
            f"({len(data.x_train)} images)"
        )
    print(
        f"digits: {len(data.x_train)} training and {len(data.x_test)} test images; {model.name}, "
        f"Adam (cosine from {config.learning_rate}), batch {config.batch_size}, "
        f"backend {config.backend}"
    )
    result = train_digits(
        config,
        model,
        data,
        on_epoch=lambda e: print(format_epoch(e, config.epochs), flush=True),
    )
    print(
        f"test accuracy {result.test_accuracy:.2%} after {config.epochs} epoch(s) on "
        f"{result.backend}; {result.seconds_per_epoch:.3f} s per epoch "
        f"(compile {result.compile_seconds:.3f} s)"
    )
    if args.plot:
        print(f"loss curve written to {plot_losses(result, args.plot)}")
    return 0


def _check_before_training(args: argparse.Namespace) -> None:
    """Everything that would otherwise fail only after training.

    Raises:
        RegistryError: an unknown or unavailable backend.
        CliError: the plot cannot be written, or matplotlib is missing.
    """
    if args.backend is not None:
        from opgraph.runtime.backend import backend

        backend(args.backend)
    if args.plot:
        check_writable_directory(args.plot, "--plot")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install 'opgraph[train]'") from None
