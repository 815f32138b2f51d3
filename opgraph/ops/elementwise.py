"""Elementwise ops: unary math, binary arithmetic, comparisons, logic and select.

Core elementwise ops are strict: binary ops need equal element types and equal shapes
(``ops.numpy_broadcast`` makes framework-style broadcasting explicit).
"""

from __future__ import annotations

import enum
import math
from typing import ClassVar

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import Constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, set_attr
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.common import (
    as_enum,
    require_element_type,
    require_same_element_type,
    require_same_shape,
)
from opgraph.ops.movement import Broadcast, Reshape, zeros_like

__all__ = [
    "UnaryElementwise",
    "FloatUnary",
    "FloatPredicate",
    "PiecewiseConstant",
    "BinaryElementwise",
    "Division",
    "Comparison",
    "Logical",
    "RoundMode",
    "Abs",
    "abs",
    "Neg",
    "negative",
    "Exp",
    "exp",
    "Log",
    "log",
    "Sqrt",
    "sqrt",
    "Tanh",
    "tanh",
    "Sigmoid",
    "sigmoid",
    "Relu",
    "relu",
    "Erf",
    "erf",
    "Ceil",
    "ceiling",
    "Floor",
    "floor",
    "Round",
    "round",
    "Sign",
    "sign",
    "Reciprocal",
    "reciprocal",
    "IsNaN",
    "is_nan",
    "IsInf",
    "is_inf",
    "IsFinite",
    "is_finite",
    "Add",
    "add",
    "Sub",
    "subtract",
    "Mul",
    "multiply",
    "Div",
    "divide",
    "Max",
    "maximum",
    "Min",
    "minimum",
    "Pow",
    "power",
    "Mod",
    "mod",
    "Equal",
    "equal",
    "NotEqual",
    "not_equal",
    "Less",
    "less",
    "LessOrEqual",
    "less_equal",
    "Greater",
    "greater",
    "GreaterOrEqual",
    "greater_equal",
    "And",
    "logical_and",
    "Or",
    "logical_or",
    "Xor",
    "logical_xor",
    "Not",
    "logical_not",
    "Select",
    "select",
]


SIGNED_NUMERIC: tuple[ElementType, ...] = et.FLOATS + et.SIGNED_INTS
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# ---------------------------------------------------------------------------- family bases
class UnaryElementwise(Op):
    """f(x) elementwise; output type equals the input type.

    Subclasses give their adjoint as ``derivative(x, y, ct) -> ct · dy/dx``.
    """

    __slots__ = ()
    num_inputs = 1
    accepted: ClassVar[tuple[ElementType, ...]] = et.NUMERIC

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, self.accepted)
        return x

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        raise NotImplementedError(f"{self.name} has no derivative")

    @classmethod
    def has_vjp(cls) -> bool:
        return cls.derivative is not UnaryElementwise.derivative

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (self.derivative(inputs[0], output, ct),)


class FloatUnary(UnaryElementwise):
    """Transcendental functions: floating-point inputs only."""

    __slots__ = ()
    accepted = et.FLOATS


class FloatPredicate(UnaryElementwise):
    """A test of floating-point values: a boolean output of the input's shape."""

    __slots__ = ()
    accepted = et.FLOATS
    differentiable = False

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, self.accepted)
        return TensorType(et.boolean, x.shape)


class PiecewiseConstant(UnaryElementwise):
    """Rounding-like functions: their derivative is zero wherever it exists, and the adjoint
    declares it zero everywhere (as JAX and PyTorch do), rather than refusing a gradient."""

    __slots__ = ()

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return zeros_like(ct)


class BinaryElementwise(Op):
    """f(a, b) elementwise on equal types and shapes; output has the input type."""

    __slots__ = ()
    num_inputs = 2
    accepted: ClassVar[tuple[ElementType, ...]] = et.NUMERIC

    def infer(self, a: TensorType, b: TensorType) -> TensorType:
        require_same_element_type((a, b))
        require_same_shape((a, b))
        require_element_type(a, self.accepted)
        return self.result_type(a)

    def result_type(self, a: TensorType) -> TensorType:
        return a

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        """``(ct · dz/da, ct · dz/db)``; subclasses that are differentiable define it."""
        raise NotImplementedError(f"{self.name} has no partials")

    @classmethod
    def has_vjp(cls) -> bool:
        return cls.partials is not BinaryElementwise.partials

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return self.partials(inputs[0], inputs[1], output, ct)


class Division(BinaryElementwise):
    """Family base of :class:`Div` and :class:`Mod`. An integer divisor that is a constant
    holding a zero (seen through broadcast and reshape) is an error when the node is built;
    any other integer division by zero is an error at run time."""

    __slots__ = ()

    def check_values(self, a: Output, b: Output) -> None:
        _reject_constant_zero_divisor(b)


class Comparison(BinaryElementwise):
    """Elementwise comparison; boolean output."""

    __slots__ = ()
    accepted = et.ALL
    differentiable = False

    def result_type(self, a: TensorType) -> TensorType:
        return TensorType(et.boolean, a.shape)


class Logical(BinaryElementwise):
    """Elementwise logic on booleans."""

    __slots__ = ()
    accepted = (et.boolean,)
    differentiable = False


# ---------------------------------------------------------------------------- unary ops
@opclass
class Abs(UnaryElementwise):
    """|x|."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return select(less(x, zeros_like(x)), negative(ct), ct)


def abs(x: Output) -> Output:  # noqa: A001 - the builder is named after the op
    """Elementwise absolute value."""
    return Abs()(x)


@opclass
class Neg(UnaryElementwise):
    """-x (signed and floating types)."""

    accepted = SIGNED_NUMERIC

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return negative(ct)


def negative(x: Output) -> Output:
    """Elementwise negation."""
    return Neg()(x)


@opclass
class Exp(FloatUnary):
    """e**x."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return multiply(ct, y)


def exp(x: Output) -> Output:
    """Elementwise exponential."""
    return Exp()(x)


@opclass
class Log(FloatUnary):
    """Natural logarithm (-inf at 0, NaN below)."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return divide(ct, x)


def log(x: Output) -> Output:
    """Elementwise natural logarithm."""
    return Log()(x)


@opclass
class Sqrt(FloatUnary):
    """Square root (NaN below 0)."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return divide(ct, add(y, y))


def sqrt(x: Output) -> Output:
    """Elementwise square root."""
    return Sqrt()(x)


@opclass
class Tanh(FloatUnary):
    """Hyperbolic tangent."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return subtract(ct, multiply(ct, multiply(y, y)))


def tanh(x: Output) -> Output:
    """Elementwise hyperbolic tangent."""
    return Tanh()(x)


@opclass
class Sigmoid(FloatUnary):
    """1 / (1 + e**-x)."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return multiply(ct, subtract(y, multiply(y, y)))


def sigmoid(x: Output) -> Output:
    """Elementwise logistic sigmoid."""
    return Sigmoid()(x)


@opclass
class Relu(UnaryElementwise):
    """max(x, 0)."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return select(greater(x, zeros_like(x)), ct, zeros_like(ct))


def relu(x: Output) -> Output:
    """Elementwise rectified linear unit."""
    return Relu()(x)


@opclass
class Erf(FloatUnary):
    """The error function, erf(x) = 2/sqrt(pi) * integral of e**-t**2 from 0 to x."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        bump = exp(negative(multiply(x, x)))
        return multiply(ct, multiply(scalar_like(_TWO_OVER_SQRT_PI, x), bump))


def erf(x: Output) -> Output:
    """Elementwise error function (floating-point types).

    Args:
        x: a floating-point value.

    Returns:
        erf(x), of ``x``'s type: odd, in [-1, 1], ``erf(±inf) = ±1``, NaN propagates.
    """
    return Erf()(x)


@opclass
class Ceil(PiecewiseConstant):
    """The smallest integer >= x (integers are unchanged)."""


def ceiling(x: Output) -> Output:
    """Elementwise ceiling: round toward +inf."""
    return Ceil()(x)


@opclass
class Floor(PiecewiseConstant):
    """The largest integer <= x (integers are unchanged)."""


def floor(x: Output) -> Output:
    """Elementwise floor: round toward -inf."""
    return Floor()(x)


class RoundMode(enum.Enum):
    """How :class:`Round` breaks ties between two integers."""

    HALF_TO_EVEN = "half_to_even"
    HALF_AWAY_FROM_ZERO = "half_away_from_zero"


@opclass
class Round(PiecewiseConstant):
    """The nearest integer; ``mode`` breaks ties: ``half_to_even`` (default, IEEE and ONNX:
    0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0) or ``half_away_from_zero`` (2.5 -> 3). Integers
    are unchanged."""

    mode: RoundMode = RoundMode.HALF_TO_EVEN

    def __post_init__(self) -> None:
        set_attr(self, "mode", as_enum(RoundMode, self.mode, "mode"))


def round(x: Output, mode: RoundMode | str = RoundMode.HALF_TO_EVEN) -> Output:  # noqa: A001
    """Elementwise rounding to the nearest integer.

    Args:
        x: a numeric value.
        mode: tie breaking, a :class:`RoundMode` or its lower-case name (``"half_to_even"``,
            ``"half_away_from_zero"``).
    """
    return Round(mode)(x)  # type: ignore[arg-type]


@opclass
class Sign(PiecewiseConstant):
    """-1, 0 or 1 by the sign of x (0 or 1 for unsigned types); NaN gives NaN."""


def sign(x: Output) -> Output:
    """Elementwise sign."""
    return Sign()(x)


@opclass
class Reciprocal(FloatUnary):
    """1 / x (±inf at ±0)."""

    def derivative(self, x: Output, y: Output, ct: Output) -> Output:
        return negative(multiply(ct, multiply(y, y)))


def reciprocal(x: Output) -> Output:
    """Elementwise reciprocal (floating-point types)."""
    return Reciprocal()(x)


@opclass
class IsNaN(FloatPredicate):
    """True where x is NaN."""


def is_nan(x: Output) -> Output:
    """Boolean mask of the NaN elements of a floating-point value."""
    return IsNaN()(x)


@opclass
class IsInf(FloatPredicate):
    """True where x is +inf or -inf."""


def is_inf(x: Output) -> Output:
    """Boolean mask of the infinite elements of a floating-point value."""
    return IsInf()(x)


@opclass
class IsFinite(FloatPredicate):
    """True where x is neither infinite nor NaN."""


def is_finite(x: Output) -> Output:
    """Boolean mask of the finite elements of a floating-point value."""
    return IsFinite()(x)


# --------------------------------------------------------------------------- binary ops
@opclass
class Add(BinaryElementwise):
    """a + b (integers wrap around)."""

    commutative = True

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        return ct, ct


def add(a: Output, b: Output) -> Output:
    """Elementwise sum of two values of equal type and shape."""
    return Add()(a, b)


@opclass
class Sub(BinaryElementwise):
    """a - b."""

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        return ct, negative(ct)


def subtract(a: Output, b: Output) -> Output:
    """Elementwise difference."""
    return Sub()(a, b)


@opclass
class Mul(BinaryElementwise):
    """a * b."""

    commutative = True

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        return multiply(ct, b), multiply(ct, a)


def multiply(a: Output, b: Output) -> Output:
    """Elementwise product."""
    return Mul()(a, b)


@opclass
class Div(Division):
    """a / b. For integers, floor division when ``floor_division`` (Python's ``-10 / 3 == -4``),
    else truncation toward zero (C's ``-10 / 3 == -3``). Floats: x/0 is ±inf or NaN. An integer
    division by zero is an error at run time, or when the node is built if the divisor is a
    constant (see :class:`Division`)."""

    floor_division: bool = True

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        return divide(ct, b), negative(divide(multiply(ct, z), b))


def divide(a: Output, b: Output, floor_division: bool = True) -> Output:
    """Elementwise quotient (see :class:`Div` for integer rounding)."""
    return Div(floor_division)(a, b)


@opclass
class Max(BinaryElementwise):
    """Elementwise maximum (NaN propagates)."""

    commutative = True

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        return _split_ties(greater(a, b), equal(a, b), ct), _split_ties(
            greater(b, a), equal(a, b), ct
        )


def maximum(a: Output, b: Output) -> Output:
    """Elementwise maximum."""
    return Max()(a, b)


@opclass
class Min(BinaryElementwise):
    """Elementwise minimum (NaN propagates)."""

    commutative = True

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        return _split_ties(less(a, b), equal(a, b), ct), _split_ties(less(b, a), equal(a, b), ct)


def minimum(a: Output, b: Output) -> Output:
    """Elementwise minimum."""
    return Min()(a, b)


@opclass
class Pow(BinaryElementwise):
    """a ** b. For integers a negative exponent is an error at run time."""

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        return _pow_partials(a, b, z, ct)


def power(a: Output, b: Output) -> Output:
    """Elementwise power."""
    return Pow()(a, b)


@opclass
class Mod(Division):
    """The remainder of a / b. ``fmod=False``: floor modulo, ``a - floor(a/b)·b``, with the sign
    of the divisor (Python's ``%``: ``-7 mod 3 == 2``, ``7 mod -3 == -2``). ``fmod=True``: C's
    ``fmod``, ``a - trunc(a/b)·b``, with the sign of the dividend (``fmod(-7, 3) == -1``).
    Floats: x mod 0 is NaN. Integers: a zero divisor is an error (see :class:`Division`)."""

    fmod: bool = False

    def partials(self, a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
        quotient = divide(subtract(a, z), b)  # the rounded quotient, constant between jumps
        return ct, negative(multiply(ct, quotient))


def mod(a: Output, b: Output, fmod: bool = False) -> Output:
    """Elementwise remainder.

    Args:
        a: the dividend (a numeric value).
        b: the divisor, of ``a``'s type and shape.
        fmod: False (default) for floor modulo (the sign of ``b``), True for C's ``fmod``
            (the sign of ``a``).

    Raises:
        OpTypeError: types differ, or ``b`` is an integer constant holding a zero.
    """
    return Mod(fmod)(a, b)


# -------------------------------------------------------------------------- comparisons
@opclass
class Equal(Comparison):
    """a == b."""

    commutative = True


def equal(a: Output, b: Output) -> Output:
    return Equal()(a, b)


@opclass
class NotEqual(Comparison):
    """a != b."""

    commutative = True


def not_equal(a: Output, b: Output) -> Output:
    return NotEqual()(a, b)


@opclass
class Less(Comparison):
    """a < b."""


def less(a: Output, b: Output) -> Output:
    return Less()(a, b)


@opclass
class LessOrEqual(Comparison):
    """a <= b."""


def less_equal(a: Output, b: Output) -> Output:
    return LessOrEqual()(a, b)


@opclass
class Greater(Comparison):
    """a > b."""


def greater(a: Output, b: Output) -> Output:
    return Greater()(a, b)


@opclass
class GreaterOrEqual(Comparison):
    """a >= b."""


def greater_equal(a: Output, b: Output) -> Output:
    return GreaterOrEqual()(a, b)


# ------------------------------------------------------------------------------ logical
@opclass
class And(Logical):
    """a AND b."""

    commutative = True


def logical_and(a: Output, b: Output) -> Output:
    return And()(a, b)


@opclass
class Or(Logical):
    """a OR b."""

    commutative = True


def logical_or(a: Output, b: Output) -> Output:
    return Or()(a, b)


@opclass
class Xor(Logical):
    """a XOR b (booleans)."""

    commutative = True


def logical_xor(a: Output, b: Output) -> Output:
    """Elementwise exclusive or of two boolean values."""
    return Xor()(a, b)


@opclass
class Not(UnaryElementwise):
    """NOT x (booleans)."""

    accepted = (et.boolean,)
    differentiable = False


def logical_not(x: Output) -> Output:
    return Not()(x)


@opclass
class Select(Op):
    """``condition ? x : y`` elementwise; all three of one shape, condition boolean."""

    num_inputs = 3

    def infer(self, condition: TensorType, x: TensorType, y: TensorType) -> TensorType:
        require_element_type(condition, (et.boolean,), "condition")
        require_same_element_type((x, y), "x and y")
        require_same_shape((condition, x, y))
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        zero = zeros_like(ct)
        condition = inputs[0]
        return None, select(condition, ct, zero), select(condition, zero, ct)


def select(condition: Output, x: Output, y: Output) -> Output:
    """Elementwise choice: ``x`` where ``condition`` is true, else ``y``."""
    return Select()(condition, x, y)


# ------------------------------------------------------------------------ adjoint helpers
def _split_ties(wins: Output, ties: Output, ct: Output) -> Output:
    """The cotangent share of one operand of max/min: all of it where it wins, half on ties."""
    zero = zeros_like(ct)
    return select(wins, ct, select(ties, multiply(ct, scalar_like(0.5, ct)), zero))


def _pow_partials(a: Output, b: Output, z: Output, ct: Output) -> tuple[Output, Output]:
    one = scalar_like(1, b)
    da = multiply(ct, multiply(b, power(a, subtract(b, one))))
    # d/db a**b = a**b · log a, defined for a > 0 (zero elsewhere, where the power is not smooth).
    positive = greater(a, zeros_like(a))
    safe_a = select(positive, a, scalar_like(1, a))
    db = select(positive, multiply(ct, multiply(z, log(safe_a))), zeros_like(ct))
    return da, db


# ------------------------------------------------------------------------ attribute helpers
def _reject_constant_zero_divisor(divisor: Output) -> None:
    if not divisor.element_type.is_integral or divisor.tensor_type.size == 0:
        return
    node = divisor.node
    while isinstance(node.op, Broadcast | Reshape):  # they repeat or re-view the values
        node = node.inputs[0].node
    if isinstance(node.op, Constant) and np.any(node.op.value == 0):
        raise OpTypeError(
            f"integer division by zero: the divisor (input 1) is a constant holding 0 "
            f"({node.op.describe()})"
        )
