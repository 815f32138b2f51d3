"""Resize (ONNX ``Resize``, nearest and linear modes) defined by decomposition into ``Gather``.

Every axis is resized independently (multilinear interpolation is separable): an output index
``x_resized`` maps to a source coordinate ``x_original`` by the coordinate transformation, with
``scale`` the axis's scale factor and ``length_*`` the axis lengths::

    half_pixel          (x_resized + 0.5) / scale - 0.5
    pytorch_half_pixel  as half_pixel, but 0 when length_resized == 1
    align_corners       x_resized · (length_original - 1) / (length_resized - 1), 0 when
                        length_resized == 1
    asymmetric          x_resized / scale

``nearest`` takes the element at ``x_original`` rounded by ``nearest_mode``; ``linear``
interpolates the two neighbours ``floor(x_original)`` and ``floor(x_original) + 1`` with weights
``1 - t`` and ``t``. Source indices are clamped to the axis (edge padding, as ONNX).
Coordinates are computed in f32, as by the ONNX reference implementation and ONNX Runtime, so
that roundings at exact ties (``floor`` of a coordinate that is 2 only up to f32 rounding) agree
with them. Axes whose mapping is the identity are left alone, so the usual unscaled batch and
channel axes cost nothing.
"""

from __future__ import annotations

import enum
import math
from typing import Any, cast

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import ShapeAttr, as_dims, is_static, static_shape
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import as_enum, as_float, require_element_type
from opgraph.ops.elementwise import add, multiply
from opgraph.ops.indexing import gather
from opgraph.ops.movement import broadcast

__all__ = [
    "ResizeMode",
    "CoordinateTransformation",
    "NearestMode",
    "Resize",
    "resize",
]


class ResizeMode(enum.Enum):
    """How output elements are computed from the source coordinate."""

    NEAREST = "nearest"
    LINEAR = "linear"


class CoordinateTransformation(enum.Enum):
    """How an output index maps to a source coordinate (see the module docstring)."""

    HALF_PIXEL = "half_pixel"
    PYTORCH_HALF_PIXEL = "pytorch_half_pixel"
    ALIGN_CORNERS = "align_corners"
    ASYMMETRIC = "asymmetric"


class NearestMode(enum.Enum):
    """How ``nearest`` rounds a source coordinate to an index."""

    ROUND_PREFER_FLOOR = "round_prefer_floor"
    ROUND_PREFER_CEIL = "round_prefer_ceil"
    FLOOR = "floor"
    CEIL = "ceil"


@opclass
class Resize(Op):
    """Resize ``x`` to ``output_shape`` by nearest-neighbour or (multi)linear interpolation.

    Nearest accepts every element type, linear floating-point types.

    Attributes:
        output_shape: the result shape (default: ``floor(x.shape · scales)``).
        scales: the per-axis scale factors of the coordinate transformation, each > 0
            (default: ``output_shape / x.shape``). The canonical form has both.
        mode: ``"nearest"`` or ``"linear"``.
        coordinate_transformation_mode: ``"half_pixel"``, ``"pytorch_half_pixel"``,
            ``"align_corners"`` or ``"asymmetric"``.
        nearest_mode: ``"round_prefer_floor"``, ``"round_prefer_ceil"``, ``"floor"`` or
            ``"ceil"`` (used by ``nearest`` only).
    """

    output_shape: ShapeAttr | None = None
    scales: tuple[float, ...] | None = None
    mode: ResizeMode = ResizeMode.NEAREST
    coordinate_transformation_mode: CoordinateTransformation = CoordinateTransformation.HALF_PIXEL
    nearest_mode: NearestMode = NearestMode.ROUND_PREFER_FLOOR
    num_inputs = 1

    def __post_init__(self) -> None:
        if self.output_shape is None and self.scales is None:
            raise OpTypeError("needs output_shape or scales")
        if self.output_shape is not None:
            set_attr(self, "output_shape", as_dims(self.output_shape, "output_shape"))
        if self.scales is not None:
            set_attr(self, "scales", _as_scales(self.scales))
        set_attr(self, "mode", as_enum(ResizeMode, self.mode, "mode"))
        transformation = as_enum(
            CoordinateTransformation,
            self.coordinate_transformation_mode,
            "coordinate_transformation_mode",
        )
        set_attr(self, "coordinate_transformation_mode", transformation)
        set_attr(self, "nearest_mode", as_enum(NearestMode, self.nearest_mode, "nearest_mode"))

    def canonicalize(self, x: TensorType) -> Resize:
        for name, values in (("output_shape", self.output_shape), ("scales", self.scales)):
            require(
                values is None or len(values) == x.rank,
                f"{name} {values} has {len(values or ())} entries, x {x} has rank {x.rank}",
            )
        if not is_static(x.shape):
            return self._canonical_symbolic(x)
        sizes = static_shape(x.shape)
        shape = self.output_shape
        if shape is None:
            assert self.scales is not None
            shape = tuple(math.floor(d * s) for d, s in zip(sizes, self.scales, strict=True))
        for axis, (d, n) in enumerate(zip(sizes, shape, strict=True)):
            require(d > 0 or n == 0, f"axis {axis} of x is empty and cannot grow to {n}")
        scales = self.scales
        if scales is None:
            scales = tuple(n / d if d else 1.0 for d, n in zip(sizes, shape, strict=True))
        for axis, (n, s) in enumerate(zip(shape, scales, strict=True)):
            require(s > 0 or n == 0, f"scale 0 of axis {axis} cannot give {n} elements")
        if self.mode is ResizeMode.LINEAR:
            require_element_type(x, et.FLOATS, "x (mode 'linear')")
        return Resize(
            shape, scales, self.mode, self.coordinate_transformation_mode, self.nearest_mode
        )

    def _canonical_symbolic(self, x: TensorType) -> Resize:
        """Static axes as usual. A symbolic axis keeps its size, grows by an integer scale, or
        takes a given output size; in the last case its scale (output size / length) is known
        only at a binding, so the canonical form has no ``scales`` and the Function is
        specialised (``og.passes.specialize_shapes``) before it is decomposed. A fractional
        scale without a size is refused: the size ``floor(length · scale)`` is computed in
        floating point, which no dimension expression reproduces for every length."""
        shape: list[Dim] = []
        scales: list[float] = []
        scales_known = True
        for axis, d in enumerate(x.shape):
            n = self.output_shape[axis] if self.output_shape is not None else None
            s = self.scales[axis] if self.scales is not None else None
            if type(d) is int:
                one = self._one_axis(x.element_type, d, n, s)
                assert one.output_shape is not None and one.scales is not None
                shape.append(one.output_shape[0])
                scales.append(one.scales[0])
            elif (factor := _factor(s)) and (n is None or n == d * factor):  # canonical
                shape.append(d * factor)
                scales.append(float(factor))
            elif n == d or (n is None and s == 1.0):
                shape.append(d)
                scales.append(1.0)
            elif n is not None:  # a given size: the scale follows from the bound length
                shape.append(n)
                scales.append(s if s is not None else 0.0)
                scales_known = scales_known and s is not None
            else:
                raise OpTypeError(
                    f"axis {axis} of x has the symbolic size {d}: it can keep its size, grow by "
                    f"an integer scale or take a given output size, got scale {s} (a fractional "
                    "scale gives the size floor(size * scale) in floating point; give "
                    "output_shape instead)"
                )
        if self.mode is ResizeMode.LINEAR:
            require_element_type(x, et.FLOATS, "x (mode 'linear')")
        return Resize(
            tuple(shape),  # type: ignore[arg-type]  # ShapeAttr
            tuple(scales) if scales_known else None,
            self.mode,
            self.coordinate_transformation_mode,
            self.nearest_mode,
        )

    def _one_axis(
        self, element_type: et.ElementType, d: int, n: Dim | None, s: float | None
    ) -> Resize:
        """The canonical resize of one static axis of length ``d``."""
        one = Resize(
            cast(ShapeAttr, (n,)) if n is not None else None,
            (s,) if s is not None else None,
            self.mode,
            self.coordinate_transformation_mode,
            self.nearest_mode,
        )
        return one.canonicalize(TensorType(element_type, (d,)))

    def infer(self, x: TensorType) -> TensorType:
        assert self.output_shape is not None
        return TensorType(x.element_type, self.output_shape)

    def decompose(self, x: Output) -> Output:
        if self.scales is None or not is_static(x.shape) or not is_static(self.output_shape or ()):
            raise OpTypeError(
                f"Resize of {x.type} to {self.output_shape}: the gather indices need static "
                "sizes; specialise the Function to a binding first (og.passes.specialize_shapes)"
            )
        assert self.output_shape is not None
        for axis, (length, resized, scale) in enumerate(
            zip(x.shape, self.output_shape, self.scales, strict=True)
        ):
            if resized == 0 or length == 0:
                x = _gather(x, np.zeros(resized, np.int64), axis)
                continue
            coords = _source_coordinates(
                self.coordinate_transformation_mode, length, resized, scale
            )
            if self.mode is ResizeMode.NEAREST:
                x = _gather(x, _nearest_indices(self.nearest_mode, coords, length), axis)
            else:
                x = _interpolate(x, *_linear_taps(coords, length), axis)
        return x


def _as_scales(values: Any) -> tuple[float, ...]:
    try:
        items = list(values)
    except TypeError:
        raise OpTypeError(f"scales must be a sequence of numbers, got {values!r}") from None
    scales = tuple(as_float(v, f"scales[{i}]") for i, v in enumerate(items))
    for i, s in enumerate(scales):
        if not (s >= 0 and math.isfinite(s)):
            raise OpTypeError(f"scales[{i}] must be a finite number >= 0, got {s!r}")
    return scales


def _gather(x: Output, indices: np.ndarray, axis: int) -> Output:
    """``x`` with ``axis`` replaced by the elements at ``indices`` (nothing for the identity)."""
    if np.array_equal(indices, np.arange(x.static_shape("Resize's gather indices")[axis])):
        return x
    return gather(x, constant(indices, et.i64), axis)


def _interpolate(
    x: Output, lower: np.ndarray, upper: np.ndarray, weights: np.ndarray, axis: int
) -> Output:
    """``(1 - t) · x[lower] + t · x[upper]`` along ``axis`` (``t = weights``)."""
    low = _gather(x, lower, axis)
    if not np.any(weights):
        return low
    high = _gather(x, upper, axis)
    others = [a for a in range(low.rank) if a != axis]

    def weighted(value: Output, w: np.ndarray) -> Output:
        return multiply(value, broadcast(constant(w, x.element_type), value.shape, others))

    return add(weighted(low, 1 - weights), weighted(high, weights))


def _source_coordinates(
    mode: CoordinateTransformation, length: int, resized: int, scale: float
) -> np.ndarray:
    """The source coordinate of each of the ``resized`` output indices of one axis, computed in
    f32 as the ONNX reference and ONNX Runtime do (so roundings at exact ties agree)."""
    x = np.arange(resized, dtype=np.float32)
    factor, half = np.float32(scale), np.float32(0.5)
    if mode is CoordinateTransformation.ASYMMETRIC:
        return x / factor
    if mode is CoordinateTransformation.ALIGN_CORNERS:
        if resized == 1:
            return np.zeros(resized, np.float32)
        return x * np.float32(length - 1) / np.float32(resized - 1)
    if mode is CoordinateTransformation.PYTORCH_HALF_PIXEL and resized == 1:
        return np.zeros(resized, np.float32)
    return (x + half) / factor - half


def _nearest_indices(mode: NearestMode, coords: np.ndarray, length: int) -> np.ndarray:
    """Source coordinates rounded by ``mode`` and clamped to ``[0, length - 1]`` (int64)."""
    low, high = np.floor(coords), np.ceil(coords)
    fraction = coords - low
    rounded = {
        NearestMode.ROUND_PREFER_FLOOR: np.where(fraction <= 0.5, low, high),
        NearestMode.ROUND_PREFER_CEIL: np.where(fraction < 0.5, low, high),
        NearestMode.FLOOR: low,
        NearestMode.CEIL: high,
    }[mode]
    return np.clip(rounded, 0, length - 1).astype(np.int64)


def _linear_taps(coords: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lower, upper, t)`` for linear interpolation: the clamped neighbour indices and the
    weight of the upper one (0 where the coordinate is an integer, whose upper tap is then the
    lower one)."""
    floor = np.floor(coords)
    weights = coords - floor
    lower = np.clip(floor, 0, length - 1).astype(np.int64)
    upper = np.clip(floor + 1, 0, length - 1).astype(np.int64)
    return lower, np.where(weights == 0, lower, upper), weights


def resize(
    x: Output,
    output_shape: Any = None,
    scales: Any = None,
    mode: Any = "nearest",
    coordinate_transformation_mode: Any = "half_pixel",
    nearest_mode: Any = "round_prefer_floor",
) -> Output:
    """Resize ``x`` (ONNX ``Resize``) to ``output_shape``, or by ``scales``.

    Args:
        x: any element type for ``nearest``, floating-point for ``linear``.
        output_shape: the result shape (one entry per axis of ``x``).
        scales: per-axis factors; the result shape is ``floor(x.shape · scales)``. With both
            given, ``output_shape`` is the result and ``scales`` feed the coordinate
            transformation.
        mode: ``"nearest"`` or ``"linear"`` (or :class:`ResizeMode`).
        coordinate_transformation_mode: see :class:`CoordinateTransformation`.
        nearest_mode: see :class:`NearestMode`.

    Raises:
        OpTypeError: neither size given, a size of the wrong length, a non-positive scale, an
            empty axis resized to a non-empty one, ``linear`` on a non-float input, or an
            unknown mode.

    Example:
        ``resize(x: f32[1,3,4,4], scales=(1, 1, 2, 2), mode="linear")`` is ``f32[1,3,8,8]``.
    """
    return Resize(output_shape, scales, mode, coordinate_transformation_mode, nearest_mode)(x)


def _factor(s: float | None) -> int:
    """``s`` as an integer scale >= 1, or 0 when it is not one."""
    return int(s) if s is not None and float(s).is_integer() and s >= 1 else 0
