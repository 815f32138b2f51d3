"""Checks shared by the type rules of several op families."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, TypeVar

from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
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
                "(no implicit broadcasting; use broadcast or og.builders.numpy_broadcast)"
            )


def require_rank(t: TensorType, rank: int, what: str = "input") -> None:
    if t.rank != rank:
        raise OpTypeError(f"{what} must have rank {rank}, got {t} of rank {t.rank}")


def require_min_rank(t: TensorType, rank: int, what: str = "input") -> None:
    if t.rank < rank:
        raise OpTypeError(f"{what} must have rank >= {rank}, got {t}")


EnumT = TypeVar("EnumT", bound=enum.Enum)


def as_enum(cls: type[EnumT], value: Any, what: str) -> EnumT:
    """An enum attribute from a member or its lower-case name."""
    if isinstance(value, cls):
        return value
    names = {member.name.lower(): member for member in cls}
    if isinstance(value, str) and value in names:
        return names[value]
    raise OpTypeError(f"{what} {value!r} is not one of {', '.join(names)}")
