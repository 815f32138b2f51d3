"""Oracle entries for data movement (index arithmetic, not the kernels' numpy shortcuts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.ops import movement as mv
from opgraph.testing.oracle.registry import ORACLE


@ORACLE.register(mv.Broadcast)
def _broadcast(op: mv.Broadcast, x: np.ndarray, out: Any) -> np.ndarray:
    result = np.empty(op.shape, x.dtype)
    kept = [a for a in range(len(op.shape)) if a not in op.broadcast_axes]
    for index in np.ndindex(*op.shape):
        result[index] = x[tuple(index[a] for a in kept)]
    return result


@ORACLE.register(mv.Reshape)
def _reshape(op: mv.Reshape, x: np.ndarray, out: Any) -> np.ndarray:
    assert op.input_order is not None
    permuted_shape = [x.shape[a] for a in op.input_order]
    flat = [
        x[tuple(idx[op.input_order.index(a)] for a in range(x.ndim))]
        for idx in np.ndindex(*permuted_shape)
    ]
    return np.array(flat, dtype=x.dtype).reshape(op.output_shape)


@ORACLE.register(mv.Transpose)
def _transpose(op: mv.Transpose, x: np.ndarray, out: Any) -> np.ndarray:
    result = np.empty(tuple(x.shape[a] for a in op.perm), x.dtype)
    for index in np.ndindex(*result.shape):
        source = [0] * x.ndim
        for out_axis, in_axis in enumerate(op.perm):
            source[in_axis] = index[out_axis]
        result[index] = x[tuple(source)]
    return result


@ORACLE.register(mv.Slice)
def _slice(op: mv.Slice, x: np.ndarray, out: Any) -> np.ndarray:
    assert op.strides is not None
    result = x
    for axis, (lo, hi, step) in enumerate(
        zip(op.lower_bounds, op.upper_bounds, op.strides, strict=True)
    ):
        result = np.take(result, np.arange(lo, hi, step, dtype=np.int64), axis=axis)
    return result


@ORACLE.register(mv.Concat)
def _concat(op: mv.Concat, *xs: np.ndarray, out: Any) -> np.ndarray:
    return np.concatenate(xs, axis=op.axis)


@ORACLE.register(mv.ReplaceSlice)
def _replace_slice(op: mv.ReplaceSlice, x: np.ndarray, update: np.ndarray, out: Any) -> np.ndarray:
    assert op.strides is not None
    result = x.copy()
    ranges = [
        range(lo, hi, s)
        for lo, hi, s in zip(op.lower_bounds, op.upper_bounds, op.strides, strict=True)
    ]
    for index in np.ndindex(*update.shape):
        result[tuple(r[i] for r, i in zip(ranges, index, strict=True))] = update[index]
    return result


@ORACLE.register(mv.Reverse)
def _reverse(op: mv.Reverse, x: np.ndarray, out: Any) -> np.ndarray:
    result = np.empty_like(x)
    for index in np.ndindex(*x.shape):
        source = [
            n - 1 - i if a in op.axes else i
            for a, (i, n) in enumerate(zip(index, x.shape, strict=True))
        ]
        result[index] = x[tuple(source)]
    return result


@ORACLE.register(mv.ReverseSequence)
def _reverse_sequence(
    op: mv.ReverseSequence, x: np.ndarray, lengths: np.ndarray, out: Any
) -> np.ndarray:
    result = np.empty_like(x)
    for index in np.ndindex(*x.shape):
        source = list(index)
        n = int(lengths[index[op.batch_axis]])
        if index[op.seq_axis] < n:
            source[op.seq_axis] = n - 1 - index[op.seq_axis]
        result[index] = x[tuple(source)]
    return result


@ORACLE.register(mv.Tile)
def _tile(op: mv.Tile, x: np.ndarray, out: Any) -> np.ndarray:
    result = np.empty(out[0].shape, x.dtype)
    for index in np.ndindex(*result.shape):
        result[index] = x[tuple(i % n for i, n in zip(index, x.shape, strict=True))]
    return result


@ORACLE.register(mv.Split)
def _split(op: mv.Split, x: np.ndarray, out: Any) -> tuple[np.ndarray, ...]:
    pieces = []
    start = 0
    for t in out:
        piece = np.empty(t.shape, x.dtype)
        for index in np.ndindex(*t.shape):
            source = list(index)
            source[op.axis] += start
            piece[index] = x[tuple(source)]
        pieces.append(piece)
        start += t.shape[op.axis]
    return tuple(pieces)
