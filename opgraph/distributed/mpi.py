"""Starting a distributed job: select MPI as the communicator, abort every rank when one fails.

Launch the script with ``mpiexec -n N python script.py`` and call :func:`init` first. See
``docs/distributed.md`` for the launch lines (one host, several hosts).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
import warnings
from types import TracebackType
from typing import Any

from opgraph.distributed.communicator import (
    Communicator,
    CommunicatorError,
    MPICommunicator,
    SingleProcessCommunicator,
    current_communicator,
    set_communicator,
)
from opgraph.distributed.config import launched_by_mpi

log = logging.getLogger("opgraph.distributed")

#: What ``init(comm)`` accepts by name.
CHOICES = ("mpi", "single")
#: Seconds a failing rank waits between writing its traceback and ``MPI_Abort``: the launcher
#: forwards each rank's output through its own proxies, and an abort ends them with whatever
#: they have not read yet lost (a CI run on 2026-11-26 showed a traceback cut after its second
#: line and no abort line).
ABORT_GRACE = 0.5


class SingleProcessFallbackWarning(RuntimeWarning):
    """``og.distributed.init()`` found no MPI and runs the program as one process."""


__all__ = ["SingleProcessFallbackWarning", "init", "is_initialized", "rank", "shutdown", "size"]

_lock = threading.Lock()
_state: dict[str, Any] = {"communicator": None, "previous_hook": None}


def init(comm: Any = None, *, abort_on_exception: bool = True) -> Communicator:
    """Select the process-wide communicator that collectives use (idempotent).

    Args:
        comm: which one.

            * None (the default): MPI's ``COMM_WORLD`` when mpi4py is installed. Without
              mpi4py, one process, with a :class:`SingleProcessFallbackWarning` — unless
              this process was started by ``mpiexec`` (its launcher variables are set, see
              ``opgraph.distributed.config``), where that would train every rank alone, so
              it raises.
            * ``"single"``: one process (:class:`SingleProcessCommunicator`), explicitly; no
              MPI is imported.
            * ``"mpi"``: MPI's ``COMM_WORLD``; raises when mpi4py is missing.
            * an ``mpi4py.MPI.Comm``: that communicator.

            Importing mpi4py initialises MPI, so this happens here rather than when opgraph
            is imported.
        abort_on_exception: with MPI, install a ``sys.excepthook`` that prints the traceback
            and then calls ``MPI_Abort``: an exception that escapes one rank ends the whole
            job instead of leaving the other ranks waiting forever in a collective.
            :func:`shutdown` restores the previous hook.

    Returns:
        The selected communicator.

    Raises:
        CommunicatorError: MPI was asked for (``"mpi"``, a Comm, or the default under
            ``mpiexec``) and mpi4py (or an MPI library) is not installed; or ``comm`` is a
            string other than ``"mpi"`` and ``"single"``.

    Example::

        import opgraph.distributed as dist
        comm = dist.init()
        print(f"rank {comm.rank} of {comm.size}")
    """
    if isinstance(comm, str) and comm not in CHOICES:
        raise CommunicatorError(
            f"og.distributed.init: comm={comm!r} is not one of {', '.join(map(repr, CHOICES))} "
            "or an mpi4py communicator"
        )
    with _lock:
        existing: Communicator | None = _state["communicator"]
        if existing is not None and _same_choice(existing, comm):
            return existing
        communicator = _choose(comm)
        set_communicator(communicator)
        _state["communicator"] = communicator
        log.info("og.distributed.init: selected %r", communicator)
        if (
            isinstance(communicator, MPICommunicator)
            and abort_on_exception
            and _state["previous_hook"] is None
        ):
            _state["previous_hook"] = sys.excepthook
            sys.excepthook = _abort_hook
        return communicator


def _same_choice(existing: Communicator, comm: Any) -> bool:
    if comm is None:
        return True
    if comm == "single":
        return isinstance(existing, SingleProcessCommunicator)
    if comm == "mpi":
        return isinstance(existing, MPICommunicator)
    return isinstance(existing, MPICommunicator) and existing.comm is comm


def _mpi4py_installed() -> bool:
    try:
        return importlib.util.find_spec("mpi4py") is not None
    except (ImportError, ValueError):  # a stub in sys.modules (None, or without a spec)
        return False


def _choose(comm: Any) -> Communicator:
    """The communicator ``init(comm)`` selects (see :func:`init`)."""
    if comm == "single":
        return SingleProcessCommunicator()
    if comm is not None or _mpi4py_installed():
        return MPICommunicator(None if comm == "mpi" else comm)
    launcher = launched_by_mpi()
    if launcher:
        raise CommunicatorError(
            f"og.distributed.init: this process was started by an MPI launcher ({launcher}) "
            "but mpi4py is not installed, so every rank would train alone; install it "
            "(pip install 'opgraph[dist]') or, to run one process on purpose, call "
            "og.distributed.init('single')"
        )
    warnings.warn(
        "og.distributed.init: mpi4py is not installed, running as a single process (pip "
        "install 'opgraph[dist]' for MPI; og.distributed.init('single') selects one process "
        "without this warning)",
        SingleProcessFallbackWarning,
        stacklevel=3,
    )
    return SingleProcessCommunicator()


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
    """This process's rank in the current communicator.

    Raises:
        CommunicatorError: no communicator is set up (call :func:`init`).
    """
    return current_communicator().rank


def size() -> int:
    """The number of ranks in the current communicator.

    Raises:
        CommunicatorError: no communicator is set up (call :func:`init`).
    """
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
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(ABORT_GRACE)
    communicator.abort(1)
