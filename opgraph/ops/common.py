"""Checks and helpers shared by several op families: type-rule checks, attribute normalisation,
and small helpers (scalars that fit an element type, permutations)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import check_fits
from opgraph.core.node import Output
from opgraph.core.shape import DimShape
from opgraph.core.tensor_type import TensorType


def require_element_type(
    t: TensorType, accepted: Sequence[ElementType], what: str = "input"
) -> None:
    """Raise unless ``t``'s element type is one of ``accepted``."""
    if t.element_type not in accepted:
        names = ", ".join(e.name for e in accepted)
        raise OpTypeError(
            f"{what} element type {t.element_type.name} is not supported; expected one of {names}"
        )


def require_same_element_type(types: Sequence[TensorType], what: str = "inputs") -> None:
    first = types[0].element_type
    for i, t in enumerate(types[1:], start=1):
        if t.element_type is not first:
            raise OpTypeError(
                f"element types of {what} differ: {first.name} vs {t.element_type.name} at "
                f"input {i} (no implicit conversion; use convert)"
            )


def require_same_shape(types: Sequence[TensorType], what: str = "inputs") -> None:
    first = types[0].shape
    for i, t in enumerate(types[1:], start=1):
        if t.shape != first:
            raise OpTypeError(
                f"shapes of {what} differ: {list(first)} vs {list(t.shape)} at input {i} "
                "(no implicit broadcasting; use broadcast or og.ops.numpy_broadcast)"
            )


def require_rank(t: TensorType, rank: int, what: str = "input") -> None:
    if t.rank != rank:
        raise OpTypeError(f"{what} must have rank {rank}, got {t} of rank {t.rank}")


def require_min_rank(t: TensorType, rank: int, what: str = "input") -> None:
    if t.rank < rank:
        raise OpTypeError(f"{what} must have rank >= {rank}, got {t}")


EnumT = TypeVar("EnumT", bound=enum.Enum)


# ------------------------------------------------------------- attribute normalisation
def as_enum(cls: type[EnumT], value: Any, what: str) -> EnumT:
    """An enum attribute from a member, its string value, or its name in any case."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        for member in cls:
            if value == member.value or value.lower() == member.name.lower():
                return member
    names = ", ".join(repr(m.value if isinstance(m.value, str) else m.name.lower()) for m in cls)
    raise OpTypeError(f"{what} must be one of {names} (or a {cls.__name__} member), got {value!r}")


def as_number(value: Any, what: str) -> float | int:
    """A Python int or float (numpy scalars accepted, bools rejected)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise OpTypeError(f"{what} must be a number, got {value!r}")
    return int(value) if isinstance(value, int | np.integer) else float(value)


def as_float(value: Any, what: str) -> float:
    """A number attribute as a Python float."""
    return float(as_number(value, what))


def as_bool(value: Any, what: str) -> bool:
    """A flag: a bool, or the ints 0 and 1 (as ONNX attributes spell flags)."""
    if isinstance(value, bool | np.bool_) or (type(value) is int and value in (0, 1)):
        return bool(value)
    raise OpTypeError(f"{what} must be a bool, got {value!r}")


def broadcasts_to(shape: DimShape, target: DimShape) -> bool:
    """True when ``shape`` broadcasts unidirectionally (NumPy rules) to ``target``."""
    offset = len(target) - len(shape)
    return offset >= 0 and all(d in (1, target[offset + i]) for i, d in enumerate(shape))


# ----------------------------------------------------------------- graph-building helpers
def fit_scalar(value: Any, element_type: ElementType, what: str) -> bool | int | float:
    """A Python scalar that fits ``element_type`` exactly as ``constant`` checks it (floats may
    round, not overflow); for boolean, the ints 0 and 1 stand for False and True.

    Args:
        value: the scalar to check (a Python or numpy number or bool).
        element_type: the type it must fit.
        what: how error messages name the value (``"pad value"``, ``"on_value"``).

    Returns:
        ``value`` as a Python bool, int or float, by the kind of ``element_type``.

    Raises:
        OpTypeError: ``value`` is not a scalar, or does not fit ``element_type``.
    """
    if element_type.is_boolean and type(value) is int and value in (0, 1):
        value = bool(value)
    if isinstance(value, Output) or np.ndim(value) != 0:
        raise OpTypeError(f"{what} must be a Python scalar, got {value!r:.60}")
    array = np.asarray(value)
    try:
        check_fits(array, element_type)
    except OpTypeError as error:
        detail = str(error).removeprefix("constant: ")
        raise OpTypeError(f"{what} {value!r} does not fit {element_type.name}: {detail}") from None
    if element_type.is_boolean:
        return bool(array)
    return int(array) if element_type.is_integral else float(array)


def inverse_permutation(perm: Sequence[int]) -> tuple[int, ...]:
    """The permutation that undoes ``perm``: transposing by ``perm`` and then by its inverse
    gives the original axis order."""
    inverse = [0] * len(perm)
    for i, a in enumerate(perm):
        inverse[a] = i
    return tuple(inverse)
