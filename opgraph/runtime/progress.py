"""Compile progress: how a caller learns whether a backend reports it."""

from __future__ import annotations

import inspect
from typing import Any


def accepts_progress(backend: Any) -> bool:
    """Whether ``backend.compile`` takes a ``progress(done, total)`` keyword (the CPU backend
    calls it once per finished batch of generated code)."""
    try:
        return "progress" in inspect.signature(backend.compile).parameters
    except (TypeError, ValueError):
        return False
