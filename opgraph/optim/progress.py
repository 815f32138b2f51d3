"""A per-epoch progress bar: tqdm when it is installed, else a small built-in one."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

_REFRESH_SECONDS = 0.1


class ProgressBar:
    """A minimal text progress bar (used when tqdm is missing), written to a stream."""

    def __init__(self, total: int, desc: str, stream: TextIO, width: int = 30) -> None:
        self.total, self.desc, self.stream, self.width = total, desc, stream, width
        self.done = 0
        self.postfix = ""
        self._started = time.perf_counter()
        self._drawn = 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self._drawn >= _REFRESH_SECONDS or self.done >= self.total:
            self._drawn = now
            self._draw()

    def set_postfix_str(self, text: str, refresh: bool = False) -> None:
        self.postfix = text

    def _draw(self) -> None:
        filled = self.width * self.done // max(self.total, 1)
        elapsed = time.perf_counter() - self._started
        bar = "#" * filled + "." * (self.width - filled)
        line = f"\r{self.desc} [{bar}] {self.done}/{self.total} {elapsed:.1f}s {self.postfix}"
        self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str, refresh: bool = False) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str, enabled: bool = True, stream: TextIO | None = None) -> Any:
    """A progress bar with ``update(n)``, ``set_postfix_str(text, refresh)`` and ``close()``.

    Args:
        total: the number of steps.
        desc: the label in front of the bar.
        enabled: ``False`` gives a bar that draws nothing.
        stream: where to draw (default stderr).
    """
    if not enabled:
        return _Silent()
    out = stream if stream is not None else sys.stderr
    try:
        # deferred: tqdm is slow to import, and a plain bar stands in without it
        from tqdm import tqdm
    except ImportError:
        return ProgressBar(total, desc, out)
    return tqdm(total=total, desc=desc, file=out, leave=True, dynamic_ncols=True)
