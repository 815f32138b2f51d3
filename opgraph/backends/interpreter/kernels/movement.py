"""Reference kernels for data movement."""

from __future__ import annotations

import builtins

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
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
