"""Sharding a dataset between ranks: equal shares, and batches that equal one process's."""

import numpy as np
import pytest

import opgraph as og
from opgraph.distributed import LocalGroup, shard, shard_batches

X = np.arange(22).reshape(11, 2)  # 11 examples of 2 features
Y = np.arange(11) * 10


@pytest.mark.parametrize("contiguous", [False, True])
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_rank_gets_the_same_number_of_examples(size, contiguous):
    shards = [shard([X, Y], r, size, contiguous=contiguous) for r in range(size)]
    per_rank = len(X) // size
    for x, y in shards:
        assert len(x) == len(y) == per_rank
        np.testing.assert_array_equal(x[:, 0] // 2 * 10, y)  # rows stay paired
    used = np.sort(np.concatenate([y for _, y in shards]))
    np.testing.assert_array_equal(used, Y[: per_rank * size])  # the first size·k, each once


def test_strided_and_contiguous_layouts():
    assert shard([Y], 1, 3)[0].tolist() == [10, 40, 70]
    assert shard([Y], 1, 3, contiguous=True)[0].tolist() == [30, 40, 50]
    assert shard([Y], 0, 1)[0].tolist() == Y.tolist()


def test_shards_are_views():
    (x,) = shard([X], 0, 2, contiguous=True)
    assert np.shares_memory(x, X)


def test_default_rank_and_size_come_from_the_current_communicator():
    results = LocalGroup(2).run(lambda comm: shard([Y])[0].tolist())
    assert results == [[0, 20, 40, 60, 80], [10, 30, 50, 70, 90]]
    assert shard([Y])[0].tolist() == Y.tolist()  # alone: everything


def test_shard_errors():
    with pytest.raises(og.GraphError, match="give both rank and size, or neither"):
        shard([X], rank=0)
    with pytest.raises(og.GraphError, match="rank 3 is not a rank of a group of size 3"):
        shard([X], 3, 3)
    with pytest.raises(og.GraphError, match=r"different numbers of examples \[10, 11\]"):
        shard([X, Y[:10]], 0, 2)
    with pytest.raises(og.GraphError, match="no arrays to split"):
        shard([], 0, 2)


@pytest.mark.parametrize("seed", [None, 3])
@pytest.mark.parametrize("size", [1, 2, 3])
def test_rank_batches_together_are_one_process_batches(size, seed):
    batch = 2
    order = np.arange(len(X)) if seed is None else np.random.default_rng(seed).permutation(len(X))
    per_rank = [
        list(shard_batches([X, Y], batch, seed=seed, rank=r, size=size)) for r in range(size)
    ]
    steps = len(X) // (batch * size)
    assert all(len(batches) == steps for batches in per_rank)
    for j in range(steps):
        together = np.sort(np.concatenate([per_rank[r][j][1] for r in range(size)]))
        global_batch = Y[order[j * batch * size : (j + 1) * batch * size]]
        np.testing.assert_array_equal(together, np.sort(global_batch))
        for r in range(size):
            x, y = per_rank[r][j]
            assert x.flags.c_contiguous and len(y) == batch
            np.testing.assert_array_equal(x[:, 0] // 2 * 10, y)


def test_shard_batches_errors():
    with pytest.raises(og.GraphError, match="batch_size must be at least 1, got 0"):
        next(shard_batches([X], 0, rank=0, size=1))
    assert list(shard_batches([X], 6, rank=0, size=2)) == []  # no complete global batch
