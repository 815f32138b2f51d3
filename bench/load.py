"""Busy-looping processes beside a measurement (``bench/run.py --load N``).

Each is a Python process spinning in ``while True: pass``: one core's worth of demand that
never sleeps. They are **not pinned**: the scheduler places and moves them as it does any
other process of a shared machine, so every runtime meets them on whichever core it runs.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

#: Seconds the loops run before the measurement starts (interpreter start-up).
START = 0.3


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` spinning processes for the duration of the ``with`` block (killed after)."""
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(START)
        yield processes
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()
