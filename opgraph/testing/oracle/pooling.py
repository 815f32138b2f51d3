"""Oracle entries for pooling: loops over output positions and window taps."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from opgraph.ops.pooling import AvgPool, MaxPool, MaxPoolBackprop, MaxPoolBase, MaxPoolWithIndices
from opgraph.testing.oracle.registry import ORACLE, narrow, wide


def _at(*parts: Any) -> Any:
    return parts


def _grid(shape: Sequence[int]) -> Iterator[tuple[int, ...]]:
    return itertools.product(*(range(n) for n in shape))


def _tap_coordinates(
    op: Any, position: Sequence[int], tap: Sequence[int], dilations: Sequence[int]
) -> list[int]:
    """Data coordinates of ``tap`` of the window at ``position`` (may be outside the data)."""
    return [
        o * s - pb + t * dl
        for o, s, pb, t, dl in zip(
            position, op.strides, op.padding_below, tap, dilations, strict=True
        )
    ]


@ORACLE.register(AvgPool)
def _avg_pool(op: AvgPool, x: np.ndarray, out: Any) -> np.ndarray:
    xw = wide(x)
    shape = out[0].shape
    spatial = x.shape[2:]
    result = np.zeros(shape, np.float64)
    ones = (1,) * len(spatial)
    below, above = op.padding_below or (), op.padding_above or ()
    for position in _grid(shape[2:]):
        total = np.zeros(shape[:2], np.float64)
        count = 0
        for tap in _grid(op.window_shape):
            q = _tap_coordinates(op, position, tap, ones)
            if all(0 <= c < d for c, d in zip(q, spatial, strict=True)):
                total += xw[_at(slice(None), slice(None), *q)]
                count += 1
            elif op.include_padding and all(
                -pb <= c < d + pa for c, d, pb, pa in zip(q, spatial, below, above, strict=True)
            ):
                count += 1  # a padding zero counted in the divisor
        result[_at(slice(None), slice(None), *position)] = total / count
    return narrow(result, out)


def _first_maxima(op: MaxPoolBase, x: np.ndarray, out_shape: Sequence[int]) -> Any:
    """For every output position: the maximum and the data coordinates where it was first
    seen (a NaN beats everything and the first NaN stays)."""
    xw = wide(x)
    is_float = xw.dtype.kind == "f"
    spatial = x.shape[2:]
    dilations = op.dilations or (1,) * len(spatial)
    found: dict[tuple[int, ...], tuple[np.ndarray, list[np.ndarray]]] = {}
    for position in _grid(out_shape[2:]):
        best: np.ndarray | None = None
        where: list[np.ndarray] = []
        for tap in _grid(op.window_shape):
            q = _tap_coordinates(op, position, tap, dilations)
            if not all(0 <= c < d for c, d in zip(q, spatial, strict=True)):
                continue  # padding never wins
            value = xw[_at(slice(None), slice(None), *q)]
            if best is None:
                best, where = value.copy(), [np.full(value.shape, c) for c in q]
                continue
            better = value > best
            if is_float:
                better = (better | np.isnan(value)) & ~np.isnan(best)
            best = np.where(better, value, best)
            where = [np.where(better, c, w) for c, w in zip(q, where, strict=True)]
        assert best is not None, "the type rule forbids windows entirely in padding"
        found[position] = (best, where)
    return found


def _flat_index(shape: Sequence[int], where: list[np.ndarray]) -> np.ndarray:
    n = np.arange(shape[0])[:, None]
    c = np.arange(shape[1])[None, :]
    index = n * shape[1] + c
    for coordinate, extent in zip(where, shape[2:], strict=True):
        index = index * extent + coordinate
    return index


@ORACLE.register(MaxPool)
def _max_pool(op: MaxPool, x: np.ndarray, out: Any) -> np.ndarray:
    result = np.zeros(out[0].shape, wide(x).dtype)
    for position, (best, _) in _first_maxima(op, x, out[0].shape).items():
        result[_at(slice(None), slice(None), *position)] = best
    return narrow(result, out)


@ORACLE.register(MaxPoolWithIndices)
def _max_pool_with_indices(
    op: MaxPoolWithIndices, x: np.ndarray, out: Any
) -> tuple[np.ndarray, np.ndarray]:
    values = np.zeros(out[0].shape, wide(x).dtype)
    indices = np.zeros(out[1].shape, np.int64)
    for position, (best, where) in _first_maxima(op, x, out[0].shape).items():
        values[_at(slice(None), slice(None), *position)] = best
        indices[_at(slice(None), slice(None), *position)] = _flat_index(x.shape, where)
    return narrow(values, out), narrow(indices, out, 1)


@ORACLE.register(MaxPoolBackprop)
def _max_pool_backprop(op: MaxPoolBackprop, x: np.ndarray, ct: np.ndarray, out: Any) -> np.ndarray:
    result = np.zeros(x.shape, np.float64)
    cw = wide(ct)
    for position, (_, where) in _first_maxima(op, x, ct.shape).items():
        for n, c in _grid(x.shape[:2]):
            target = (n, c, *(int(w[n, c]) for w in where))
            result[target] += cw[(n, c, *position)]
    return narrow(result, out)
