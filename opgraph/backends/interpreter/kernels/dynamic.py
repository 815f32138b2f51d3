"""Reference kernels for shape_of, non_zero, unique, non_max_suppression and compress
(results sized by the run, not the types)."""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.ops import dynamic as dy


@KERNELS.register(dy.ShapeOf)
def _shape_of(op: dy.ShapeOf, x: np.ndarray) -> np.ndarray:
    return np.array(x.shape, dtype=np.int64).reshape(x.ndim)


@KERNELS.register(dy.NonZero)
def _non_zero(op: dy.NonZero, x: np.ndarray) -> np.ndarray:
    found = np.nonzero(x != 0)  # NaN != 0: NaN counts as non-zero, as in ONNX
    return np.stack(found).astype(np.int64).reshape(x.ndim, -1)


# ------------------------------------------------------------------------------------ unique
def _keys(x: np.ndarray) -> np.ndarray:
    """Values that compare and sort like ``x``'s (f16/bf16 widened exactly to f64)."""
    if x.dtype.kind == "b":
        return x.astype(np.uint8)
    if x.dtype.kind in "iu":
        return x
    return x.astype(np.float64)


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first, inverse, counts)`` of the distinct rows of a 2-D key array, ascending
    (lexicographic; NaNs equal to each other and last)."""
    m = rows.shape[0]
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(m)  # stable
    ordered = rows[order]
    same = ordered[1:] == ordered[:-1]
    if rows.dtype.kind == "f":
        same |= np.isnan(ordered[1:]) & np.isnan(ordered[:-1])
    new = np.ones(m, dtype=bool)
    new[1:] = ~np.all(same, axis=1)
    starts = np.flatnonzero(new)
    inverse = np.empty(m, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    counts = np.diff(np.append(starts, m))
    return order[starts].astype(np.int64), inverse, counts.astype(np.int64)


@KERNELS.register(dy.Unique)
def _unique(op: dy.Unique, x: np.ndarray) -> tuple[np.ndarray, ...]:
    data, axis = (x.reshape(-1), 0) if op.axis is None else (x, op.axis)
    m = data.shape[axis]
    rows = np.moveaxis(_keys(data), axis, 0).reshape(m, data.size // m if m else 0)
    first, inverse, counts = _unique_rows(rows)
    if not op.sorted:  # order of first occurrence
        order = np.argsort(first, kind="stable")
        place = np.empty_like(order)
        place[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], place[inverse]
    return np.take(data, first, axis=axis), first, inverse, counts


# ------------------------------------------------------------------------ non_max_suppression
def _first(value: np.ndarray, absent: float) -> float:
    return float(value.reshape(-1)[0]) if value.size else absent


def _corners(boxes: np.ndarray, center: bool) -> tuple[np.ndarray, ...]:
    """``(y0, x0, y1, x1)`` arrays, each ``[N]``, of one batch entry's boxes."""
    b = boxes.astype(np.float64)
    if center:
        x, y, w, h = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        return y - h / 2, x - w / 2, y + h / 2, x + w / 2
    return (
        np.minimum(b[:, 0], b[:, 2]),
        np.minimum(b[:, 1], b[:, 3]),
        np.maximum(b[:, 0], b[:, 2]),
        np.maximum(b[:, 1], b[:, 3]),
    )


def _suppressed_by(corners: tuple[np.ndarray, ...], k: int, threshold: float) -> np.ndarray:
    """``[N]``: True where a box's IoU with box ``k`` is above ``threshold`` (boxes that do not
    overlap it, or have no area, are never suppressed). One row at a time: memory O(N)."""
    y0, x0, y1, x1 = corners
    width = np.minimum(x1, x1[k]) - np.maximum(x0, x0[k])
    height = np.minimum(y1, y1[k]) - np.maximum(y0, y0[k])
    inter = width * height
    area = (x1 - x0) * (y1 - y0)
    union = area + area[k] - inter
    valid = (width > 0) & (height > 0) & (area > 0) & (area[k] > 0) & (union > 0)
    with np.errstate(all="ignore"):
        iou = inter / np.where(valid, union, 1.0)
    return valid & (iou > threshold)


def _select(
    corners: tuple[np.ndarray, ...], row: np.ndarray, most: int, iou: float, floor: float | None
) -> list[int]:
    """Greedy selection in one (batch, class): best score first (ties: lower index); a kept
    box suppresses every box whose IoU with it is above ``iou`` (IoU is symmetric, so marking
    from each kept box equals testing each candidate against the kept ones)."""
    candidates = np.arange(row.size) if floor is None else np.flatnonzero(row > floor)
    order = candidates[np.lexsort((candidates, -row[candidates]))]
    suppressed = np.zeros(row.size, dtype=bool)
    kept: list[int] = []
    for i in order.tolist():
        if len(kept) == most:
            break
        if not suppressed[i]:
            kept.append(i)
            suppressed |= _suppressed_by(corners, i, iou)
    return kept


@KERNELS.register(dy.NonMaxSuppression)
def _non_max_suppression(
    op: dy.NonMaxSuppression,
    boxes: np.ndarray,
    scores: np.ndarray,
    limit: np.ndarray,
    iou: np.ndarray,
    score: np.ndarray,
) -> np.ndarray:
    most = max(int(limit.reshape(-1)[0]), 0) if limit.size else 0
    floor = _first(score, -np.inf) if score.size else None
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0] if most else 0):
        corners = _corners(boxes[b], op.center_point_box)
        for c in range(scores.shape[1]):
            kept = _select(corners, scores[b, c].astype(np.float64), most, _first(iou, 0.0), floor)
            selected.extend((b, c, k) for k in kept)
    return np.array(selected, dtype=np.int64).reshape(-1, 3)


# ---------------------------------------------------------------------------------- compress
@KERNELS.register(dy.Compress)
def _compress(op: dy.Compress, x: np.ndarray, condition: np.ndarray) -> np.ndarray:
    data = x.reshape(-1) if op.axis is None else x
    axis = op.axis or 0
    if condition.shape[0] > data.shape[axis]:
        raise ValueError(
            f"condition has {condition.shape[0]} entries, more than the {data.shape[axis]} "
            f"of the input along axis {axis}"
        )
    return np.compress(condition.astype(bool), data, axis=axis)
