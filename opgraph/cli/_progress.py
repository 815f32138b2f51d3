"""A progress bar for compiles that take a while (the CPU backend running the C compiler).

``compile_with_progress(backend, fn)`` compiles as ``backend.compile(fn)`` does; when the
backend reports progress (its ``compile`` takes ``progress=``) and the compile is still
running after ``delay`` seconds, a tqdm bar on stderr counts the batches of generated C code
the compiler has finished. A compile served from the cache, or a quick one, shows nothing.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

from tqdm import tqdm

from opgraph.runtime.progress import accepts_progress

#: Seconds a compile runs before its bar appears.
DELAY_SECONDS = 1.0


class CompileBar:
    """A ``progress(done, total)`` callback drawing a tqdm bar (created on the first call).

    The bar appears ``delay`` seconds after the first call, even while the first batch is
    still compiling, and advances once per finished batch.
    """

    def __init__(self, label: str, stream: TextIO, delay: float = DELAY_SECONDS) -> None:
        self.label = label
        self.stream = stream
        self.delay = delay
        self.bar: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def _show(self) -> None:
        with self._lock:
            if self.bar is not None:
                self.bar.refresh()

    def __call__(self, done: int, total: int) -> None:
        with self._lock:
            self._advance(done, total)

    def _advance(self, done: int, total: int) -> None:
        if self.bar is None:
            self._timer = threading.Timer(self.delay, self._show)
            self._timer.daemon = True
            self._timer.start()
            self.bar = tqdm(
                total=total,
                desc=self.label,
                unit="batch",
                file=self.stream,
                leave=False,
                delay=self.delay,
                dynamic_ncols=True,
            )
        self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None


def compile_with_progress(
    backend: Any,
    function: Any,
    label: str = "compiling",
    enabled: bool = True,
    stream: TextIO | None = None,
    delay: float = DELAY_SECONDS,
) -> Any:
    """``backend.compile(function)``, with a bar on ``stream`` (stderr) when it takes longer
    than ``delay`` seconds and the backend reports its progress."""
    if not enabled or not accepts_progress(backend):
        return backend.compile(function)
    bar = CompileBar(label, stream if stream is not None else sys.stderr, delay)
    try:
        return backend.compile(function, progress=bar)
    finally:
        bar.close()
