"""Shape-only framework ops: squeeze, unsqueeze, flatten, stack and expand.

Each is defined by its decomposition into ``Reshape``, ``Concat`` and ``Broadcast`` (that
decomposition is also its type rule and its adjoint). They accept every element type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import (
    ShapeAttr,
    as_dims,
    as_int,
    as_int_tuple,
    normalize_axes,
    normalize_axis,
)
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import broadcast_to, numpy_broadcast_shape
from opgraph.ops.common import require_same_element_type
from opgraph.ops.movement import concat, reshape

__all__ = [
    "Squeeze",
    "squeeze",
    "Unsqueeze",
    "unsqueeze",
    "Flatten",
    "flatten",
    "Stack",
    "stack",
    "Expand",
    "expand",
]


# -------------------------------------------------------------------------------- squeeze
@opclass
class Squeeze(Op):
    """Remove size-1 axes (ONNX ``Squeeze``).

    Attributes:
        axes: the axes to remove, each of size 1 (negatives allowed). None removes every size-1
            axis; the canonical form lists them, sorted.
    """

    axes: tuple[int, ...] | None = None
    num_inputs = 1

    def __post_init__(self) -> None:
        if self.axes is not None:
            set_attr(self, "axes", as_int_tuple(self.axes, "axes"))

    def canonicalize(self, x: TensorType) -> Squeeze:
        if self.axes is None:
            return Squeeze(tuple(a for a, d in enumerate(x.shape) if d == 1))
        axes = normalize_axes(self.axes, x.rank)
        for a in axes:
            require(
                x.shape[a] == 1,
                f"axis {a} has size {x.shape[a]}; only size-1 axes can be squeezed",
            )
        return Squeeze(axes)

    def decompose(self, x: Output) -> Output:
        assert self.axes is not None
        return reshape(x, [d for a, d in enumerate(x.shape) if a not in self.axes])


def squeeze(x: Output, axes: Any = None) -> Output:
    """``x`` without the size-1 ``axes`` (default: without every size-1 axis).

    Raises:
        OpTypeError: an axis is out of range, repeated, or not of size 1.
    """
    return Squeeze(axes)(x)


# ------------------------------------------------------------------------------ unsqueeze
@opclass
class Unsqueeze(Op):
    """Insert size-1 axes (ONNX ``Unsqueeze``).

    Attributes:
        axes: positions of the new axes in the *output* (rank ``x.rank + len(axes)``),
            negatives counted from the output's end; canonical form sorted and non-negative.
    """

    axes: tuple[int, ...]
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "axes", as_int_tuple(self.axes, "axes"))

    def canonicalize(self, x: TensorType) -> Unsqueeze:
        return Unsqueeze(normalize_axes(self.axes, x.rank + len(self.axes)))

    def decompose(self, x: Output) -> Output:
        dims = iter(x.shape)
        rank = x.rank + len(self.axes)
        return reshape(x, [1 if a in self.axes else next(dims) for a in range(rank)])


def unsqueeze(x: Output, axes: Any) -> Output:
    """``x`` with size-1 axes inserted at ``axes`` (positions in the result).

    Example:
        ``unsqueeze(x: f32[2,3], (0, -1))`` has type ``f32[1,2,3,1]``.
    """
    return Unsqueeze(axes)(x)


# -------------------------------------------------------------------------------- flatten
@opclass
class Flatten(Op):
    """Collapse to 2-D (ONNX ``Flatten``): ``[prod(shape[:axis]), prod(shape[axis:])]``.

    Attributes:
        axis: in ``[-rank, rank]``; canonical form non-negative.
    """

    axis: int = 1
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))

    def canonicalize(self, x: TensorType) -> Flatten:
        require(
            -x.rank <= self.axis <= x.rank,
            f"axis {self.axis} is out of range [{-x.rank}, {x.rank}] for rank {x.rank}",
        )
        return Flatten(self.axis + x.rank if self.axis < 0 else self.axis)

    def decompose(self, x: Output) -> Output:
        outer = math.prod(x.shape[: self.axis])
        return reshape(x, (outer, math.prod(x.shape[self.axis :])))


def flatten(x: Output, axis: int = 1) -> Output:
    """``x`` reshaped to 2-D, the axes before ``axis`` forming the rows."""
    return Flatten(axis)(x)


# ---------------------------------------------------------------------------------- stack
@opclass
class Stack(Op):
    """Join values of one type along a new axis (nGraph ``Stack``, ``numpy.stack``).

    Attributes:
        axis: the new axis's position in the output, in ``[-(rank + 1), rank]``; canonical form
            non-negative.
    """

    axis: int = 0

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))

    def canonicalize(self, *xs: TensorType) -> Stack:
        require(len(xs) >= 1, "needs at least one input")
        require_same_element_type(xs)
        for i, t in enumerate(xs):
            require(
                t.shape == xs[0].shape,
                f"input {i} shape {list(t.shape)} differs from input 0 shape "
                f"{list(xs[0].shape)}; stacked values need one shape",
            )
        return Stack(normalize_axis(self.axis, xs[0].rank + 1))

    def decompose(self, *xs: Output) -> Output:
        shape = list(xs[0].shape)
        shape.insert(self.axis, 1)
        return concat([reshape(x, shape) for x in xs], self.axis)


def stack(xs: Sequence[Output], axis: int = 0) -> Output:
    """Stack ``xs`` (one shape and element type) along a new ``axis``.

    Example:
        ``stack([a, b, c], axis=1)`` with ``a, b, c: f32[2,4]`` has type ``f32[2,3,4]``.
    """
    return Stack(axis)(*xs)


# --------------------------------------------------------------------------------- expand
@opclass
class Expand(Op):
    """Broadcast against ``shape`` (ONNX ``Expand``): the output shape is the NumPy broadcast of
    the input shape and ``shape``, so a 1 in ``shape`` keeps the input's dimension."""

    shape: ShapeAttr
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "shape", as_dims(self.shape, "shape"))

    def decompose(self, x: Output) -> Output:
        return broadcast_to(x, numpy_broadcast_shape(x.shape, self.shape))


def expand(x: Output, shape: Any) -> Output:
    """``x`` broadcast NumPy-style against ``shape``.

    Example:
        ``expand(x: f32[3,1], (2, 1, 6))`` has type ``f32[2,3,6]``.

    Raises:
        OpTypeError: the shapes do not broadcast.
    """
    return Expand(shape)(x)
