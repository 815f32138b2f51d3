"""Resize (opsets 10–19) and Upsample as separable per-axis maps.

Resizing is linear in the data and separable by axis, and with static shapes each axis's map is
an import-time matrix (output positions × input positions) computed here exactly as the ONNX
reference does: every coordinate transformation, nearest rounding mode, linear and cubic
kernels, antialiasing, ``exclude_outside`` and ``tf_crop_and_resize`` with its extrapolation
value. An axis whose matrix only picks elements becomes a ``gather`` (exact for every element
type); any other axis a ``dot`` with the matrix (plus the extrapolation term).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from opgraph import ops
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import axes_list, expand_to, typed_constant
from opgraph.frontends.onnx.registry import onnx_op

Coefficients = Callable[[float, float], np.ndarray]


@dataclass(frozen=True)
class Interpolation:
    """One Resize node's settings."""

    mode: str = "nearest"
    coordinates: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_a: float = -0.75
    antialias: bool = False
    exclude_outside: bool = False
    extrapolation: float = 0.0

    def coefficients(self) -> Coefficients:
        if self.mode == "nearest":
            return lambda ratio, scale: _nearest(ratio, self.nearest_mode)
        if self.mode == "cubic":
            cubic = _cubic_antialias if self.antialias else _cubic
            return lambda ratio, scale: cubic(ratio, scale, self.cubic_a)
        return _linear_antialias if self.antialias else _linear


def _nearest(ratio: float, mode: str) -> np.ndarray:
    if float(ratio).is_integer():
        return np.array([0.0, 1.0])
    choices = {
        "round_prefer_floor": ratio > 0.5,
        "round_prefer_ceil": ratio >= 0.5,
        "floor": False,
        "ceil": True,
    }
    up = choices[mode]
    return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])


def _cubic(ratio: float, scale: float, a: float) -> np.ndarray:
    offsets = (ratio + 1, ratio, 1 - ratio, 2 - ratio)
    return np.array([_cubic_tap(x, a) for x in offsets])


def _cubic_antialias(ratio: float, scale: float, a: float) -> np.ndarray:
    scale = min(scale, 1.0)
    start = int(np.floor(-2 / scale) + 1)
    taps = np.array([_cubic_tap(scale * (i - ratio), a) for i in range(start, 2 - start)])
    return taps / taps.sum()


def _cubic_tap(x: float, a: float) -> float:
    x = abs(x)
    if x <= 1:
        return (a + 2) * x**3 - (a + 3) * x**2 + 1
    if x < 2:
        return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return 0.0


def _linear(ratio: float, scale: float) -> np.ndarray:
    return np.array([1 - ratio, ratio])


def _linear_antialias(ratio: float, scale: float) -> np.ndarray:
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    taps = np.clip(1 - np.abs((np.arange(start, 2 - start) - ratio) * scale), 0, 1)
    return taps / taps.sum()


def source_coordinates(
    settings: Interpolation, size_in: int, size_out: int, scale: float, roi: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Each output position's source coordinate, and which positions extrapolate."""
    y = np.arange(size_out, dtype=np.float64)
    width = scale * size_in
    outside = np.zeros(size_out, dtype=bool)
    mode = settings.coordinates
    if mode == "align_corners":
        x = np.zeros(size_out) if width == 1 else y * (size_in - 1) / (width - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_crop_and_resize":
        span = (roi[1] - roi[0]) * (size_in - 1)
        x = np.full(size_out, span / 2) if width == 1 else y * span / (width - 1)
        x = x + roi[0] * (size_in - 1)
        outside = (x < 0) | (x > size_in - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(size_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        offset = size_in / 2 * (1 - size_out / width)
        x = offset + (y + 0.5) / scale - 0.5
    else:
        raise ValueError(f"unknown coordinate_transformation_mode {mode!r}")
    return x, outside


def axis_matrix(
    settings: Interpolation, size_in: int, size_out: int, scale: float, roi: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """``(weights[out, in], extrapolated[out])`` for one axis (the reference's algorithm)."""
    if size_out == 0 or size_in == 0:
        return np.zeros((size_out, size_in)), np.zeros(size_out, dtype=bool)
    x, outside = source_coordinates(settings, size_in, size_out, scale, roi)
    floor = np.floor(x)
    ratios = np.where(x == floor, 1.0, x - floor)
    get = settings.coefficients()
    coeffs = np.array([get(float(r), scale) for r in ratios]).reshape(size_out, -1)
    taps = coeffs.shape[1]
    pad = int(np.ceil(taps / 2))
    padded = x + pad
    base = np.floor(padded)
    frac = padded - base
    if taps % 2 == 0:
        offset = np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    neighbours = (base + offset).astype(np.int64)[:, None] + np.arange(taps)[None, :] - pad
    if settings.exclude_outside:
        coeffs = np.where((neighbours < 0) | (neighbours >= size_in), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    weights = np.zeros((size_out, size_in))
    clamped = np.clip(neighbours, 0, size_in - 1)
    for row in range(size_out):
        np.add.at(weights[row], clamped[row], coeffs[row])
    weights[outside] = 0.0
    return weights, outside


def apply_axis(
    x: Output, axis: int, weights: np.ndarray, outside: np.ndarray, extrapolation: float
) -> Output:
    """Map ``x`` along ``axis`` by ``weights`` (a gather when every row picks one element)."""
    picks = (np.count_nonzero(weights, axis=1) == 1) & (weights.max(axis=1) == 1.0)
    if not outside.any() and picks.all():
        chosen = np.argmax(weights, axis=1) if weights.size else np.zeros(len(weights))
        indices = constant(chosen.astype(np.int64))
        return ops.gather(x, indices, axis=axis)
    rank = x.rank
    order = [a for a in range(rank) if a != axis] + [axis]
    moved = ops.transpose(x, order) if axis != rank - 1 else x
    mapped = ops.dot(moved, typed_constant(weights.T, x.element_type), 1)
    if outside.any():
        term = typed_constant(np.where(outside, extrapolation, 0.0), x.element_type)
        mapped = ops.add(mapped, expand_to(term, rank, [rank - 1], mapped.shape))
    if axis == rank - 1:
        return mapped
    back = [0] * rank
    for position, source in enumerate(order):
        back[source] = position
    return ops.transpose(mapped, back)


def resize(
    x: Output,
    settings: Interpolation,
    sizes: list[int],
    scales: list[float],
    roi: list[tuple[float, float]],
) -> Output:
    """``x`` resized axis by axis (``sizes``, ``scales`` and ``roi`` given for every axis)."""
    shape = x.static_shape("Resize's interpolation matrices")
    for axis in range(x.rank):
        same_roi = math.isclose(roi[axis][0], 0.0) and math.isclose(roi[axis][1], 1.0)
        if sizes[axis] == shape[axis] and math.isclose(scales[axis], 1.0) and same_roi:
            continue
        weights, outside = axis_matrix(settings, shape[axis], sizes[axis], scales[axis], roi[axis])
        x = apply_axis(x, axis, weights, outside, settings.extrapolation)
    return x


def _settings(ctx: NodeContext) -> Interpolation:
    mode = str(ctx.attr("mode", "nearest"))
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.fail(f"unknown mode {mode!r}")
    if ctx.opset < 11:  # Resize-10 and Upsample: asymmetric coordinates, nearest rounds down
        return Interpolation(mode=mode, coordinates="asymmetric", nearest_mode="floor")
    return Interpolation(
        mode=mode,
        coordinates=str(ctx.attr("coordinate_transformation_mode", "half_pixel")),
        nearest_mode=str(ctx.attr("nearest_mode", "round_prefer_floor")),
        cubic_a=float(ctx.attr("cubic_coeff_a", -0.75)),
        antialias=bool(ctx.attr("antialias", 0)),
        exclude_outside=bool(ctx.attr("exclude_outside", 0)),
        extrapolation=float(ctx.attr("extrapolation_value", 0.0)),
    )


@onnx_op("Upsample", since=7)
def _upsample_v7(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    return _by_scales(ctx, x, [float(s) for s in ctx.attr("scales")])


@onnx_op("Upsample", since=9)
def _upsample_v9(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    return _by_scales(ctx, x, [float(s) for s in ctx.const(1, "scales").reshape(-1)])


@onnx_op("Resize", since=10)
def _resize_v10(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    return _by_scales(ctx, x, [float(s) for s in ctx.const(1, "scales").reshape(-1)])


def _by_scales(ctx: NodeContext, x: Output, scales: list[float]) -> Output:
    shape = x.static_shape("Resize's output sizes")
    sizes = [int(d * s) for d, s in zip(shape, scales, strict=True)]
    return resize(x, _settings(ctx), sizes, scales, [(0.0, 1.0)] * x.rank)


@onnx_op("Resize", since=11)
def _resize_v11(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    rank = x.rank
    axes = axes_list(ctx.attr("axes"), rank) if ctx.has_attr("axes") else list(range(rank))
    raw_roi = _optional_array(ctx, 1, "roi")
    raw_scales = _optional_array(ctx, 2, "scales")
    raw_sizes = _optional_array(ctx, 3, "sizes")
    roi = [(0.0, 1.0)] * rank
    if raw_roi is not None:
        for i, axis in enumerate(axes):
            roi[axis] = (float(raw_roi[i]), float(raw_roi[i + len(axes)]))
    shape = x.static_shape("Resize's output sizes")
    scales, sizes = [1.0] * rank, list(shape)
    if raw_sizes is not None:
        wanted = [int(s) for s in raw_sizes]
        scales, sizes = _sizes(ctx, shape, axes, wanted)
    elif raw_scales is not None:
        for i, axis in enumerate(axes):
            scales[axis] = float(raw_scales[i])
            sizes[axis] = int(shape[axis] * scales[axis])
    else:
        raise ctx.fail("needs scales or sizes")
    return resize(x, _settings(ctx), sizes, scales, roi)


def _optional_array(ctx: NodeContext, index: int, what: str) -> np.ndarray | None:
    value = ctx.const_or_none(index, what)
    return None if value is None or value.size == 0 else value.reshape(-1)


def _sizes(
    ctx: NodeContext, shape: tuple[int, ...], axes: list[int], wanted: list[int]
) -> tuple[list[float], list[int]]:
    """Scales and sizes from the ``sizes`` input and ``keep_aspect_ratio_policy``."""
    sizes = list(shape)
    for i, axis in enumerate(axes):
        sizes[axis] = wanted[i]
    scales = [sizes[a] / shape[a] if shape[a] else 1.0 for a in range(len(shape))]
    policy = str(ctx.attr("keep_aspect_ratio_policy", "stretch"))
    if policy == "stretch":
        return scales, sizes
    chosen = [scales[a] for a in axes]
    scale = min(chosen) if policy == "not_larger" else max(chosen)
    scales = [scale if a in axes else 1.0 for a in range(len(shape))]
    sizes = [int(scale * shape[a] + 0.5) if a in axes else shape[a] for a in range(len(shape))]
    return scales, sizes
