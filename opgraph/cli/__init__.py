"""The ``opgraph`` command line.

Each command is a module in this package with a ``register(subparsers)`` function that adds
its subparser and sets ``run=<callable(args) -> int>``. Modules are discovered, so adding a
command is adding a file (modules starting with ``_`` are helpers, not commands).

Exit codes: 0 success; 1 a failure, reported in one line on stderr (``--verbose`` adds the
traceback); 2 a usage error (argparse's code); 130 interrupted. A closed output pipe
(``opgraph demo | head``) ends the command quietly with 1, as Python's documentation advises.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import opgraph
from opgraph.core.errors import OpgraphError

#: Failures reported as their message alone: the message says what went wrong.
EXPECTED_FAILURES = (OpgraphError, OSError, ImportError, ValueError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="opgraph", description="opgraph: typed tensor graphs")
    parser.add_argument("--version", action="version", version=f"opgraph {opgraph.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(commands)
    for subparser in commands.choices.values():
        # a command with its own --verbose keeps it (it also shows tracebacks)
        with contextlib.suppress(argparse.ArgumentError):
            subparser.add_argument(
                "--verbose", action="store_true", help="show the traceback of an error"
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
        finally:
            sys.stdout.flush()  # --help and --version: a closed pipe shows here
        code = _run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return code
    except BrokenPipeError:
        _discard_stdout()
        return 1


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args))
    except BrokenPipeError:
        raise
    except KeyboardInterrupt:
        print(f"opgraph {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        _report(args, error)
        return 1


def _report(args: Any, error: Exception) -> None:
    """One line on stderr; the traceback before it with ``--verbose``."""
    verbose = getattr(args, "verbose", False)
    if verbose:
        traceback.print_exc()
    if isinstance(error, EXPECTED_FAILURES):
        message = str(error) or type(error).__name__
    else:
        message = f"internal error (a bug in opgraph): {type(error).__name__}: {error}"
        message += "" if verbose else " (--verbose shows the traceback)"
    print(f"opgraph {args.command}: {message}", file=sys.stderr)


def _discard_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is no real file (e.g. captured by a test)


if __name__ == "__main__":
    sys.exit(main())
