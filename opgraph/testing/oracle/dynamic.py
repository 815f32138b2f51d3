"""Oracle entries for the data-dependent ops, by explicit walks over shapes and elements:
shape_of, non_zero, unique (dictionaries of slices), non_max_suppression (the ONNX reference's
pairwise loop) and compress."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from opgraph.ops import dynamic as dy
from opgraph.testing.oracle.registry import ORACLE


@ORACLE.register(dy.ShapeOf)
def _shape_of(op: dy.ShapeOf, x: np.ndarray, out: Any) -> np.ndarray:
    return np.array([int(d) for d in x.shape] or [], dtype=np.int64)


@ORACLE.register(dy.NonZero)
def _non_zero(op: dy.NonZero, x: np.ndarray, out: Any) -> np.ndarray:
    columns = []
    for index in np.ndindex(*x.shape):  # row-major order
        value = float(x[index])
        if value != 0.0 or math.isnan(value):
            columns.append(index)
    return np.array(columns, dtype=np.int64).reshape(len(columns), x.ndim).T.copy()


# ------------------------------------------------------------------------------------ unique
def _key(values: list[Any]) -> tuple[Any, ...]:
    """A slice as a hashable key; every NaN is the same key ("nan")."""
    return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in values)


def _compare(a: tuple[Any, ...], b: tuple[Any, ...]) -> int:
    """Lexicographic order with NaN after every number."""
    for u, v in zip(a, b, strict=True):
        if u == v:
            continue
        if u == "nan" or v == "nan":
            return 1 if u == "nan" else -1
        return -1 if u < v else 1
    return 0


@ORACLE.register(dy.Unique)
def _unique(op: dy.Unique, x: np.ndarray, out: Any) -> tuple[np.ndarray, ...]:
    data = x.reshape(-1) if op.axis is None else x
    axis = 0 if op.axis is None else op.axis
    slices = [np.take(data, i, axis=axis) for i in range(data.shape[axis])]
    wide = (lambda s: s) if x.dtype.kind in "biu" else (lambda s: s.astype(np.float64))
    keys = [_key(np.asarray(wide(s)).reshape(-1).tolist()) for s in slices]
    first: dict[tuple[Any, ...], int] = {}
    counts: dict[tuple[Any, ...], int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
        counts[k] = counts.get(k, 0) + 1
    distinct = list(first)  # dictionaries keep insertion order: first occurrence
    if op.sorted:
        distinct.sort(key=functools.cmp_to_key(_compare))
    place = {k: j for j, k in enumerate(distinct)}
    chosen = [first[k] for k in distinct]
    values = np.take(data, np.array(chosen, dtype=np.int64), axis=axis)
    return (
        values,
        np.array(chosen, dtype=np.int64),
        np.array([place[k] for k in keys], dtype=np.int64),
        np.array([counts[k] for k in distinct], dtype=np.int64),
    )


# ------------------------------------------------------------------------ non_max_suppression
def _box(box: np.ndarray, center: bool) -> tuple[float, float, float, float]:
    """``(x_min, x_max, y_min, y_max)`` of one box."""
    a, b, c, d = (float(v) for v in box)
    if center:
        return a - c / 2, a + c / 2, b - d / 2, b + d / 2
    return min(b, d), max(b, d), min(a, c), max(a, c)


def _suppressed(one: np.ndarray, other: np.ndarray, center: bool, threshold: float) -> bool:
    x1_min, x1_max, y1_min, y1_max = _box(one, center)
    x2_min, x2_max, y2_min, y2_max = _box(other, center)
    width = min(x1_max, x2_max) - max(x1_min, x2_min)
    height = min(y1_max, y2_max) - max(y1_min, y2_min)
    if width <= 0 or height <= 0:
        return False
    inter = width * height
    area1 = (x1_max - x1_min) * (y1_max - y1_min)
    area2 = (x2_max - x2_min) * (y2_max - y2_min)
    union = area1 + area2 - inter
    if area1 <= 0 or area2 <= 0 or union <= 0:
        return False
    return inter / union > threshold


@ORACLE.register(dy.NonMaxSuppression)
def _non_max_suppression(
    op: dy.NonMaxSuppression,
    boxes: np.ndarray,
    scores: np.ndarray,
    limit: np.ndarray,
    iou: np.ndarray,
    score: np.ndarray,
    out: Any,
) -> np.ndarray:
    most = max(int(limit.reshape(-1)[0]), 0) if limit.size else 0
    threshold = float(iou.reshape(-1)[0]) if iou.size else 0.0
    rows: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            row = [float(s) for s in scores[b, c]]
            pending = [
                i for i in range(len(row)) if not score.size or row[i] > float(score.reshape(-1)[0])
            ]
            pending.sort(key=lambda i: (-row[i], i))
            kept: list[int] = []
            while pending and len(kept) < most:
                i = pending.pop(0)
                if not any(
                    _suppressed(boxes[b, i], boxes[b, k], op.center_point_box, threshold)
                    for k in kept
                ):
                    kept.append(i)
            rows.extend((b, c, k) for k in kept)
    return np.array(rows, dtype=np.int64).reshape(len(rows), 3)


# ---------------------------------------------------------------------------------- compress
@ORACLE.register(dy.Compress)
def _compress(op: dy.Compress, x: np.ndarray, condition: np.ndarray, out: Any) -> np.ndarray:
    data = x.reshape(-1) if op.axis is None else x
    axis = 0 if op.axis is None else op.axis
    kept = [i for i, c in enumerate(condition.reshape(-1).tolist()) if c]
    return np.take(data, np.array(kept, dtype=np.int64), axis=axis)
