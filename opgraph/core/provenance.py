"""Where the user built a node: the first stack frame outside the opgraph package."""

from __future__ import annotations

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_frame(skip: int = 1) -> str:
    """``"file.py:41"`` of the innermost caller outside opgraph (``"<unknown>"`` if none)."""
    frame = sys._getframe(skip)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR) or "/examples/" in filename:
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"
