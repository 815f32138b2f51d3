"""Splitting a dataset between ranks so that data-parallel training equals one process.

Every rank gets the same number of examples, so every rank takes the same number of steps (a
rank with one step more would wait forever in its extra collective). Only the first
``size * (n // size)`` examples are used; the last ``n % size`` are dropped.

**Strided** sharding (the default) gives rank ``r`` the examples ``r, r + size, r + 2·size…``.
Cut into per-rank batches of ``b``, the ``j``-th batches of all ranks together are exactly the
examples ``[j·size·b, (j+1)·size·b)``: data-parallel training with a per-rank batch of ``b``
sees the same global batches, in the same order, as one process with a batch of ``size·b``.
**Contiguous** sharding gives rank ``r`` the block ``[r·k, (r+1)·k)`` with ``k = n // size``
(the same examples for a full-batch step, but other global batches for minibatches).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from opgraph.core.errors import GraphError
from opgraph.distributed.communicator import current_communicator

__all__ = ["shard", "shard_batches"]


def _rank_and_size(rank: int | None, size: int | None) -> tuple[int, int]:
    if (rank is None) != (size is None):
        raise GraphError("shard: give both rank and size, or neither (the current communicator)")
    if rank is None or size is None:
        communicator = current_communicator()
        return communicator.rank, communicator.size
    if size < 1 or not 0 <= rank < size:
        raise GraphError(f"shard: rank {rank} is not a rank of a group of size {size}")
    return rank, size


def _length(arrays: Sequence[np.ndarray], what: str) -> int:
    if not arrays:
        raise GraphError(f"{what}: no arrays to split")
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise GraphError(
            f"{what}: the arrays have different numbers of examples {sorted(lengths)} "
            "(their first axes must agree)"
        )
    return lengths.pop()


def shard(
    arrays: Sequence[np.ndarray],
    rank: int | None = None,
    size: int | None = None,
    *,
    contiguous: bool = False,
) -> list[np.ndarray]:
    """This rank's equal share of each array, along the first axis.

    Args:
        arrays: the dataset's arrays (e.g. ``[images, labels]``), equal first axes.
        rank: this rank; with ``size``, default from the current communicator.
        size: the number of ranks.
        contiguous: take the block ``[rank·k, (rank+1)·k)`` instead of every ``size``-th
            example starting at ``rank`` (see the module docstring).

    Returns:
        One array per input (views), each with ``n // size`` examples.

    Raises:
        GraphError: no arrays, different lengths, or a rank that is not in ``range(size)``.

    Example::

        x_mine, y_mine = shard([x, y])  # the current communicator's rank and size
    """
    rank, size = _rank_and_size(rank, size)
    per_rank = _length(arrays, "shard") // size
    if contiguous:
        return [a[rank * per_rank : (rank + 1) * per_rank] for a in arrays]
    return [a[rank : per_rank * size : size] for a in arrays]


def shard_batches(
    arrays: Sequence[np.ndarray],
    batch_size: int,
    *,
    seed: int | None = None,
    rank: int | None = None,
    size: int | None = None,
) -> Iterator[list[np.ndarray]]:
    """One epoch of this rank's batches of ``batch_size`` examples (per rank).

    The examples are permuted with ``seed`` (identically on every rank; None keeps their
    order), cut into global batches of ``size · batch_size`` and each global batch is split
    strided between the ranks; incomplete global batches are dropped. So every rank yields the
    same number of batches, and step ``j`` of data-parallel training uses exactly global batch
    ``j`` of a single process trained with ``batch_size · size`` on the same permutation.

    Args:
        arrays: the dataset's arrays, equal first axes.
        batch_size: examples per rank and step.
        seed: the permutation's seed (use the epoch number to reshuffle every epoch).
        rank: this rank; with ``size``, default from the current communicator.
        size: the number of ranks.

    Yields:
        Lists of C-contiguous arrays, one per input, ``batch_size`` examples each.

    Raises:
        GraphError: bad arrays, rank or batch size.
    """
    rank, size = _rank_and_size(rank, size)
    n = _length(arrays, "shard_batches")
    if batch_size < 1:
        raise GraphError(f"shard_batches: batch_size must be at least 1, got {batch_size}")
    order = np.arange(n) if seed is None else np.random.default_rng(seed).permutation(n)
    global_batch = batch_size * size
    for start in range(0, n - global_batch + 1, global_batch):
        rows = order[start + rank : start + global_batch : size]
        yield [np.ascontiguousarray(a[rows]) for a in arrays]
