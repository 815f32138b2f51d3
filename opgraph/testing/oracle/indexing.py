"""Oracle entries for indexing: one element at a time, in write order for the scatters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.ops import indexing as ix
from opgraph.testing.oracle.registry import ORACLE, narrow, wide

Reduction = ix.ScatterReduction


def _wrap(index: Any, size: int) -> int:
    i = int(index)
    assert -size <= i < size, f"oracle: index {i} out of range for size {size}"
    return i + size if i < 0 else i


@ORACLE.register(ix.Gather)
def _gather(op: ix.Gather, x: np.ndarray, indices: np.ndarray, out: Any) -> np.ndarray:
    b, axis, q = op.batch_dims, op.axis, indices.ndim
    result = np.empty(out[0].shape, x.dtype)
    for o in np.ndindex(*result.shape):
        batch, middle = o[:b], o[b:axis]
        inner, tail = o[axis : axis + q - b], o[axis + q - b :]
        i = _wrap(indices[batch + inner], x.shape[axis])
        result[o] = x[(*batch, *middle, i, *tail)]
    return result


@ORACLE.register(ix.GatherND)
def _gather_nd(op: ix.GatherND, x: np.ndarray, indices: np.ndarray, out: Any) -> np.ndarray:
    b, q, k = op.batch_dims, indices.ndim, indices.shape[-1]
    result = np.empty(out[0].shape, x.dtype)
    for o in np.ndindex(*result.shape):
        prefix, rest = o[: q - 1], o[q - 1 :]
        coords = [_wrap(indices[prefix][c], x.shape[b + c]) for c in range(k)]
        result[o] = x[(*o[:b], *coords, *rest)]
    return result


@ORACLE.register(ix.GatherElements)
def _gather_elements(
    op: ix.GatherElements, x: np.ndarray, indices: np.ndarray, out: Any
) -> np.ndarray:
    result = np.empty(indices.shape, x.dtype)
    for o in np.ndindex(*indices.shape):
        source = list(o)
        source[op.axis] = _wrap(indices[o], x.shape[op.axis])
        result[o] = x[tuple(source)]
    return result


_COMBINE: dict[Reduction, Callable[[Any, Any], Any]] = {
    Reduction.NONE: lambda old, new: new,
    Reduction.ADD: lambda old, new: old + new,
    Reduction.MUL: lambda old, new: old * new,
    Reduction.MAX: np.maximum,
    Reduction.MIN: np.minimum,
}


@ORACLE.register(ix.ScatterElements)
def _scatter_elements(
    op: ix.ScatterElements, x: np.ndarray, indices: np.ndarray, updates: np.ndarray, out: Any
) -> np.ndarray:
    result, values = wide(x).copy(), wide(updates)
    combine = _COMBINE[op.reduction]
    for p in np.ndindex(*indices.shape):  # row-major: the write order
        target = list(p)
        target[op.axis] = _wrap(indices[p], x.shape[op.axis])
        result[tuple(target)] = combine(result[tuple(target)], values[p])
    return narrow(result, out)


@ORACLE.register(ix.ScatterND)
def _scatter_nd(
    op: ix.ScatterND, x: np.ndarray, indices: np.ndarray, updates: np.ndarray, out: Any
) -> np.ndarray:
    result, values = wide(x).copy(), wide(updates)
    combine = _COMBINE[op.reduction]
    k = indices.shape[-1]
    for p in np.ndindex(*indices.shape[:-1]):
        coords = tuple(_wrap(indices[p][c], x.shape[c]) for c in range(k))
        for s in np.ndindex(*x.shape[k:]):
            result[coords + s] = combine(result[coords + s], values[p + s])
    return narrow(result, out)


@ORACLE.register(ix.OneHot)
def _one_hot(op: ix.OneHot, indices: np.ndarray, out: Any) -> np.ndarray:
    result = np.full(out[0].shape, op.off_value, dtype=op.element_type.dtype)
    for p in np.ndindex(*indices.shape):
        i = int(indices[p])
        if -op.depth <= i < 0:
            i += op.depth
        if 0 <= i < op.depth:
            result[(*p[: op.axis], i, *p[op.axis :])] = op.on_value
    return result
