"""Communicators: how the collective ops' kernels talk to the other ranks of a job.

A :class:`Communicator` is a group of ``size`` processes (ranks) that reduce and broadcast
numpy arrays together. The reference kernels of ``AllReduce`` and ``BroadcastDistributed``
(``opgraph.ops.collective``) call :func:`current_communicator` when they run, so every backend
that runs reference kernels runs collectives (nGraph's ``DistributedInterface`` design). The
ops know nothing of communicators; :class:`ReduceOp`, their attribute, is defined with them.

* :class:`SingleProcessCommunicator`: one rank; reductions and broadcasts are copies.
* :class:`MPICommunicator`: mpi4py over ``COMM_WORLD`` or a given communicator, using the
  buffer interface (``Allreduce``/``Bcast``) on numpy arrays.
* :func:`set_communicator` selects the process-wide communicator (``og.distributed.init`` does
  it for MPI); :func:`use_communicator` overrides it within a ``with`` block, for the current
  thread or asyncio task only (in-process simulations run one rank per thread).

**No communicator selected.** A collective run before any communicator is selected raises
:class:`CommunicatorError` saying to call ``og.distributed.init()`` (MPI, or one process when
MPI is not installed) or ``og.distributed.init("single")`` (one process, explicitly), as
``torch.distributed`` and Horovod do. Acting as a lone process instead would let a script that
forgot ``init()`` under ``mpiexec`` train every rank alone, with no error.

**Threads.** Selecting a communicator is thread-safe. Collectives are matched across ranks by
the order in which they are called, so within one rank only one thread at a time may run
Functions that contain collectives on a given communicator (give concurrent threads their own
communicators, e.g. ``MPICommunicator(MPI.COMM_WORLD.Dup())``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

import numpy as np

from opgraph.core.errors import GraphError, OpgraphError
from opgraph.ops.collective import ReduceOp

__all__ = [
    "Communicator",
    "CommunicatorError",
    "MPICommunicator",
    "ReduceOp",
    "SingleProcessCommunicator",
    "as_reduce_op",
    "check_reducible",
    "check_root",
    "current_communicator",
    "get_communicator",
    "reduce_arrays",
    "set_communicator",
    "use_communicator",
]


class CommunicatorError(OpgraphError, RuntimeError):
    """A collective could not run: no communicator where one is needed, or the transport
    (MPI) failed."""


def as_reduce_op(value: ReduceOp | str) -> ReduceOp:
    """A :class:`ReduceOp` from a member or its lower-case name (``"sum"``, ``"mean"``…).

    Raises:
        GraphError: ``value`` names no reduction.
    """
    if isinstance(value, ReduceOp):
        return value
    for member in ReduceOp:
        if value == member.value:
            return member
    names = ", ".join(m.value for m in ReduceOp)
    raise GraphError(f"reduction {value!r} is not one of {names}")


@runtime_checkable
class Communicator(Protocol):
    """A group of ``size`` ranks that reduce and broadcast arrays together.

    Every rank must call the same collectives in the same order with arrays of the same dtype
    and shape. Results are fresh arrays of the input's dtype and shape.
    """

    @property
    def rank(self) -> int:
        """This process's index in the group, ``0 <= rank < size``."""
        ...

    @property
    def size(self) -> int:
        """The number of ranks."""
        ...

    def all_reduce(self, array: np.ndarray, op: ReduceOp | str = ReduceOp.SUM) -> np.ndarray:
        """Combine ``array`` elementwise over all ranks with ``op``; every rank gets the result."""
        ...

    def broadcast(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        """Rank ``root``'s ``array`` on every rank (other ranks' values are ignored)."""
        ...

    def barrier(self) -> None:
        """Return once every rank has called it."""
        ...


# ----------------------------------------------------------------------------- array helpers
def _is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _accumulator(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """16-bit floats are reduced in f32 (as the reduction ops accumulate them), so no MPI
    library needs a 16-bit float type and a sum over many ranks rounds once."""
    return np.dtype(np.float32) if _is_float(dtype) and dtype.itemsize < 4 else dtype


def check_reducible(array: np.ndarray, op: ReduceOp) -> None:
    """Raise ``GraphError`` unless ``op`` can reduce arrays of ``array``'s dtype."""
    if array.dtype == np.bool_:
        raise GraphError(
            "all_reduce: boolean arrays have no arithmetic reduction; convert them to an "
            "integer type (max is any, min is all)"
        )
    if op is ReduceOp.MEAN and not _is_float(array.dtype):
        raise GraphError(
            f"all_reduce: mean needs floating-point arrays, got {array.dtype} (an integer mean "
            "would truncate; reduce with sum and divide explicitly)"
        )


_NUMPY_REDUCTIONS = {
    ReduceOp.SUM: np.add,
    ReduceOp.MEAN: np.add,
    ReduceOp.PROD: np.multiply,
    ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum,
}


def reduce_arrays(arrays: Sequence[np.ndarray], op: ReduceOp | str) -> np.ndarray:
    """The reference reduction of one array per rank, in rank order.

    16-bit floats accumulate in f32 and are rounded once; integers wrap; ``MEAN`` divides the
    sum by ``len(arrays)``. In-process communicators use it; :class:`MPICommunicator` gets the
    same numbers from MPI (up to the summation order of floats over more than two ranks).

    Raises:
        GraphError: no arrays, arrays that differ in dtype or shape, or a dtype ``op`` cannot
            reduce.
    """
    op = as_reduce_op(op)
    if not arrays:
        raise GraphError("all_reduce: no arrays to reduce")
    first = arrays[0]
    for rank, a in enumerate(arrays):
        if a.dtype != first.dtype or a.shape != first.shape:
            raise GraphError(
                f"all_reduce: rank {rank} has {a.dtype}{list(a.shape)}, rank 0 has "
                f"{first.dtype}{list(first.shape)}; every rank must run the same Function"
            )
    check_reducible(first, op)
    wide = _accumulator(first.dtype)
    combine = _NUMPY_REDUCTIONS[op]
    with np.errstate(all="ignore"):
        total = np.array(first, dtype=wide, copy=True)
        for a in arrays[1:]:
            total = combine(total, a.astype(wide, copy=False))
        if op is ReduceOp.MEAN:
            total = total / np.asarray(len(arrays), dtype=wide)
    return np.array(np.asarray(total, dtype=wide), dtype=first.dtype, order="C")


def check_root(root: int, size: int) -> None:
    """Raise ``GraphError`` unless ``root`` is a rank of a group of ``size``."""
    if isinstance(root, bool) or not isinstance(root, int | np.integer) or not 0 <= root < size:
        raise GraphError(f"broadcast: root {root!r} is not a rank of this group (size {size})")


# ------------------------------------------------------------------------------ one process
class SingleProcessCommunicator:
    """A group of one rank: ``all_reduce`` and ``broadcast`` return copies of their input."""

    rank = 0
    size = 1

    def all_reduce(self, array: np.ndarray, op: ReduceOp | str = ReduceOp.SUM) -> np.ndarray:
        """A copy of ``array`` (the reduction over one rank)."""
        return reduce_arrays([np.asarray(array)], op)

    def broadcast(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        """A copy of ``array``; ``root`` must be 0."""
        check_root(root, 1)
        return np.array(array, copy=True, order="C")

    def barrier(self) -> None:
        """Nothing to wait for."""

    def __repr__(self) -> str:
        return "SingleProcessCommunicator()"


# -------------------------------------------------------------------------------------- MPI
def _import_mpi() -> Any:
    try:
        # Optional (the dist extra), and importing it initialises MPI: only when asked for.
        from mpi4py import MPI
    except ImportError as error:
        raise CommunicatorError(
            "MPICommunicator needs mpi4py and an MPI library: pip install 'opgraph[dist]'"
        ) from error
    return MPI


class MPICommunicator:
    """Collectives over an mpi4py communicator (``MPI.COMM_WORLD`` by default).

    Reductions use ``Allreduce`` with ``MPI.SUM``/``PROD``/``MIN``/``MAX`` on the array's own
    MPI type (``MEAN`` is ``SUM`` divided by :attr:`size`; 16-bit floats travel as f32).
    Broadcasts send raw bytes (``Bcast`` of ``MPI.BYTE``), so every element type works,
    booleans and 16-bit floats included. Importing mpi4py initialises MPI, which is why it
    happens here and not when opgraph is imported.

    Args:
        comm: an ``mpi4py.MPI.Comm``; default ``MPI.COMM_WORLD``.

    Raises:
        CommunicatorError: mpi4py is not installed.
    """

    def __init__(self, comm: Any = None) -> None:
        mpi = _import_mpi()
        self._mpi = mpi
        self.comm: Any = mpi.COMM_WORLD if comm is None else comm
        self._rank: int = self.comm.Get_rank()
        self._size: int = self.comm.Get_size()
        self._ops = {
            ReduceOp.SUM: mpi.SUM,
            ReduceOp.MEAN: mpi.SUM,
            ReduceOp.PROD: mpi.PROD,
            ReduceOp.MIN: mpi.MIN,
            ReduceOp.MAX: mpi.MAX,
        }

    @property
    def rank(self) -> int:
        """This process's rank in :attr:`comm`."""
        return self._rank

    @property
    def size(self) -> int:
        """The number of ranks in :attr:`comm`."""
        return self._size

    def all_reduce(self, array: np.ndarray, op: ReduceOp | str = ReduceOp.SUM) -> np.ndarray:
        """``MPI_Allreduce`` of ``array`` with ``op``; a fresh array of its dtype and shape."""
        op = as_reduce_op(op)
        source = np.asarray(array)
        check_reducible(source, op)
        wide = _accumulator(source.dtype)
        send = np.asarray(source, dtype=wide, order="C")
        received = np.empty_like(send)
        with self._errors("Allreduce"):
            self.comm.Allreduce(send, received, op=self._ops[op])
        if op is ReduceOp.MEAN:
            received /= np.asarray(self._size, dtype=wide)
        return received if wide == source.dtype else received.astype(source.dtype)

    def broadcast(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        """``MPI_Bcast`` of rank ``root``'s ``array`` (as bytes); a fresh array."""
        check_root(root, self._size)
        buffer = np.array(array, copy=True, order="C")
        raw = buffer.reshape(-1).view(np.uint8)
        with self._errors("Bcast"):
            self.comm.Bcast([raw, self._mpi.BYTE], root=int(root))
        return buffer

    def barrier(self) -> None:
        """``MPI_Barrier``."""
        with self._errors("Barrier"):
            self.comm.Barrier()

    def abort(self, code: int = 1) -> None:
        """``MPI_Abort``: end every rank of the job (used when one rank fails)."""
        self.comm.Abort(code)

    @contextlib.contextmanager
    def _errors(self, call: str) -> Iterator[None]:
        try:
            yield
        except self._mpi.Exception as error:
            raise CommunicatorError(
                f"MPI {call} failed on rank {self._rank} of {self._size}: {error}"
            ) from error

    def __repr__(self) -> str:
        return f"MPICommunicator(rank={self._rank}, size={self._size})"


# ------------------------------------------------------------------------- the current one
_lock = threading.Lock()
_process_wide: Communicator | None = None
_override: ContextVar[Communicator | None] = ContextVar("opgraph_communicator", default=None)


def set_communicator(communicator: Communicator | None) -> Communicator | None:
    """Select the process-wide communicator (None: none selected); returns the previous one.

    Raises:
        GraphError: ``communicator`` does not have the :class:`Communicator` methods.
    """
    global _process_wide
    if communicator is not None and not isinstance(communicator, Communicator):
        raise GraphError(
            f"set_communicator: {type(communicator).__name__} is not a Communicator (it needs "
            "rank, size, all_reduce, broadcast and barrier)"
        )
    with _lock:
        previous, _process_wide = _process_wide, communicator
    return previous


def get_communicator() -> Communicator | None:
    """The communicator selected for this thread or task, else the process-wide one, else None."""
    override = _override.get()
    return override if override is not None else _process_wide


@contextlib.contextmanager
def use_communicator(communicator: Communicator) -> Iterator[Communicator]:
    """Run the ``with`` block with ``communicator`` selected for the current thread (or asyncio
    task) only; the previous selection is restored on exit.

    Example::

        with use_communicator(SingleProcessCommunicator()):
            exe(x)
    """
    if not isinstance(communicator, Communicator):
        raise GraphError(f"use_communicator: {type(communicator).__name__} is not a Communicator")
    token = _override.set(communicator)
    try:
        yield communicator
    finally:
        _override.reset(token)


def current_communicator() -> Communicator:
    """The communicator collectives use now: the one selected for this thread or task, else
    the process-wide one.

    Raises:
        CommunicatorError: none is selected (the message says how to select one).
    """
    selected = get_communicator()
    if selected is not None:
        return selected
    world = _mpi_world()
    if world is not None and world[1] > 1:
        rank, size = world
        raise CommunicatorError(
            f"a collective ran on MPI rank {rank} of {size} without an opgraph communicator; "
            "call og.distributed.init() (or og.distributed.use_communicator(...)) before "
            "running it, otherwise each rank would reduce over itself alone"
        )
    raise CommunicatorError(
        "a collective (all_reduce, broadcast_distributed) or a rank query ran with no "
        "communicator set up; call og.distributed.init() first (MPI under mpiexec, one process "
        "when MPI is not installed), or og.distributed.init('single') to run as one process "
        "explicitly (og.distributed.use_communicator(...) selects one for a block)"
    )


def _mpi_world() -> tuple[int, int] | None:
    """``(rank, size)`` of ``MPI.COMM_WORLD`` when mpi4py is loaded and MPI is running.

    Looks in ``sys.modules`` only: importing mpi4py here would initialise MPI.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return None
    try:
        if not mpi.Is_initialized() or mpi.Is_finalized():
            return None
        world = mpi.COMM_WORLD
        return int(world.Get_rank()), int(world.Get_size())
    except Exception:  # a half-initialised MPI: treat as not running
        return None
