"""The thread pool of the framework opgraph runs inside, when a frontend declares one.

A framework that hosts opgraph (PyTorch, through the torch bridge) runs its own operations on
its own worker threads between opgraph's calls. On a machine with few cores two pools that
both spin-wait for work take the cores from each other: after each of its parallel regions,
GNU OpenMP's idle workers spin for milliseconds, the time opgraph's next call needs those
cores. A frontend that knows its framework runs on GNU OpenMP says so here
(:func:`declare_host_openmp`), and a backend that can run its parallel work on that same team
(the CPU backend: ``og_parallel`` on ``GOMP_parallel``) does: one set of workers, which the
framework's and opgraph's work use in turn. Backends learn of changes through
:func:`on_change`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_lock = threading.Lock()
_library: str | None = None
_listeners: list[Callable[[str | None], None]] = []


def declare_host_openmp(library: str = "libgomp.so.1") -> None:
    """Declare that the host framework runs its parallel work on GNU OpenMP.

    Args:
        library: the already loaded libgomp to share (a soname or the path it was loaded
            from); it is looked up among the loaded libraries only, never loaded.
    """
    _set(library)


def withdraw_host_openmp() -> None:
    """Undo :func:`declare_host_openmp`: backends go back to their own thread pools."""
    _set(None)


def host_openmp() -> str | None:
    """The GNU OpenMP library declared by :func:`declare_host_openmp`, or None."""
    return _library


def on_change(listener: Callable[[str | None], None]) -> None:
    """Call ``listener(host_openmp())`` now and after every change of the declaration."""
    with _lock:
        _listeners.append(listener)
        listener(_library)


def _set(library: str | None) -> None:
    global _library
    if library == _library:
        return  # the common case, called per call: no lock
    with _lock:
        if library == _library:
            return
        _library = library
        for listener in _listeners:
            listener(library)
