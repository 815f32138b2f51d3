"""Reference kernels for data movement."""

from __future__ import annotations

import builtins

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.core.errors import ExecutionError
from opgraph.ops import movement as mv


@KERNELS.register(mv.Broadcast)
def _broadcast(op: mv.Broadcast, x: np.ndarray) -> np.ndarray:
    expanded = np.expand_dims(x, op.broadcast_axes) if op.broadcast_axes else x
    return np.broadcast_to(expanded, op.shape)


@KERNELS.register(mv.Reshape)
def _reshape(op: mv.Reshape, x: np.ndarray) -> np.ndarray:
    return np.transpose(x, op.input_order).reshape(op.output_shape)


@KERNELS.register(mv.Transpose)
def _transpose(op: mv.Transpose, x: np.ndarray) -> np.ndarray:
    return np.transpose(x, op.perm)


@KERNELS.register(mv.Slice)
def _slice(op: mv.Slice, x: np.ndarray) -> np.ndarray:
    assert op.strides is not None
    index = tuple(
        builtins.slice(lo, hi, step)
        for lo, hi, step in zip(op.lower_bounds, op.upper_bounds, op.strides, strict=True)
    )
    return x[index]


@KERNELS.register(mv.Concat)
def _concat(op: mv.Concat, *xs: np.ndarray) -> np.ndarray:
    return np.concatenate(xs, axis=op.axis)


@KERNELS.register(mv.ReplaceSlice)
def _replace_slice(op: mv.ReplaceSlice, x: np.ndarray, update: np.ndarray) -> np.ndarray:
    assert op.strides is not None
    index = tuple(
        builtins.slice(lo, hi, step)
        for lo, hi, step in zip(op.lower_bounds, op.upper_bounds, op.strides, strict=True)
    )
    result = x.copy()
    result[index] = update
    return result


@KERNELS.register(mv.Reverse)
def _reverse(op: mv.Reverse, x: np.ndarray) -> np.ndarray:
    return np.flip(x, op.axes) if op.axes else x


@KERNELS.register(mv.ReverseSequence)
def _reverse_sequence(op: mv.ReverseSequence, x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    dim = x.shape[op.seq_axis]
    bad = (lengths < 0) | (lengths > dim)
    if np.any(bad):
        b = int(np.argmax(bad))
        raise ExecutionError(
            f"ReverseSequence: seq_lengths[{b}] = {int(lengths[b])} is outside [0, {dim}] "
            f"(the size of seq_axis {op.seq_axis})"
        )
    result = x.copy()
    moved = np.moveaxis(result, (op.batch_axis, op.seq_axis), (0, 1))  # a view of result
    source = np.moveaxis(x, (op.batch_axis, op.seq_axis), (0, 1))
    for b, n in enumerate(lengths.tolist()):
        moved[b, :n] = source[b, :n][::-1]
    return result


@KERNELS.register(mv.Tile)
def _tile(op: mv.Tile, x: np.ndarray) -> np.ndarray:
    return np.tile(x, op.repeats) if op.repeats else x.copy()


@KERNELS.register(mv.Split)
def _split(op: mv.Split, x: np.ndarray) -> tuple[np.ndarray, ...]:
    assert op.sizes is not None
    cuts = np.cumsum(op.sizes)[:-1]
    return tuple(np.split(x, cuts, axis=op.axis))
