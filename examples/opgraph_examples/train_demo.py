"""What ``opgraph train-demo`` runs: a classifier trained on scikit-learn's digits with a
compiled step (:mod:`opgraph_examples.digits`)."""

from __future__ import annotations

import argparse
import sys

from opgraph.cli._common import CliError, check_writable_directory, cpu_note


def run(args: argparse.Namespace) -> int:
    """Train as ``args`` say, print each epoch and the test accuracy; write the plot."""
    from opgraph.optim.models import cnn, mlp
    from opgraph_examples.digits import (
        DigitsConfig,
        default_backend,
        format_epoch,
        load_digits_split,
        plot_losses,
        train_digits,
    )

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
