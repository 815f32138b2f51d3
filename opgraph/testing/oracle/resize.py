"""Oracle entry for Resize: every output element computed on its own, ONNX reference style
(source coordinate, then the neighbours with an edge-clamped index and their weights, the
N-d value being the sum over all combinations of per-axis taps)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from opgraph.ops.resize import CoordinateTransformation, NearestMode, Resize, ResizeMode
from opgraph.testing.oracle.registry import ORACLE, narrow, wide

T = CoordinateTransformation


def _coordinate(
    mode: CoordinateTransformation, i: int, length: int, resized: int, scale: float
) -> float:
    """The ONNX formula, evaluated in f32 like the ONNX reference (its scales are f32)."""
    f, x, half = np.float32(scale), np.float32(i), np.float32(0.5)
    if mode is T.ALIGN_CORNERS:
        return 0.0 if resized == 1 else float(x * np.float32(length - 1) / np.float32(resized - 1))
    if mode is T.ASYMMETRIC:
        return float(x / f)
    if mode is T.PYTORCH_HALF_PIXEL and resized == 1:
        return 0.0
    return float((x + half) / f - half)


def _nearest(mode: NearestMode, coordinate: float) -> int:
    floor = math.floor(coordinate)
    ratio = coordinate - floor
    if ratio == 0 or mode is NearestMode.FLOOR:
        return floor
    if mode is NearestMode.CEIL:
        return floor + 1
    if mode is NearestMode.ROUND_PREFER_FLOOR:
        return floor if ratio <= 0.5 else floor + 1
    return floor if ratio < 0.5 else floor + 1


def _taps(op: Resize, coordinate: float, length: int) -> list[tuple[int, float]]:
    def clamp(index: int) -> int:
        return min(max(index, 0), length - 1)

    if op.mode is ResizeMode.NEAREST:
        return [(clamp(_nearest(op.nearest_mode, coordinate)), 1.0)]
    if float(coordinate).is_integer():  # the left neighbour with weight 0, as the reference
        left, ratio = int(coordinate) - 1, 1.0
    else:
        left = math.floor(coordinate)
        ratio = coordinate - left
    return [(clamp(left), 1.0 - ratio), (clamp(left + 1), ratio)]


@ORACLE.register(Resize)
def _resize(op: Resize, x: np.ndarray, out: Any) -> np.ndarray:
    assert op.output_shape is not None and op.scales is not None
    source = wide(x)
    result = np.zeros(op.output_shape, source.dtype)
    taps = [
        [
            _taps(op, _coordinate(op.coordinate_transformation_mode, i, length, resized, s), length)
            for i in range(resized)
        ]
        for length, resized, s in zip(x.shape, op.output_shape, op.scales, strict=True)
    ]
    for index in np.ndindex(*op.output_shape):
        combos = itertools.product(*(taps[axis][i] for axis, i in enumerate(index)))
        if op.mode is ResizeMode.NEAREST:
            result[index] = source[tuple(t[0] for t in next(combos))]
            continue
        result[index] = sum(
            math.prod(t[1] for t in combo) * source[tuple(t[0] for t in combo)] for combo in combos
        )
    return narrow(result, out)
