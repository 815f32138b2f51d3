"""Oracle entries for the collective ops, for a job of one rank.

The oracle runs in one process, so it states the one-rank semantics: a reduction over a single
rank (``sum``, ``prod``, ``min``, ``max`` and ``mean``, which divides by one) and a broadcast
from rank 0 both give the input. Multi-rank semantics are tested in ``tests/distributed``
against numpy reductions over the ranks' inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops.collective import AllReduce, BroadcastDistributed, ReduceOp
from opgraph.testing.oracle.registry import ORACLE, narrow, wide

_RANKS = 1


_COMBINE: dict[ReduceOp, Callable[..., Any]] = {
    ReduceOp.SUM: np.sum,
    ReduceOp.MEAN: np.sum,
    ReduceOp.PROD: np.prod,
    ReduceOp.MIN: np.min,
    ReduceOp.MAX: np.max,
}


@ORACLE.register(AllReduce)
def _all_reduce(op: AllReduce, x: np.ndarray, out: Any) -> np.ndarray:
    total = _COMBINE[op.reduction]([wide(x)] * _RANKS, axis=0)
    if op.reduction is ReduceOp.MEAN:
        total = total / _RANKS
    return narrow(total, out)


@ORACLE.register(BroadcastDistributed)
def _broadcast_distributed(op: BroadcastDistributed, x: np.ndarray, out: Any) -> np.ndarray:
    if op.root >= _RANKS:
        raise ValueError(f"broadcast root {op.root} is not a rank of a one-rank job")
    return np.array(x, copy=True)
