"""Bitwise ops on integers: not, and, or, xor (also on booleans, where they are the logical
ops) and shifts. None is differentiable (integer and boolean values carry no gradient).

Shifts follow XLA and JAX, so every shift amount has a defined result and no backend needs a
run-time check: the amount is read as unsigned, so a negative amount counts as a huge one.
``shift_left`` by an amount outside ``[0, bitwidth)`` gives 0 (bits shifted out are lost, the
result wraps in two's complement); ``shift_right`` is arithmetic for signed types (``-5 >> 1
== -3``: floor division by a power of two; beyond the bitwidth: 0 or -1 by the sign) and
logical for unsigned types (beyond the bitwidth: 0).
"""

from __future__ import annotations

import enum

from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.core.op import opclass, set_attr
from opgraph.ops.common import as_enum
from opgraph.ops.elementwise import BinaryElementwise, UnaryElementwise

__all__ = [
    "Bitwise",
    "BitwiseNot",
    "bitwise_not",
    "BitwiseAnd",
    "bitwise_and",
    "BitwiseOr",
    "bitwise_or",
    "BitwiseXor",
    "bitwise_xor",
    "ShiftDirection",
    "BitShift",
    "shift_left",
    "shift_right",
]

INTEGRAL_OR_BOOLEAN = (*et.INTS, et.boolean)


class Bitwise(BinaryElementwise):
    """Family base: a bitwise function of two integer (or boolean) values of one type."""

    __slots__ = ()
    accepted = INTEGRAL_OR_BOOLEAN
    differentiable = False
    commutative = True


@opclass
class BitwiseNot(UnaryElementwise):
    """~x: every bit flipped (two's complement: ``~x == -x - 1``); NOT for booleans."""

    accepted = INTEGRAL_OR_BOOLEAN
    differentiable = False


def bitwise_not(x: Output) -> Output:
    """Elementwise bitwise complement of an integer (or boolean) value."""
    return BitwiseNot()(x)


@opclass
class BitwiseAnd(Bitwise):
    """a & b."""


def bitwise_and(a: Output, b: Output) -> Output:
    """Elementwise bitwise AND of two integer (or boolean) values of one type."""
    return BitwiseAnd()(a, b)


@opclass
class BitwiseOr(Bitwise):
    """a | b."""


def bitwise_or(a: Output, b: Output) -> Output:
    """Elementwise bitwise OR of two integer (or boolean) values of one type."""
    return BitwiseOr()(a, b)


@opclass
class BitwiseXor(Bitwise):
    """a ^ b."""


def bitwise_xor(a: Output, b: Output) -> Output:
    """Elementwise bitwise XOR of two integer (or boolean) values of one type."""
    return BitwiseXor()(a, b)


class ShiftDirection(enum.Enum):
    """The direction of :class:`BitShift`."""

    LEFT = "left"
    RIGHT = "right"


@opclass
class BitShift(BinaryElementwise):
    """``x << shift`` or ``x >> shift`` by ``direction``, elementwise; ``shift`` has ``x``'s
    type and shape. Out-of-range amounts are defined (see the module docstring)."""

    direction: ShiftDirection
    accepted = et.INTS
    differentiable = False

    def __post_init__(self) -> None:
        set_attr(self, "direction", as_enum(ShiftDirection, self.direction, "direction"))


def shift_left(x: Output, shift: Output) -> Output:
    """Elementwise ``x << shift``: 0 when ``shift`` is negative or >= the bitwidth.

    Args:
        x: an integer value.
        shift: the amounts, of ``x``'s type and shape.
    """
    return BitShift(ShiftDirection.LEFT)(x, shift)


def shift_right(x: Output, shift: Output) -> Output:
    """Elementwise ``x >> shift``: arithmetic for signed types, logical for unsigned ones; a
    negative ``shift`` or one >= the bitwidth gives 0, or -1 for negative signed ``x``.

    Args:
        x: an integer value.
        shift: the amounts, of ``x``'s type and shape.
    """
    return BitShift(ShiftDirection.RIGHT)(x, shift)
