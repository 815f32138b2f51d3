"""Several ranks in one process, one thread each: test distributed programs without MPI.

:class:`LocalGroup` ``(size)`` holds ``size`` :class:`LocalCommunicator` s that exchange arrays
through shared slots and a barrier. :meth:`LocalGroup.run` calls a function once per rank, each
in its own thread with that rank's communicator selected (``use_communicator``), so compiled
Functions with collectives run as they would under ``mpiexec``. Reductions use
:func:`~opgraph.distributed.communicator.reduce_arrays` (in rank order), so every rank computes
the same result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from opgraph.core.errors import GraphError
from opgraph.distributed.communicator import (
    CommunicatorError,
    ReduceOp,
    check_root,
    reduce_arrays,
    use_communicator,
)

__all__ = ["LocalCommunicator", "LocalGroup"]

T = TypeVar("T")


class LocalGroup:
    """``size`` in-process ranks that run in threads.

    Args:
        size: the number of ranks (at least 1).
        timeout: seconds a rank waits for the others in a collective before failing (a rank
            that stops calling collectives must not hang the test that runs it).

    Example::

        group = LocalGroup(2)
        results = group.run(lambda comm: comm.all_reduce(np.ones(3) * comm.rank))
    """

    def __init__(self, size: int, timeout: float = 60.0) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise GraphError(f"LocalGroup: size must be a positive int, got {size!r}")
        self.size = size
        self.timeout = timeout
        self._barrier = threading.Barrier(size)
        self._slots: list[Any] = [None] * size
        self.communicators = [LocalCommunicator(self, rank) for rank in range(size)]

    def run(self, fn: Callable[[LocalCommunicator], T]) -> list[T]:
        """Call ``fn(communicator)`` once per rank, each in its own thread with that rank's
        communicator selected; return the results in rank order.

        Raises:
            The exception of the lowest failing rank (the others are released from their
            collectives with ``CommunicatorError``), with a note naming the rank.
        """
        self._barrier.reset()
        results: list[Any] = [None] * self.size
        errors: list[BaseException | None] = [None] * self.size

        def body(rank: int) -> None:
            communicator = self.communicators[rank]
            try:
                with use_communicator(communicator):
                    results[rank] = fn(communicator)
            except BaseException as error:
                errors[rank] = error
                self._barrier.abort()  # release the ranks waiting for this one

        threads = [
            threading.Thread(target=body, args=(rank,), name=f"opgraph-rank-{rank}")
            for rank in range(self.size)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failures = [(rank, e) for rank, e in enumerate(errors) if e is not None]
        if failures:
            # The first rank that failed for its own reason, else the first failure.
            own = [f for f in failures if not isinstance(f[1], _Released)]
            rank, error = (own or failures)[0]
            error.add_note(f"raised on rank {rank} of a LocalGroup of {self.size}")
            raise error
        return results

    def exchange(self, rank: int, value: np.ndarray) -> list[np.ndarray]:
        """A copy of every rank's ``value``, in rank order (a collective: all ranks must call
        it). Copies, because a caller may reuse its buffer as soon as it returns (a backend's
        arena), while slower ranks still read."""
        self._slots[rank] = np.array(value, copy=True)
        self.wait(rank)
        values = list(self._slots)
        self.wait(rank)  # nobody writes the next value before everyone has read this one
        return values

    def wait(self, rank: int) -> None:
        """A barrier over the group's ranks."""
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            raise _Released(
                f"rank {rank} of a LocalGroup of {self.size}: another rank failed or did not "
                f"reach the collective within {self.timeout} s"
            ) from None


class _Released(CommunicatorError):
    """A rank was released from a collective because another rank failed."""


class LocalCommunicator:
    """One rank of a :class:`LocalGroup` (a
    :class:`~opgraph.distributed.communicator.Communicator`).

    Its methods must be called from the rank's own thread, as collectives: every rank of the
    group calls the same ones in the same order.
    """

    def __init__(self, group: LocalGroup, rank: int) -> None:
        self.group = group
        self._rank = rank

    @property
    def rank(self) -> int:
        """This rank."""
        return self._rank

    @property
    def size(self) -> int:
        """The group's size."""
        return self.group.size

    def all_reduce(self, array: np.ndarray, op: ReduceOp | str = ReduceOp.SUM) -> np.ndarray:
        """The reduction of every rank's ``array`` (in rank order)."""
        return reduce_arrays(self.group.exchange(self._rank, np.asarray(array)), op)

    def broadcast(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        """A copy of rank ``root``'s ``array``."""
        check_root(root, self.size)
        values = self.group.exchange(self._rank, np.asarray(array))
        return np.array(values[root], copy=True, order="C")  # each rank its own copy

    def barrier(self) -> None:
        """Wait for every rank."""
        self.group.wait(self._rank)

    def __repr__(self) -> str:
        return f"LocalCommunicator(rank={self._rank}, size={self.size})"
