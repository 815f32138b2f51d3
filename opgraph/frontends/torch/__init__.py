"""The PyTorch bridge: ``import_exported`` and the ``"opgraph"`` torch.compile backend.

``import opgraph.frontends.torch`` registers the backend with dynamo, so
``torch.compile(model, backend="opgraph")`` works; the backend function is also
``opgraph.frontends.torch.backend``. ``torch`` is an optional dependency
(``pip install -e ".[torch]"``); importing this package without it raises a ConversionError
that says so. See ``docs/torch.md``.
"""

from __future__ import annotations

import contextlib

try:
    import torch as _torch
except ImportError as error:  # pragma: no cover - exercised only without the extra
    from opgraph.core.errors import ConversionError

    raise ConversionError(
        "the PyTorch bridge needs torch: pip install -e '.[torch]' (torch==2.13.0)"
    ) from error

from importlib.metadata import entry_points

from opgraph.frontends.torch.dynamo import BackendOptions, FallbackWarning, backend
from opgraph.frontends.torch.importer import import_exported
from opgraph.frontends.torch.registry import aten_op, registered
from opgraph.frontends.torch.threads import share_torch_team
from opgraph.frontends.torch.train_step import TrainStep, compile_train_step

BACKEND_NAME = "opgraph"


def _register_backend() -> None:
    """Register :func:`backend` with dynamo as ``"opgraph"`` unless an installed
    ``torch_dynamo_backends`` entry point already provides it (dynamo loads that lazily)."""

    if any(ep.name == BACKEND_NAME for ep in entry_points(group="torch_dynamo_backends")):
        return
    # dynamo asserts on a duplicate name: an earlier import (a module reload) registered it.
    with contextlib.suppress(AssertionError):
        _torch._dynamo.register_backend(backend, name=BACKEND_NAME)


_register_backend()

__all__ = [
    "BackendOptions",
    "FallbackWarning",
    "TrainStep",
    "aten_op",
    "backend",
    "compile_train_step",
    "import_exported",
    "registered",
    "share_torch_team",
]
