"""NonMaxSuppression: its output shape depends on the data, so opgraph (static shapes)
computes it at import time from constant boxes and scores (pass them in ``constant_inputs``
when they are graph inputs)."""

from __future__ import annotations

import numpy as np

from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.registry import onnx_op


def _corners(box: np.ndarray, center: bool) -> tuple[float, float, float, float]:
    """``(y_min, x_min, y_max, x_max)`` of one box."""
    if center:
        x, y, w, h = (float(v) for v in box)
        return y - h / 2, x - w / 2, y + h / 2, x + w / 2
    y1, x1, y2, x2 = (float(v) for v in box)
    return min(y1, y2), min(x1, x2), max(y1, y2), max(x1, x2)


def overlaps(a: np.ndarray, b: np.ndarray, center: bool, threshold: float) -> bool:
    """True when the intersection over union of ``a`` and ``b`` exceeds ``threshold``."""
    ay0, ax0, ay1, ax1 = _corners(a, center)
    by0, bx0, by1, bx1 = _corners(b, center)
    width, height = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
    if width <= 0 or height <= 0:
        return False
    inter = width * height
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


def suppress(
    boxes: np.ndarray,
    scores: np.ndarray,
    limit: int,
    iou: float,
    score: float | None,
    center: bool,
) -> np.ndarray:
    """Selected ``[batch, class, box]`` triples, best first per class (the ONNX reference)."""
    selected: list[tuple[int, int, int]] = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            row = scores[b, c]
            order = [i for i in range(row.shape[0]) if score is None or row[i] > score]
            order.sort(key=lambda i: (-row[i], i))
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not any(overlaps(boxes[b, i], boxes[b, k], center, iou) for k in kept):
                    kept.append(i)
            selected.extend((b, c, k) for k in kept)
    return np.array(selected, dtype=np.int64).reshape(-1, 3)


@onnx_op("NonMaxSuppression", since=10)
def _non_max_suppression(ctx: NodeContext) -> Output:
    boxes = ctx.const(0, "boxes (NonMaxSuppression's output shape depends on the data)")
    scores = ctx.const(1, "scores (NonMaxSuppression's output shape depends on the data)")
    limit = ctx.const_or_none(2, "max_output_boxes_per_class")
    iou = ctx.const_or_none(3, "iou_threshold")
    score = ctx.const_or_none(4, "score_threshold")
    result = suppress(
        boxes,
        scores,
        0 if limit is None or limit.size == 0 else max(int(limit.reshape(-1)[0]), 0),
        0.0 if iou is None or iou.size == 0 else float(iou.reshape(-1)[0]),
        None if score is None or score.size == 0 else float(score.reshape(-1)[0]),
        bool(ctx.attr("center_point_box", 0)),
    )
    return constant(result)
