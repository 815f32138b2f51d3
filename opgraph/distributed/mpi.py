"""Starting a distributed job: select MPI as the communicator, abort every rank when one fails.

Launch the script with ``mpiexec -n N python script.py`` and call :func:`init` first. See
``docs/distributed.md`` for the launch lines (one host, several hosts).
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any

from opgraph.runtime.communicator import (
    Communicator,
    MPICommunicator,
    current_communicator,
    set_communicator,
)

__all__ = ["init", "is_initialized", "rank", "shutdown", "size"]

_lock = threading.Lock()
_state: dict[str, Any] = {"communicator": None, "previous_hook": None}


def init(comm: Any = None, *, abort_on_exception: bool = True) -> MPICommunicator:
    """Select an MPI communicator as the process-wide one (idempotent).

    Args:
        comm: an ``mpi4py.MPI.Comm``; default ``MPI.COMM_WORLD``. Importing mpi4py initialises
            MPI, so this happens here rather than when opgraph is imported.
        abort_on_exception: install a ``sys.excepthook`` that prints the traceback and then
            calls ``MPI_Abort``: an exception that escapes one rank ends the whole job instead
            of leaving the other ranks waiting forever in a collective. :func:`shutdown`
            restores the previous hook.

    Returns:
        The selected :class:`~opgraph.runtime.communicator.MPICommunicator`.

    Raises:
        CommunicatorError: mpi4py (or an MPI library) is not installed.

    Example::

        import opgraph.distributed as dist
        comm = dist.init()
        print(f"rank {comm.rank} of {comm.size}")
    """
    with _lock:
        existing: MPICommunicator | None = _state["communicator"]
        if existing is not None and (comm is None or existing.comm is comm):
            return existing
        communicator = MPICommunicator(comm)
        set_communicator(communicator)
        _state["communicator"] = communicator
        if abort_on_exception and _state["previous_hook"] is None:
            _state["previous_hook"] = sys.excepthook
            sys.excepthook = _abort_hook
        return communicator


def shutdown() -> None:
    """Deselect the communicator :func:`init` selected and restore ``sys.excepthook``.

    MPI itself is finalised by mpi4py when the process exits.
    """
    with _lock:
        if _state["communicator"] is not None:
            set_communicator(None)
            _state["communicator"] = None
        if _state["previous_hook"] is not None:
            sys.excepthook = _state["previous_hook"]
            _state["previous_hook"] = None


def is_initialized() -> bool:
    """True between :func:`init` and :func:`shutdown`."""
    return _state["communicator"] is not None


def rank() -> int:
    """This process's rank in the current communicator (0 when alone)."""
    return current_communicator().rank


def size() -> int:
    """The number of ranks in the current communicator (1 when alone)."""
    return current_communicator().size


def _abort_hook(
    kind: type[BaseException], value: BaseException, traceback: TracebackType | None
) -> None:
    previous = _state["previous_hook"] or sys.__excepthook__
    previous(kind, value, traceback)
    communicator: Communicator | None = _state["communicator"]
    if not isinstance(communicator, MPICommunicator):
        return
    sys.stderr.write(
        f"opgraph.distributed: rank {communicator.rank} of {communicator.size} failed with "
        f"{kind.__name__}: {value}; aborting all ranks (MPI_Abort)\n"
    )
    sys.stderr.flush()
    communicator.abort(1)
