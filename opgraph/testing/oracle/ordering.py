"""Oracle entries for ordering ops: each lane along the axis searched, ranked or summed in
Python, with the orders spelled out as sort keys."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops import ordering as od
from opgraph.testing.oracle.registry import ORACLE, narrow, wide


def _lanes(shape: tuple[int, ...], axis: int) -> list[tuple[Any, ...]]:
    """Index tuples (with a full slice at ``axis``) of every lane along ``axis``."""
    outer = shape[:axis] + shape[axis + 1 :]
    return [(*idx[:axis], slice(None), *idx[axis:]) for idx in np.ndindex(*outer)]


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _rank_key(
    largest: bool, nan_first: bool, last: bool = False
) -> Callable[[tuple[int, Any]], tuple[Any, ...]]:
    """Sort key of ``(index, value)``, best first: NaN first or last, then by value, then
    the lower index (the higher one when ``last``)."""

    def key(item: tuple[int, Any]) -> tuple[Any, ...]:
        index, value = item
        tie = -index if last else index
        if _is_nan(value):
            return (0 if nan_first else 2, 0, tie)
        return (1, -value if largest else value, tie)

    return key


def _arg(op: od.IndexReduction, x: np.ndarray, largest: bool) -> np.ndarray:
    values = wide(x)
    key = _rank_key(largest, nan_first=True, last=op.select_last_index)
    out_shape = tuple(d for i, d in enumerate(x.shape) if i != op.axis)
    result = np.zeros(out_shape, np.int64)
    for lane in _lanes(x.shape, op.axis):
        best, _ = min(enumerate(values[lane].tolist()), key=key)
        result[tuple(i for i in lane if not isinstance(i, slice))] = best
    if op.keep_dims:
        result = np.expand_dims(result, op.axis)
    return result.astype(op.index_element_type.dtype)


@ORACLE.register(od.ArgMax)
def _arg_max(op: od.ArgMax, x: np.ndarray, out: Any) -> np.ndarray:
    return _arg(op, x, largest=True)


@ORACLE.register(od.ArgMin)
def _arg_min(op: od.ArgMin, x: np.ndarray, out: Any) -> np.ndarray:
    return _arg(op, x, largest=False)  # a NaN is found first here too: NaN propagates


@ORACLE.register(od.TopK)
def _top_k(op: od.TopK, x: np.ndarray, out: Any) -> tuple[np.ndarray, np.ndarray]:
    shape = tuple(op.k if i == op.axis else d for i, d in enumerate(x.shape))
    values = np.zeros(shape, x.dtype)
    indices = np.zeros(shape, np.int64)
    for lane in _lanes(x.shape, op.axis):
        key = _rank_key(op.largest, nan_first=op.largest)
        ranked = sorted(enumerate(wide(x)[lane].tolist()), key=key)
        chosen = [i for i, _ in ranked[: op.k]]
        if not op.sorted:
            chosen.sort()
        indices[lane] = chosen
        values[lane] = x[lane][chosen]
    return values, narrow(indices, out, 1)


@ORACLE.register(od.CumSum)
def _cumsum(op: od.CumSum, x: np.ndarray, out: Any) -> np.ndarray:
    source = wide(x)
    result = np.zeros(x.shape, source.dtype)
    for lane in _lanes(x.shape, op.axis):
        items = source[lane].tolist()
        n = len(items)
        for i in range(n):
            if op.reverse:
                chosen = range(i + 1 if op.exclusive else i, n)
            else:
                chosen = range(0, i if op.exclusive else i + 1)
            result[lane][i] = sum(items[j] for j in chosen)
    return narrow(result, out)
