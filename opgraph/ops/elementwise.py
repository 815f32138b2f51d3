"""Elementwise ops: unary math, binary arithmetic, comparisons, logic and select.

Core elementwise ops are strict: binary ops need equal element types and equal shapes
(``og.builders.numpy_broadcast`` makes framework-style broadcasting explicit).
"""

from __future__ import annotations

from typing import ClassVar

from opgraph.autodiff.grad import zeros_like
from opgraph.builders.scalars import scalar_like
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import (
    require_element_type,
    require_same_element_type,
    require_same_shape,
)

__all__ = [
    "UnaryElementwise",
    "FloatUnary",
    "BinaryElementwise",
    "Comparison",
    "Logical",
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
    "Not",
    "logical_not",
    "Select",
    "select",
]


SIGNED_NUMERIC: tuple[ElementType, ...] = et.FLOATS + et.SIGNED_INTS


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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else self.derivative(inputs[0], outputs[0], ct),)


class FloatUnary(UnaryElementwise):
    """Transcendental functions: floating-point inputs only."""

    __slots__ = ()
    accepted = et.FLOATS


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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None, None)
        return self.partials(inputs[0], inputs[1], outputs[0], ct)


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
class Div(BinaryElementwise):
    """a / b. For integers, floor division when ``floor_division`` (Python's ``-10 / 3 == -4``),
    else truncation toward zero (C's ``-10 / 3 == -3``). Floats: x/0 is ±inf or NaN. An integer
    division by zero is an error at run time."""

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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None, None, None)
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
