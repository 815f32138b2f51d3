"""Reference kernels for ordering ops (numpy's stable sorts and arg searches)."""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS, accumulator
from opgraph.ops import ordering as od


def _comparable(x: np.ndarray) -> np.ndarray:
    """``x`` in a dtype numpy sorts natively (f16/bf16 widen to f32 exactly)."""
    return x.astype(np.float32) if x.dtype.kind == "V" or x.dtype.name == "bfloat16" else x


def _arg_search(op: od.IndexReduction, x: np.ndarray, find: str) -> np.ndarray:
    # numpy's argmax/argmin return the first extreme and the first NaN; flipping the axis
    # turns "first" into "last".
    data = _comparable(x)
    if op.select_last_index:
        data = np.flip(data, op.axis)
    index = np.argmax(data, op.axis) if find == "max" else np.argmin(data, op.axis)
    if op.select_last_index:
        index = x.shape[op.axis] - 1 - index
    if op.keep_dims:
        index = np.expand_dims(index, op.axis)
    return np.asarray(index).astype(op.index_element_type.dtype)


@KERNELS.register(od.ArgMax)
def _arg_max(op: od.ArgMax, x: np.ndarray) -> np.ndarray:
    return _arg_search(op, x, "max")


@KERNELS.register(od.ArgMin)
def _arg_min(op: od.ArgMin, x: np.ndarray) -> np.ndarray:
    return _arg_search(op, x, "min")


@KERNELS.register(od.TopK)
def _top_k(op: od.TopK, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    data = _comparable(x)
    n = x.shape[op.axis]
    if op.largest:
        # A stable ascending sort of the flipped axis, read backwards: descending, ties in
        # ascending index order, NaNs (sorted last by numpy) first.
        order = np.flip(np.argsort(np.flip(data, op.axis), op.axis, kind="stable"), op.axis)
        order = n - 1 - order
    else:
        order = np.argsort(data, op.axis, kind="stable")
    indices = np.take(order, np.arange(op.k), op.axis)
    if not op.sorted:
        indices = np.sort(indices, op.axis)
    values = np.take_along_axis(x, indices, op.axis)
    return values, indices.astype(op.index_element_type.dtype)


@KERNELS.register(od.CumSum)
def _cumsum(op: od.CumSum, x: np.ndarray) -> np.ndarray:
    data = np.flip(x, op.axis) if op.reverse else x
    total = np.cumsum(data, op.axis, dtype=accumulator(x.dtype))
    n = x.shape[op.axis]
    if op.exclusive and n:
        # Shift by one rather than subtracting x, which would turn inf - inf into NaN.
        zero = np.zeros_like(np.take(total, [0], op.axis))
        total = np.concatenate([zero, np.take(total, np.arange(n - 1), op.axis)], op.axis)
    if op.reverse:
        total = np.flip(total, op.axis)
    return np.ascontiguousarray(total).astype(x.dtype)
