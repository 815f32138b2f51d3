"""Reference kernels for indexing. Indices are checked and wrapped first: an out-of-range index
raises ``ExecutionError`` naming it (the interpreter adds the node)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS, is_float
from opgraph.core.errors import ExecutionError
from opgraph.ops import indexing as ix

Reduction = ix.ScatterReduction


def _checked(op: Any, indices: np.ndarray, size: Any, what: str) -> np.ndarray:
    """``indices`` as i64 with negatives wrapped; ``size`` broadcasts against them."""
    wide = indices.astype(np.int64)
    sizes = np.broadcast_to(np.asarray(size, np.int64), wide.shape)
    bad = (wide < -sizes) | (wide >= sizes)
    if np.any(bad):
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        n = int(sizes[where])
        raise ExecutionError(
            f"{op.name}: index {int(wide[where])} at indices{list(where)} is out of range for "
            f"{what} of size {n} (valid: -{n}..{n - 1})"
        )
    return np.where(wide < 0, wide + sizes, wide)


@KERNELS.register(ix.Gather)
def _gather(op: ix.Gather, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    index = _checked(op, indices, x.shape[op.axis], f"axis {op.axis}")
    b = op.batch_dims
    out_shape = x.shape[: op.axis] + indices.shape[b:] + x.shape[op.axis + 1 :]
    result = np.empty(out_shape, x.dtype)
    for batch in np.ndindex(*x.shape[:b]):
        result[batch] = np.take(x[batch], index[batch], axis=op.axis - b)
    return result


@KERNELS.register(ix.GatherND)
def _gather_nd(op: ix.GatherND, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    b, k = op.batch_dims, indices.shape[-1]
    index = _checked(op, indices, x.shape[b : b + k], "the indexed axes")
    result = np.empty(indices.shape[:-1] + x.shape[b + k :], x.dtype)
    for batch in np.ndindex(*x.shape[:b]):
        result[batch] = x[batch][tuple(np.moveaxis(index[batch], -1, 0))]
    return result


@KERNELS.register(ix.GatherElements)
def _gather_elements(op: ix.GatherElements, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    index = _checked(op, indices, x.shape[op.axis], f"axis {op.axis}")
    window = tuple(
        slice(None) if d == op.axis else slice(0, n) for d, n in enumerate(indices.shape)
    )
    return np.take_along_axis(x[window], index, axis=op.axis)


# ------------------------------------------------------------------------------- scatters
_ACCUMULATE = {
    Reduction.ADD: np.add,
    Reduction.MUL: np.multiply,
    Reduction.MAX: np.maximum,
    Reduction.MIN: np.minimum,
}


def _write(
    x: np.ndarray, targets: np.ndarray, values: np.ndarray, reduction: Reduction
) -> np.ndarray:
    """``x`` with ``values`` combined in at flat positions ``targets``, in order (16-bit
    floats accumulate in f32)."""
    if reduction is Reduction.NONE:
        result = x.reshape(-1).copy()
        # With duplicates the last write wins: keep each target's last occurrence.
        _, last_from_end = np.unique(targets[::-1], return_index=True)
        keep = targets.size - 1 - last_from_end
        result[targets[keep]] = values[keep]
        return result.reshape(x.shape)
    wide = np.dtype(np.float32) if is_float(x.dtype) and x.dtype.itemsize < 4 else x.dtype
    result = x.reshape(-1).astype(wide)
    _ACCUMULATE[reduction].at(result, targets, values.astype(wide))
    return result.astype(x.dtype).reshape(x.shape)


@KERNELS.register(ix.ScatterElements)
def _scatter_elements(
    op: ix.ScatterElements, x: np.ndarray, indices: np.ndarray, updates: np.ndarray
) -> np.ndarray:
    index = _checked(op, indices, x.shape[op.axis], f"axis {op.axis}")
    coords: list[np.ndarray] = list(np.indices(indices.shape, dtype=np.int64))
    coords[op.axis] = index
    targets = np.ravel_multi_index(tuple(coords), x.shape).reshape(-1)
    return _write(x, targets, updates.reshape(-1), op.reduction)


@KERNELS.register(ix.ScatterND)
def _scatter_nd(
    op: ix.ScatterND, x: np.ndarray, indices: np.ndarray, updates: np.ndarray
) -> np.ndarray:
    k = indices.shape[-1]
    index = _checked(op, indices, x.shape[:k], "the indexed axes")
    slice_size = int(np.prod(x.shape[k:]))
    starts = np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), x.shape[:k]) * slice_size
    targets = (starts.reshape(-1, 1) + np.arange(slice_size)).reshape(-1)
    return _write(x, targets, updates.reshape(-1), op.reduction)


@KERNELS.register(ix.OneHot)
def _one_hot(op: ix.OneHot, indices: np.ndarray) -> np.ndarray:
    if indices.dtype.kind == "u":  # compare unsigned values as they are (no wrap to negative)
        valid = indices < op.depth
        position = np.where(valid, indices, 0).astype(np.int64)
    else:
        signed = indices.astype(np.int64)
        valid = (signed >= -op.depth) & (signed < op.depth)
        position = np.where(signed < 0, signed + op.depth, signed)
    hot = (position[..., None] == np.arange(op.depth)) & valid[..., None]
    dtype = op.element_type.dtype
    on, off = np.asarray(op.on_value).astype(dtype), np.asarray(op.off_value).astype(dtype)
    return np.moveaxis(np.where(hot, on, off).astype(dtype), -1, op.axis)
