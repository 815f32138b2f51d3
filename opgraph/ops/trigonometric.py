"""Trigonometric and hyperbolic functions and their inverses (floating-point types only).

Outside an inverse function's domain (``asin(2)``, ``acosh(0.5)``, ``atanh(2)``) the result is
NaN; ``atanh(±1)`` is ±inf. The elementwise family's rules apply: output type = input type.
"""

from __future__ import annotations

from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.core.op import opclass
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.elementwise import (
    BinaryElementwise,
    FloatUnary,
    add,
    divide,
    multiply,
    negative,
    sqrt,
    subtract,
)

__all__ = [
    "Sin",
    "sin",
    "Cos",
    "cos",
    "Tan",
    "tan",
    "Asin",
    "asin",
    "Acos",
    "acos",
    "Atan",
    "atan",
    "Sinh",
    "sinh",
    "Cosh",
    "cosh",
    "Asinh",
    "asinh",
    "Acosh",
    "acosh",
    "Atanh",
    "atanh",
    "Atan2",
    "atan2",
]


def _one(x: Output) -> Output:
    return scalar_like(1, x)


@opclass
class Sin(FloatUnary):
    """sin(x), x in radians."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return multiply(ct, cos(x))


def sin(x: Output) -> Output:
    """Elementwise sine."""
    return Sin()(x)


@opclass
class Cos(FloatUnary):
    """cos(x), x in radians."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return negative(multiply(ct, sin(x)))


def cos(x: Output) -> Output:
    """Elementwise cosine."""
    return Cos()(x)


@opclass
class Tan(FloatUnary):
    """tan(x), x in radians."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return multiply(ct, add(_one(y), multiply(y, y)))


def tan(x: Output) -> Output:
    """Elementwise tangent."""
    return Tan()(x)


@opclass
class Asin(FloatUnary):
    """arcsin(x) in [-pi/2, pi/2]; NaN outside [-1, 1]."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return divide(ct, sqrt(subtract(_one(x), multiply(x, x))))


def asin(x: Output) -> Output:
    """Elementwise inverse sine."""
    return Asin()(x)


@opclass
class Acos(FloatUnary):
    """arccos(x) in [0, pi]; NaN outside [-1, 1]."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return negative(divide(ct, sqrt(subtract(_one(x), multiply(x, x)))))


def acos(x: Output) -> Output:
    """Elementwise inverse cosine."""
    return Acos()(x)


@opclass
class Atan(FloatUnary):
    """arctan(x) in (-pi/2, pi/2)."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return divide(ct, add(_one(x), multiply(x, x)))


def atan(x: Output) -> Output:
    """Elementwise inverse tangent."""
    return Atan()(x)


@opclass
class Sinh(FloatUnary):
    """Hyperbolic sine."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return multiply(ct, cosh(x))


def sinh(x: Output) -> Output:
    """Elementwise hyperbolic sine."""
    return Sinh()(x)


@opclass
class Cosh(FloatUnary):
    """Hyperbolic cosine."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return multiply(ct, sinh(x))


def cosh(x: Output) -> Output:
    """Elementwise hyperbolic cosine."""
    return Cosh()(x)


@opclass
class Asinh(FloatUnary):
    """Inverse hyperbolic sine."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return divide(ct, sqrt(add(multiply(x, x), _one(x))))


def asinh(x: Output) -> Output:
    """Elementwise inverse hyperbolic sine."""
    return Asinh()(x)


@opclass
class Acosh(FloatUnary):
    """Inverse hyperbolic cosine, >= 0; NaN below 1."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        one = _one(x)
        return divide(ct, sqrt(multiply(subtract(x, one), add(x, one))))  # no cancellation at 1


def acosh(x: Output) -> Output:
    """Elementwise inverse hyperbolic cosine."""
    return Acosh()(x)


@opclass
class Atanh(FloatUnary):
    """Inverse hyperbolic tangent; ±inf at ±1, NaN outside [-1, 1]."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return divide(ct, subtract(_one(x), multiply(x, x)))


def atanh(x: Output) -> Output:
    """Elementwise inverse hyperbolic tangent."""
    return Atanh()(x)


@opclass
class Atan2(BinaryElementwise):
    """The angle of the point (x, y) in (-pi, pi]: inputs are ``(y, x)`` as in C's ``atan2``.

    ``atan2(±0, +0) = ±0``, ``atan2(±0, -0) = ±pi``, as IEEE 754 defines it.
    """

    accepted = et.FLOATS

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        scale = divide(ct, add(multiply(a, a), multiply(b, b)))
        return multiply(scale, b), negative(multiply(scale, a))


def atan2(y: Output, x: Output) -> Output:
    """Elementwise two-argument arctangent of ``y / x``, using both signs for the quadrant.

    Args:
        y: the ordinate (floating-point).
        x: the abscissa, of ``y``'s type and shape.
    """
    return Atan2()(y, x)
