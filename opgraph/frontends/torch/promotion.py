"""ATen type promotion (``torch.result_type``) made explicit.

ATen ranks operands in three tiers: tensors with dimensions, zero-dimensional tensors, and
Python scalars ("wrapped numbers"). The highest tier present decides the element type, unless
a lower tier belongs to a higher *category* (bool < integer < floating): then the lower tier's
type wins (a Python float makes an integer tensor f32, the default dtype; a Python int never
changes an integer tensor's width). Within one tier, ``torch.promote_types`` decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from opgraph.core.element_type import ElementType
from opgraph.core.errors import ConversionError
from opgraph.core.node import Output
from opgraph.frontends.torch.types import from_torch, to_torch


@dataclass(frozen=True)
class Scalar:
    """A Python number known only at run time (``Tensor.item()``: a SymInt/SymFloat in the
    graph), held as a rank-0 value. Type promotion treats it as the Python scalar it is.

    Attributes:
        value: the rank-0 value.
        kind: ``bool``, ``int`` or ``float``.
    """

    value: Output
    kind: type


Operand = Output | Scalar | bool | int | float


def _category(dtype: torch.dtype | None) -> int:
    if dtype is None:
        return -1
    if dtype == torch.bool:
        return 0
    return 2 if dtype.is_floating_point else 1


def _promote(a: torch.dtype | None, b: torch.dtype) -> torch.dtype:
    return b if a is None else torch.promote_types(a, b)


def _scalar_dtype(value: bool | int | float) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, float):
        return torch.get_default_dtype()
    raise ConversionError(f"cannot promote a {type(value).__name__} operand ({value!r:.40})")


def _combine(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    """c10's ``combine_categories``: a lower tier only matters when its category is higher."""
    if higher is None:
        return lower
    if lower is None or _category(higher) == 2:
        return higher
    if higher == torch.bool or _category(lower) == 2:
        return torch.promote_types(higher, lower)
    return higher


def result_type(operands: Iterable[Operand]) -> ElementType:
    """The element type ATen computes ``operands`` in (``torch.result_type`` rules).

    Raises:
        ConversionError: no operand, or an operand that is neither a value nor a number.
    """
    tiers: list[torch.dtype | None] = [None, None, None]  # dimensioned, zero-dim, scalar
    for operand in operands:
        if isinstance(operand, Output):
            tier = 0 if operand.rank else 1
            tiers[tier] = _promote(tiers[tier], to_torch(operand.element_type))
        elif isinstance(operand, Scalar):
            tiers[2] = _promote(tiers[2], _scalar_dtype(operand.kind()))
        else:
            tiers[2] = _promote(tiers[2], _scalar_dtype(operand))
    result = _combine(tiers[0], _combine(tiers[1], tiers[2]))
    if result is None:
        raise ConversionError("type promotion needs at least one operand")
    return from_torch(result)


def float_type(element_type: ElementType) -> ElementType:
    """ATen's INT_TO_FLOAT rule: integers and booleans compute in the default float type."""
    return element_type if element_type.is_real else from_torch(torch.get_default_dtype())
