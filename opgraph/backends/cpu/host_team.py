"""The runtime's parallel jobs on the host framework's GNU OpenMP team.

When a frontend declares that its framework runs on GNU OpenMP
(:func:`opgraph.runtime.host_threads.declare_host_openmp`; the torch bridge does), every
loaded runtime library gets the address of ``GOMP_parallel`` in that already loaded libgomp
(``og_set_team``): ``og_parallel`` then shares its blocks out to the framework's own OpenMP
workers (the same work claiming, the caller first) instead of waking its own, so the two never
spin against each other for the cores. The library is looked up with ``RTLD_NOLOAD``: nothing
is ever loaded for it, and when it is not in the process the pool keeps its own workers.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading

from opgraph.runtime import host_threads

log = logging.getLogger("opgraph.cpu")


def gomp_parallel(library: str) -> int | None:
    """The address of ``GOMP_parallel`` in ``library`` when that library is already loaded
    in this process (a soname such as ``libgomp.so.1``, or the path it was loaded from);
    None when it is not loaded or has no such function."""
    try:
        handle = ctypes.CDLL(library, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        function = handle.GOMP_parallel
    except (OSError, AttributeError):
        return None
    address: int | None = ctypes.cast(function, ctypes.c_void_p).value
    return address


class _Teams:
    """The loaded runtime libraries, each told the host team of the current declaration."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runtimes: list[ctypes.CDLL] = []
        self.team: int | None = None

    def attach(self, runtime: ctypes.CDLL) -> None:
        with self.lock:
            self.runtimes.append(runtime)
            runtime.og_set_team(ctypes.c_void_p(self.team))

    def changed(self, library: str | None) -> None:
        team = gomp_parallel(library) if library is not None else None
        if library is not None:
            if team is None:
                log.info("host OpenMP %s is not loaded: the own thread pool runs", library)
            else:
                log.debug("parallel kernels run on the host's OpenMP team (%s)", library)
        with self.lock:
            self.team = team
            for runtime in self.runtimes:
                runtime.og_set_team(ctypes.c_void_p(team))


_TEAMS = _Teams()
host_threads.on_change(_TEAMS.changed)


def attach(runtime: ctypes.CDLL) -> None:
    """Have ``runtime`` (a loaded runtime library) follow the host-team declaration."""
    _TEAMS.attach(runtime)


def team_set(runtime: ctypes.CDLL) -> bool:
    """Whether ``runtime`` runs its parallel jobs on a host team now."""
    return bool(runtime.og_team_set())
