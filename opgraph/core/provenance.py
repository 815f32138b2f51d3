"""Where a node was built: the user's source line, or a label a bridge sets.

By default a node records the first stack frame outside the opgraph package. A framework
bridge wraps each conversion in :func:`provenance_scope` so nodes it builds name the model's
node instead (``onnx node 'conv1' (Conv)``), which is what a user needs to find the problem.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar("provenance", default=None)


def user_frame(skip: int = 1) -> str:
    """The active provenance label, else ``"file.py:41"`` of the innermost caller outside
    opgraph (``"<unknown>"`` if none)."""
    label = _SCOPE.get()
    if label is not None:
        return label
    frame = sys._getframe(skip)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR) or "/examples/" in filename:
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


@contextlib.contextmanager
def provenance_scope(label: str) -> Iterator[None]:
    """Nodes built inside the ``with`` block record ``label`` as their provenance."""
    token = _SCOPE.set(label)
    try:
        yield
    finally:
        _SCOPE.reset(token)
