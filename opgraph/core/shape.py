"""Static shapes and the axis helpers every type rule uses."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from typing import Any

from opgraph.core.errors import OpTypeError

Shape = tuple[int, ...]


def shape_size(shape: Sequence[int]) -> int:
    """Number of elements (1 for a scalar, 0 when any dimension is 0)."""
    return math.prod(shape)


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise OpTypeError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise OpTypeError(f"{what} must be an integer, got {value!r}") from None


def as_int(value: Any, what: str) -> int:
    """``value`` as a Python int; bools and floats are rejected with a message naming ``what``."""
    return _as_int(value, what)


def as_int_tuple(values: Iterable[Any] | int, what: str) -> tuple[int, ...]:
    """Normalise an int or an iterable of ints to a tuple of ints."""
    if isinstance(values, int) and not isinstance(values, bool):
        return (values,)
    try:
        items = list(values)  # type: ignore[arg-type]
    except TypeError:
        raise OpTypeError(f"{what} must be a sequence of integers, got {values!r}") from None
    return tuple(_as_int(v, f"{what}[{i}]") for i, v in enumerate(items))


def as_shape(values: Iterable[Any] | int, what: str = "shape") -> Shape:
    """Normalise a shape: a tuple of non-negative ints."""
    shape = as_int_tuple(values, what)
    for i, d in enumerate(shape):
        if d < 0:
            raise OpTypeError(f"{what}[{i}] must be >= 0, got {d} in {shape}")
    return shape


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map a possibly negative axis into ``0..rank-1``; raises when out of range."""
    axis = _as_int(axis, what)
    if not -rank <= axis < rank:
        raise OpTypeError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def normalize_axes(
    axes: Iterable[Any] | int, rank: int, what: str = "axes", allow_repeats: bool = False
) -> tuple[int, ...]:
    """Normalise axes (negatives allowed) to sorted, unique non-negative ints."""
    raw = as_int_tuple(axes, what)
    result = [normalize_axis(a, rank, what) for a in raw]
    if not allow_repeats and len(set(result)) != len(result):
        raise OpTypeError(f"{what} {raw} repeats an axis")
    return tuple(sorted(set(result)))


def format_shape(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
