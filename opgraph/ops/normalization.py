"""Normalization layers defined by decomposition: layer, group and instance normalization.

Each standardizes groups of elements, ``(x - mean) / sqrt(var + epsilon)`` with the biased
(population) variance computed in two passes, then applies a per-element ``scale`` and ``bias``.
Inputs are floating-point; f16 and bf16 are computed in f32 and converted back (ONNX's default
``stash_type``), so the statistics do not lose half their bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from opgraph.core import element_type as et
from opgraph.core.dim import floor_div
from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import DimShape, as_int, normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.common import (
    as_float,
    require_element_type,
    require_min_rank,
    require_same_element_type,
)
from opgraph.ops.conversion import convert
from opgraph.ops.elementwise import add, divide, multiply, sqrt, subtract
from opgraph.ops.movement import broadcast, reshape
from opgraph.ops.reduction import element_count, reduce_sum

__all__ = [
    "LayerNorm",
    "layer_norm",
    "GroupNorm",
    "group_norm",
    "InstanceNorm",
    "instance_norm",
]


def _as_epsilon(value: Any) -> float:
    epsilon = as_float(value, "epsilon")
    if not epsilon >= 0:
        raise OpTypeError(f"epsilon must be >= 0, got {epsilon!r}")
    return epsilon


def _require_params(
    x: TensorType, params: Sequence[TensorType], shape: DimShape, what: str
) -> None:
    """``scale`` and ``bias`` (as many as given): ``x``'s element type and ``shape``."""
    for name, t in zip(("scale", "bias"), params, strict=False):
        require_same_element_type((x, t), f"x and {name}")
        require(
            t.shape == shape,
            f"{name} shape {list(t.shape)} does not match the {what} shape {list(shape)}",
        )


def _standardize(x: Output, axes: tuple[int, ...], epsilon: float) -> Output:
    """``(x - mean) / sqrt(var + epsilon)`` over ``axes`` (biased variance, two passes)."""
    total = reduce_sum(x, axes)  # the count: a Constant, or computed at run time (symbolic)
    mean = divide(total, element_count(x, axes, total))
    centered = subtract(x, broadcast(mean, x.shape, axes))
    squares = reduce_sum(multiply(centered, centered), axes)
    variance = divide(squares, element_count(x, axes, squares))
    inverse = divide(scalar_like(1, variance), sqrt(add(variance, scalar_like(epsilon, variance))))
    return multiply(centered, broadcast(inverse, x.shape, axes))


def _working(x: Output) -> Output:
    """``x`` in the type the statistics are computed in (f32 for the 16-bit floats)."""
    return convert(x, et.f32) if x.element_type in (et.f16, et.bf16) else x


def _affine(y: Output, params: Sequence[Output], kept: Sequence[int]) -> Output:
    """``y · scale + bias`` (as many as given), each broadcast along the axes not in ``kept``."""
    others = [a for a in range(y.rank) if a not in kept]
    for param, combine in zip(params, (multiply, add), strict=False):
        y = combine(y, broadcast(_working(param), y.shape, others))
    return y


def _restore(y: Output, x: Output) -> Output:
    return convert(y, x.element_type) if y.element_type is not x.element_type else y


# ----------------------------------------------------------------------------- layer_norm
@opclass
class LayerNorm(Op):
    """Layer normalization (ONNX ``LayerNormalization``): standardize over the axes from
    ``axis`` on; inputs ``(x[, scale[, bias]])``, ``scale`` and ``bias`` of the normalized shape
    ``x.shape[axis:]``.

    Attributes:
        axis: the first normalized axis (negative allowed; canonical form non-negative).
        epsilon: added to the variance.
    """

    axis: int = -1
    epsilon: float = 1e-5

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))
        set_attr(self, "epsilon", _as_epsilon(self.epsilon))

    def canonicalize(self, x: TensorType, *params: TensorType) -> LayerNorm:
        require(
            len(params) <= 2,
            f"expected 1 to 3 inputs (x[, scale[, bias]]), got {1 + len(params)}",
        )
        require_element_type(x, et.FLOATS, "x")
        axis = normalize_axis(self.axis, x.rank)
        _require_params(x, params, x.shape[axis:], "normalized")
        return LayerNorm(axis, self.epsilon)

    def decompose(self, x: Output, *params: Output) -> Output:
        axes = tuple(range(self.axis, x.rank))
        y = _standardize(_working(x), axes, self.epsilon)
        return _restore(_affine(y, params, axes), x)


def layer_norm(
    x: Output,
    scale: Output | None = None,
    bias: Output | None = None,
    axis: int = -1,
    epsilon: float = 1e-5,
) -> Output:
    """Layer normalization over the axes from ``axis`` on.

    Args:
        x: floating-point input.
        scale: optional, shaped ``x.shape[axis:]``.
        bias: optional, shaped ``x.shape[axis:]`` (without ``scale``, the scale is 1).
        axis: the first normalized axis.
        epsilon: added to the variance.

    Raises:
        OpTypeError: a non-float ``x``, an axis out of range, or ``scale``/``bias`` of another
            element type or of a shape other than the normalized shape.

    Example:
        ``layer_norm(x: f32[2,3,4], scale: f32[3,4], bias: f32[3,4], axis=1)``.
    """
    params = [p for p in (scale, bias) if p is not None]
    if bias is not None and scale is None:
        params.insert(0, scalar_like(1, bias))
    return LayerNorm(axis, epsilon)(x, *params)


# ----------------------------------------------------------------------------- group_norm
@opclass
class GroupNorm(Op):
    """Group normalization (ONNX ``GroupNormalization``, opset 21): ``x`` is ``[N, C, ...]``;
    the channels form ``num_groups`` groups of ``C / num_groups``, each standardized over its
    channels and the spatial axes; inputs ``(x, scale, bias)``, ``scale`` and ``bias`` of shape
    ``[C]`` (one value per channel).

    Attributes:
        num_groups: divides ``C``.
        epsilon: added to the variance.
    """

    num_groups: int
    epsilon: float = 1e-5
    num_inputs = 3

    def __post_init__(self) -> None:
        set_attr(self, "num_groups", as_int(self.num_groups, "num_groups"))
        if self.num_groups < 1:
            raise OpTypeError(f"num_groups must be >= 1, got {self.num_groups}")
        set_attr(self, "epsilon", _as_epsilon(self.epsilon))

    def canonicalize(self, x: TensorType, scale: TensorType, bias: TensorType) -> GroupNorm:
        require_element_type(x, et.FLOATS, "x")
        require_min_rank(x, 2, "x")
        channels = x.shape[1]
        if type(channels) is int:
            require(
                channels % self.num_groups == 0,
                f"the {channels} channels of x do not divide into num_groups {self.num_groups}",
            )
        else:  # C divides at each binding; the reshape into groups needs an exact quotient
            grouped = math.prod(x.shape[1:])
            require(
                floor_div(grouped, self.num_groups) * self.num_groups == grouped,
                f"the symbolic channel count {channels} of x is not a multiple of num_groups "
                f"{self.num_groups} by its form (write it as {self.num_groups}*k)",
            )
        _require_params(x, (scale, bias), (channels,), "per-channel")
        return self

    def decompose(self, x: Output, scale: Output, bias: Output) -> Output:
        n, groups = x.shape[0], self.num_groups
        inner = math.prod(x.shape[1:]) // groups
        grouped = reshape(_working(x), (n, groups, inner))
        y = reshape(_standardize(grouped, (2,), self.epsilon), x.shape)
        return _restore(_affine(y, (scale, bias), (1,)), x)


def group_norm(
    x: Output, scale: Output, bias: Output, num_groups: int, epsilon: float = 1e-5
) -> Output:
    """Group normalization of ``x: [N, C, ...]`` with per-channel ``scale`` and ``bias``.

    Raises:
        OpTypeError: ``x`` of rank < 2 or not float, ``C`` not divisible by ``num_groups``, or
            ``scale``/``bias`` not ``[C]``.
    """
    return GroupNorm(num_groups, epsilon)(x, scale, bias)


# -------------------------------------------------------------------------- instance_norm
@opclass
class InstanceNorm(Op):
    """Instance normalization (ONNX ``InstanceNormalization``): ``x`` is ``[N, C, D1, ...]``
    (rank >= 3); each ``(n, c)`` is standardized over the spatial axes; inputs
    ``(x, scale, bias)``, ``scale`` and ``bias`` of shape ``[C]``.

    Attributes:
        epsilon: added to the variance.
    """

    epsilon: float = 1e-5
    num_inputs = 3

    def __post_init__(self) -> None:
        set_attr(self, "epsilon", _as_epsilon(self.epsilon))

    def canonicalize(self, x: TensorType, scale: TensorType, bias: TensorType) -> InstanceNorm:
        require_element_type(x, et.FLOATS, "x")
        require(x.rank >= 3, f"x must be [N, C, D1, ...] of rank >= 3, got {x}")
        _require_params(x, (scale, bias), (x.shape[1],), "per-channel")
        return self

    def decompose(self, x: Output, scale: Output, bias: Output) -> Output:
        y = _standardize(_working(x), tuple(range(2, x.rank)), self.epsilon)
        return _restore(_affine(y, (scale, bias), (1,)), x)


def instance_norm(x: Output, scale: Output, bias: Output, epsilon: float = 1e-5) -> Output:
    """Instance normalization of ``x: [N, C, D1, ...]`` with per-channel ``scale`` and
    ``bias``."""
    return InstanceNorm(epsilon)(x, scale, bias)
