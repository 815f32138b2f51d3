"""Activation functions defined by decomposition into core elementwise ops.

Each op's decomposition is its semantics, its type rule and (through autodiff) its adjoint. Most
take floating-point inputs; ``prelu`` also takes signed integers, ``clamp`` and
``squared_difference`` every numeric type. Attribute defaults are ONNX's.

The private attribute-normalisation helpers at the end are shared by the other framework-level
families (linalg, normalization, rnn, resize).
"""

from __future__ import annotations

import enum
import math
from typing import Any, ClassVar

import numpy as np

import opgraph.ops.elementwise as ew
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import (
    broadcast_to,
    numpy_broadcast,
    numpy_broadcast_shape,
    scalar_like,
)
from opgraph.ops.common import (
    as_enum,
    as_float,
    as_number,
    broadcasts_to,
    require_element_type,
    require_same_element_type,
)
from opgraph.ops.elementwise import (
    add,
    divide,
    equal,
    erf,
    exp,
    greater,
    less,
    log,
    maximum,
    minimum,
    multiply,
    negative,
    select,
    subtract,
    tanh,
)
from opgraph.ops.movement import broadcast

__all__ = [
    "Activation",
    "GeluApproximation",
    "Gelu",
    "gelu",
    "Elu",
    "elu",
    "Selu",
    "selu",
    "LeakyRelu",
    "leaky_relu",
    "PRelu",
    "prelu",
    "HardSigmoid",
    "hard_sigmoid",
    "HardSwish",
    "hard_swish",
    "Softplus",
    "softplus",
    "Softsign",
    "softsign",
    "Mish",
    "mish",
    "Clamp",
    "clamp",
    "SquaredDifference",
    "squared_difference",
]

SIGNED_NUMERIC: tuple[ElementType, ...] = et.FLOATS + et.SIGNED_INTS


class Activation(Op):
    """Family base: one input of an ``accepted`` element type; the output has its type."""

    __slots__ = ()
    num_inputs = 1
    accepted: ClassVar[tuple[ElementType, ...]] = et.FLOATS

    def canonicalize(self, x: TensorType) -> Op:
        require_element_type(x, self.accepted)
        return self


# ----------------------------------------------------------------------------------- gelu
class GeluApproximation(enum.Enum):
    """How :class:`Gelu` evaluates the Gaussian CDF (``"none"``: exactly, with erf)."""

    NONE = "none"
    TANH = "tanh"


@opclass
class Gelu(Activation):
    """Gaussian error linear unit: ``x · Φ(x)``.

    ``approximate="none"``: ``0.5 · x · (1 + erf(x / √2))``; ``"tanh"``:
    ``0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))``.
    """

    approximate: GeluApproximation = GeluApproximation.NONE

    def __post_init__(self) -> None:
        set_attr(self, "approximate", as_enum(GeluApproximation, self.approximate, "approximate"))

    def decompose(self, x: Output) -> Output:
        if self.approximate is GeluApproximation.TANH:
            cubic = multiply(scalar_like(0.044715, x), multiply(x, multiply(x, x)))
            phi = tanh(multiply(scalar_like(math.sqrt(2 / math.pi), x), add(x, cubic)))
        else:
            phi = erf(multiply(x, scalar_like(1 / math.sqrt(2), x)))
        return multiply(multiply(x, scalar_like(0.5, x)), add(scalar_like(1, x), phi))


def gelu(x: Output, approximate: Any = "none") -> Output:
    """Gaussian error linear unit; ``approximate`` is ``"none"`` (erf) or ``"tanh"``."""
    return Gelu(approximate)(x)


# ------------------------------------------------------------------------------ elu, selu
@opclass
class Elu(Activation):
    """``x`` where ``x > 0``, else ``alpha · (eˣ - 1)``."""

    alpha: float = 1.0

    def __post_init__(self) -> None:
        set_attr(self, "alpha", as_float(self.alpha, "alpha"))

    def decompose(self, x: Output) -> Output:
        zero = scalar_like(0, x)
        # exp of min(x, 0): the branch select drops never overflows (no inf·0 in the adjoint).
        negative_part = subtract(exp(minimum(x, zero)), scalar_like(1, x))
        return select(greater(x, zero), x, multiply(scalar_like(self.alpha, x), negative_part))


def elu(x: Output, alpha: float = 1.0) -> Output:
    """Exponential linear unit."""
    return Elu(alpha)(x)


@opclass
class Selu(Activation):
    """Scaled ELU: ``gamma · elu(x, alpha)`` (defaults: the self-normalising constants)."""

    alpha: float = 1.6732632423543772
    gamma: float = 1.0507009873554805

    def __post_init__(self) -> None:
        set_attr(self, "alpha", as_float(self.alpha, "alpha"))
        set_attr(self, "gamma", as_float(self.gamma, "gamma"))

    def decompose(self, x: Output) -> Output:
        return multiply(scalar_like(self.gamma, x), elu(x, self.alpha))


def selu(x: Output, alpha: float = 1.6732632423543772, gamma: float = 1.0507009873554805) -> Output:
    """Scaled exponential linear unit."""
    return Selu(alpha, gamma)(x)


# ---------------------------------------------------------------------- leaky_relu, prelu
@opclass
class LeakyRelu(Activation):
    """``x`` where ``x >= 0``, else ``alpha · x``."""

    alpha: float = 0.01

    def __post_init__(self) -> None:
        set_attr(self, "alpha", as_float(self.alpha, "alpha"))

    def decompose(self, x: Output) -> Output:
        return select(less(x, scalar_like(0, x)), multiply(x, scalar_like(self.alpha, x)), x)


def leaky_relu(x: Output, alpha: float = 0.01) -> Output:
    """Leaky rectified linear unit."""
    return LeakyRelu(alpha)(x)


@opclass
class PRelu(Op):
    """Parametric ReLU: ``x`` where ``x >= 0``, else ``slope · x``; inputs ``(x, slope)``.

    Attributes:
        axis: None: ``slope`` broadcasts to ``x`` unidirectionally (NumPy rules, ONNX). An axis:
            ``slope`` is 1-D with one value per index of that axis of ``x`` (PyTorch's
            per-channel ``PReLU`` is ``axis=1``); canonical form non-negative.
    """

    axis: int | None = None
    num_inputs = 2

    def canonicalize(self, x: TensorType, slope: TensorType) -> PRelu:
        require_element_type(x, SIGNED_NUMERIC, "x")
        require_same_element_type((x, slope), "x and slope")
        if self.axis is None:
            require(
                broadcasts_to(slope.shape, x.shape),
                f"slope shape {list(slope.shape)} does not broadcast to x shape "
                f"{list(x.shape)} (for one slope per channel pass axis=1)",
            )
            return self
        axis = normalize_axis(self.axis, x.rank)
        require(
            slope.shape == (x.shape[axis],),
            f"slope shape {list(slope.shape)} must be [{x.shape[axis]}], the size of axis {axis} "
            "of x",
        )
        return PRelu(axis)

    def decompose(self, x: Output, slope: Output) -> Output:
        if self.axis is None:
            slopes = broadcast_to(slope, x.shape)
        else:
            slopes = broadcast(slope, x.shape, [a for a in range(x.rank) if a != self.axis])
        return select(less(x, scalar_like(0, x)), multiply(x, slopes), x)


def prelu(x: Output, slope: Output, axis: int | None = None) -> Output:
    """Parametric ReLU with learned ``slope``.

    Args:
        x: floating-point or signed integer input.
        slope: same element type; NumPy-broadcastable to ``x`` (``axis=None``), or 1-D along
            ``axis``.
        axis: the axis ``slope`` runs along, or None for broadcasting.
    """
    return PRelu(axis)(x, slope)


# ---------------------------------------------------------------- hard_sigmoid, hard_swish
@opclass
class HardSigmoid(Activation):
    """``max(0, min(1, alpha · x + beta))``."""

    alpha: float = 0.2
    beta: float = 0.5

    def __post_init__(self) -> None:
        set_attr(self, "alpha", as_float(self.alpha, "alpha"))
        set_attr(self, "beta", as_float(self.beta, "beta"))

    def decompose(self, x: Output) -> Output:
        line = add(multiply(x, scalar_like(self.alpha, x)), scalar_like(self.beta, x))
        return maximum(minimum(line, scalar_like(1, x)), scalar_like(0, x))


def hard_sigmoid(x: Output, alpha: float = 0.2, beta: float = 0.5) -> Output:
    """Piecewise-linear sigmoid."""
    return HardSigmoid(alpha, beta)(x)


@opclass
class HardSwish(Activation):
    """``x · hard_sigmoid(x, alpha=1/6, beta=0.5)``."""

    def decompose(self, x: Output) -> Output:
        return multiply(x, hard_sigmoid(x, 1 / 6, 0.5))


def hard_swish(x: Output) -> Output:
    """Hard swish (MobileNetV3)."""
    return HardSwish()(x)


# ------------------------------------------------------------------ softplus, softsign, mish
@opclass
class Softplus(Activation):
    """``log(1 + eˣ)``, evaluated stably as ``max(x, 0) + log1p(e^-|x|)`` (no overflow, no
    cancellation for large ``|x|``; ``log1p(u) = log(1 + u) · u / ((1 + u) - 1)``)."""

    def decompose(self, x: Output) -> Output:
        # -|x| as min(x, -x): its adjoint at 0 is 0, so d softplus / dx (0) comes out 1/2.
        small = exp(minimum(x, negative(x)))
        return add(maximum(x, scalar_like(0, x)), _log1p(small))


def _log1p(u: Output) -> Output:
    one = scalar_like(1, u)
    w = add(one, u)
    exact = equal(w, one)  # u below the type's resolution: log1p(u) = u
    denominator = select(exact, one, subtract(w, one))
    return select(exact, u, multiply(log(w), divide(u, denominator)))


def softplus(x: Output) -> Output:
    """Softplus, a smooth ReLU."""
    return Softplus()(x)


@opclass
class Softsign(Activation):
    """``x / (1 + |x|)``."""

    def decompose(self, x: Output) -> Output:
        return divide(x, add(scalar_like(1, x), ew.abs(x)))


def softsign(x: Output) -> Output:
    """Softsign."""
    return Softsign()(x)


@opclass
class Mish(Activation):
    """``x · tanh(softplus(x))``."""

    def decompose(self, x: Output) -> Output:
        return multiply(x, tanh(softplus(x)))


def mish(x: Output) -> Output:
    """Mish."""
    return Mish()(x)


# ---------------------------------------------------------------------------------- clamp
@opclass
class Clamp(Activation):
    """``min(max(x, min_value), max_value)``; a None bound is absent (nGraph ``Clamp``).

    Every numeric type. For integer types the lower bound is rounded up and the upper bound
    down, then both are saturated to the type's range; for float types they round to the type
    (a bound beyond its range becomes ±inf). NaN stays NaN.

    Attributes:
        min_value: the lower bound, or None.
        max_value: the upper bound, or None; not below ``min_value``.
    """

    min_value: float | None = None
    max_value: float | None = None
    accepted = et.NUMERIC

    def __post_init__(self) -> None:
        low = _as_bound(self.min_value, "min")
        high = _as_bound(self.max_value, "max")
        if low is not None and high is not None and low > high:
            raise OpTypeError(f"min {low!r} is greater than max {high!r}")
        set_attr(self, "min_value", low)
        set_attr(self, "max_value", high)

    def typed_bounds(self, element_type: ElementType) -> tuple[Any, Any]:
        """The bounds as values of ``element_type`` (None where absent): for integer types
        rounded inward and saturated to the type's range (so ``±inf`` is the type's lowest or
        highest value), for float types rounded to the type (``±inf`` beyond its range)."""
        return _typed_bounds(self.min_value, self.max_value, element_type)

    def decompose(self, x: Output) -> Output:
        low, high = self.typed_bounds(x.element_type)
        if low is not None:
            x = maximum(x, scalar_like(low, x))
        if high is not None:
            x = minimum(x, scalar_like(high, x))
        return x


def _as_bound(value: Any, what: str) -> float | int | None:
    if value is None:
        return None
    number = as_number(value, what)
    if isinstance(number, float) and math.isnan(number):  # math.isnan(10**400) overflows
        raise OpTypeError(f"{what} must not be NaN")
    return number


def _typed_bounds(
    low: float | None, high: float | None, element_type: ElementType
) -> tuple[Any, Any]:
    """The bounds in ``element_type``: integers rounded inward and saturated to the type's
    range; floats rounded to the type, ±inf beyond its range."""
    if not element_type.is_integral:
        return _rounded(low, element_type), _rounded(high, element_type)
    info = np.iinfo(element_type.dtype)

    def saturate(value: float | None, rounding: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, float) and math.isinf(value):  # math.ceil(inf) would overflow
            return int(info.max) if value > 0 else int(info.min)
        rounded = value if isinstance(value, int) else rounding(value)
        return int(min(max(rounded, int(info.min)), int(info.max)))

    return saturate(low, math.ceil), saturate(high, math.floor)


def _rounded(value: float | None, element_type: ElementType) -> Any:
    if value is None:
        return None
    try:
        wide = float(value)
    except OverflowError:  # an int beyond the float range: beyond every float type's too
        wide = math.inf if value > 0 else -math.inf
    with np.errstate(over="ignore"):
        return np.asarray(wide, np.float64).astype(element_type.dtype)


def clamp(x: Output, min: float | None = None, max: float | None = None) -> Output:  # noqa: A002
    """``x`` limited to ``[min, max]`` (either bound may be None).

    Raises:
        OpTypeError: ``min > max``, a NaN or non-numeric bound, or a non-numeric ``x``.
    """
    return Clamp(min, max)(x)


# --------------------------------------------------------------------- squared_difference
@opclass
class SquaredDifference(Op):
    """``(a - b)²`` with NumPy broadcasting of ``a`` and ``b`` (every numeric type; integers
    wrap)."""

    num_inputs = 2

    def canonicalize(self, a: TensorType, b: TensorType) -> SquaredDifference:
        require_same_element_type((a, b))
        require_element_type(a, et.NUMERIC)
        numpy_broadcast_shape(a.shape, b.shape)
        return self

    def decompose(self, a: Output, b: Output) -> Output:
        left, right = numpy_broadcast(a, b)
        difference = subtract(left, right)
        return multiply(difference, difference)


def squared_difference(a: Output, b: Output) -> Output:
    """``(a - b)²``, ``a`` and ``b`` broadcast NumPy-style."""
    return SquaredDifference()(a, b)
