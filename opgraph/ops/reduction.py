"""Reductions over axes. The reduced axes are dropped unless ``keep_dims``.

Reducing over an empty axis gives the identity: 0 (sum), 1 (prod), -inf or the type's lowest
value (max), +inf or the type's highest value (min).
"""

from __future__ import annotations

from typing import Any, ClassVar

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, set_attr
from opgraph.core.shape import as_int_tuple, normalize_axes
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import require_element_type

__all__ = [
    "Reduction",
    "ReduceSum",
    "reduce_sum",
    "ReduceProd",
    "reduce_prod",
    "ReduceMax",
    "reduce_max",
    "ReduceMin",
    "reduce_min",
]


class Reduction(Op):
    """Family base: ``axes`` (canonical: sorted, non-negative), ``keep_dims``."""

    __slots__ = ()
    num_inputs = 1
    accepted: ClassVar[tuple[ElementType, ...]] = et.NUMERIC
    axes: tuple[int, ...]
    keep_dims: bool

    def __post_init__(self) -> None:
        set_attr(self, "axes", as_int_tuple(self.axes, "axes"))

    def canonicalize(self, x: TensorType) -> Op:
        return type(self)(normalize_axes(self.axes, x.rank), self.keep_dims)  # type: ignore[call-arg]

    def expand(self, value: Output, x: Output) -> Output:
        """``value`` (shaped like this reduction's output) broadcast back to ``x``'s shape."""
        from opgraph.ops.movement import broadcast, reshape

        if self.keep_dims:
            value = reshape(value, [d for i, d in enumerate(x.shape) if i not in self.axes])
        return broadcast(value, x.shape, self.axes)

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, self.accepted)
        if self.keep_dims:
            shape = tuple(1 if i in self.axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in self.axes)
        return TensorType(x.element_type, shape)


@opclass
class ReduceSum(Reduction):
    """Sum over ``axes``."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else self.expand(ct, inputs[0]),)


def reduce_sum(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Sum of ``x`` over ``axes`` (negatives allowed; ``()`` reduces nothing)."""
    return ReduceSum(axes, keep_dims)(x)


@opclass
class ReduceProd(Reduction):
    """Product over ``axes``."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else _product_adjoint(self, inputs[0], ct),)


def reduce_prod(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Product of ``x`` over ``axes``."""
    return ReduceProd(axes, keep_dims)(x)


@opclass
class ReduceMax(Reduction):
    """Maximum over ``axes`` (NaN propagates)."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else _extremum_adjoint(self, inputs[0], outputs[0], ct),)


def reduce_max(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Maximum of ``x`` over ``axes``."""
    return ReduceMax(axes, keep_dims)(x)


@opclass
class ReduceMin(Reduction):
    """Minimum over ``axes`` (NaN propagates)."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else _extremum_adjoint(self, inputs[0], outputs[0], ct),)


def reduce_min(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Minimum of ``x`` over ``axes``."""
    return ReduceMin(axes, keep_dims)(x)


# ------------------------------------------------------------------------ adjoint helpers
def _extremum_adjoint(op: Reduction, x: Output, result: Output, ct: Output) -> Output:
    """Ties split the gradient equally among the extreme elements (none is dropped)."""
    from opgraph.ops.conversion import convert
    from opgraph.ops.elementwise import divide, equal, multiply

    hits = convert(equal(x, op.expand(result, x)), x.element_type)
    counts = op.expand(ReduceSum(op.axes, op.keep_dims)(hits), x)
    return divide(multiply(op.expand(ct, x), hits), counts)


def _product_adjoint(op: Reduction, x: Output, ct: Output) -> Output:
    """d prod / d x_i is the product of the other elements, computed without dividing by zero:
    with no zero in the group it is prod / x_i; with one zero, only the zero's position gets
    the product of the rest; with two or more zeros, everything is zero."""
    from opgraph.autodiff.grad import zeros_like
    from opgraph.builders.scalars import scalar_like
    from opgraph.ops.conversion import convert
    from opgraph.ops.elementwise import divide, equal, multiply, select

    zero = zeros_like(x)
    is_zero = equal(x, zero)
    nonzero = select(is_zero, scalar_like(1, x), x)
    product = op.expand(ReduceProd(op.axes, op.keep_dims)(nonzero), x)
    zeros = op.expand(ReduceSum(op.axes, op.keep_dims)(convert(is_zero, x.element_type)), x)
    no_zero = equal(zeros, zero)
    one_zero = equal(zeros, scalar_like(1, x))
    others = select(
        no_zero, divide(product, nonzero), select(one_zero, select(is_zero, product, zero), zero)
    )
    return multiply(op.expand(ct, x), others)
