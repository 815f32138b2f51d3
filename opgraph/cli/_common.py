"""What several commands share: argument types (their errors are usage errors, exit 2) and
``CliError`` (a failure a command reports in one line, exit 1)."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import opgraph as og
from opgraph.core.errors import OpgraphError


class CliError(OpgraphError, ValueError):
    """A command cannot do what was asked (a missing file, an input the model lacks…)."""


def positive_int(text: str) -> int:
    """An argparse type: an int >= 1."""
    return _bounded_int(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an int >= 0."""
    return _bounded_int(text, 0)


def _bounded_int(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite float > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def shape_item(text: str) -> tuple[str, tuple[int, ...]]:
    """An argparse type for ``--shape NAME=1x3x224x224`` (or ``NAME=1,3,224,224``)."""
    name, equals, dims = text.rpartition("=")
    if not equals or not name or not dims.strip():
        raise argparse.ArgumentTypeError(
            f"expected NAME=D0xD1x... (e.g. input=1x3x224x224 or input=1,3,224,224), got {text!r}"
        )
    parts = dims.replace(",", "x").split("x")
    if not all(p.strip().isdigit() for p in parts):
        bad = next(p for p in parts if not p.strip().isdigit())
        raise argparse.ArgumentTypeError(
            f"{text!r}: {bad.strip()!r} is not a dimension (a non-negative integer); expected "
            "NAME=D0xD1x... or NAME=D0,D1,..."
        )
    return name, tuple(int(p) for p in parts)


def input_item(text: str) -> tuple[str | None, str]:
    """An argparse type for ``--input NAME=FILE.npy``, ``--input FILE.npy`` (the model's only
    input) or ``--input FILE.npz`` (arrays by input name)."""
    name, equals, path = text.partition("=")
    if equals and not os.path.exists(text):
        if not name or not path:
            raise argparse.ArgumentTypeError(
                f"expected NAME=FILE.npy, FILE.npy or FILE.npz, got {text!r}"
            )
        return name, path
    return None, text


def npz_path(text: str) -> str:
    """An argparse type: a path ending in ``.npz`` (numpy adds the suffix otherwise)."""
    if Path(text).suffix.lower() != ".npz":
        raise argparse.ArgumentTypeError(f"expected a path ending in .npz, got {text!r}")
    return text


def png_path(text: str) -> str:
    """An argparse type: a path ending in ``.png``."""
    if Path(text).suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"expected a path ending in .png, got {text!r}")
    return text


def check_writable_directory(path: str, flag: str) -> None:
    """Fail now, not after the work, when ``path`` cannot be written.

    Raises:
        CliError: its directory does not exist or cannot be written.
    """
    directory = Path(path).parent
    if not directory.is_dir():
        raise CliError(f"{flag} {path}: the directory {str(directory)!r} does not exist")
    if not os.access(directory, os.W_OK):
        raise CliError(f"{flag} {path}: the directory {str(directory)!r} is not writable")


def cpu_note() -> str | None:
    """A one-line note when the CPU backend cannot run here (no C compiler), else None."""

    status = og.backend_status().get("CPU")
    if status is None or status.available:
        return None
    return f"note: the CPU backend is unavailable, running on INTERPRETER only: {status.reason}"


def example_module(name: str) -> ModuleType:
    """``opgraph_examples.<name>``: the demos the commands run live outside the library, in
    the ``opgraph_examples`` package that installs with opgraph (``examples/`` in a checkout).

    Raises:
        CliError: the package is not installed.
    """
    try:
        return importlib.import_module(f"opgraph_examples.{name}")
    except ModuleNotFoundError as error:
        if error.name not in ("opgraph_examples", f"opgraph_examples.{name}"):
            raise
        raise CliError(
            "the demos are in the opgraph_examples package, which installs with opgraph "
            "(pip install opgraph); in a source checkout, put examples/ on PYTHONPATH"
        ) from None


def check_shape_names(inputs: Sequence[Any], shapes: Mapping[str, Any]) -> None:
    """Every ``--shape NAME=...`` names one of the model's ``inputs`` (``NodeArg``s).

    Raises:
        CliError: listing the unknown names and the model's inputs.
    """
    names = [i.name for i in inputs]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise CliError(
            f"--shape names unknown input(s) {', '.join(unknown)}; the model's inputs: "
            f"{', '.join(names)}"
        )
