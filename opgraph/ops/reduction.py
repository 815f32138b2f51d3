"""Reductions over axes. The reduced axes are dropped unless ``keep_dims``.

Reducing over an empty axis gives the identity and never reads the input: 0 (sum, L1, L2, sum
of squares), 1 (prod), -inf or the type's lowest value (max), +inf or the type's highest value
(min), True (all), False (any), -inf (log-sum, log-sum-exp); the mean of nothing is NaN (0/0).
ReduceMean, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare are defined
by decompositions into core ops, which are also their type rules and their adjoints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import ml_dtypes
import numpy as np

import opgraph.ops.elementwise as elementwise
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, set_attr
from opgraph.core.shape import as_int_tuple, normalize_axes
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.common import require_element_type
from opgraph.ops.conversion import convert
from opgraph.ops.dynamic import shape_of
from opgraph.ops.elementwise import (
    add,
    divide,
    equal,
    exp,
    is_finite,
    log,
    multiply,
    select,
    sqrt,
    subtract,
)
from opgraph.ops.indexing import gather
from opgraph.ops.movement import broadcast, reshape, zeros_like
from opgraph.ops.structural import stop_gradient

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
    "ReduceAll",
    "reduce_all",
    "ReduceAny",
    "reduce_any",
    "DecomposedReduction",
    "ReduceMean",
    "reduce_mean",
    "ReduceL1",
    "reduce_l1",
    "ReduceL2",
    "reduce_l2",
    "ReduceLogSum",
    "reduce_log_sum",
    "ReduceLogSumExp",
    "reduce_log_sum_exp",
    "ReduceSumSquare",
    "reduce_sum_square",
    "element_count",
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

    def adjoint(
        self, inputs: tuple[Output, ...], result: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (self.expand(ct, inputs[0]),)


def reduce_sum(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Sum of ``x`` over ``axes`` (negatives allowed; ``()`` reduces nothing)."""
    return ReduceSum(axes, keep_dims)(x)


@opclass
class ReduceProd(Reduction):
    """Product over ``axes``."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def adjoint(
        self, inputs: tuple[Output, ...], result: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (_product_adjoint(self, inputs[0], ct),)


def reduce_prod(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Product of ``x`` over ``axes``."""
    return ReduceProd(axes, keep_dims)(x)


@opclass
class ReduceMax(Reduction):
    """Maximum over ``axes`` (NaN propagates)."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def adjoint(
        self, inputs: tuple[Output, ...], result: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (_extremum_adjoint(self, inputs[0], result, ct),)


def reduce_max(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Maximum of ``x`` over ``axes``."""
    return ReduceMax(axes, keep_dims)(x)


@opclass
class ReduceMin(Reduction):
    """Minimum over ``axes`` (NaN propagates)."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def adjoint(
        self, inputs: tuple[Output, ...], result: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (_extremum_adjoint(self, inputs[0], result, ct),)


def reduce_min(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Minimum of ``x`` over ``axes``."""
    return ReduceMin(axes, keep_dims)(x)


@opclass
class ReduceAll(Reduction):
    """Logical AND over ``axes`` (booleans); True over an empty axis."""

    axes: tuple[int, ...]
    keep_dims: bool = False
    accepted = (et.boolean,)
    differentiable = False


def reduce_all(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Whether every element of the boolean ``x`` is true along ``axes``.

    Args:
        x: a boolean value.
        axes: the axes to reduce (negatives allowed; ``()`` reduces nothing).
        keep_dims: keep the reduced axes with size 1.
    """
    return ReduceAll(axes, keep_dims)(x)


@opclass
class ReduceAny(Reduction):
    """Logical OR over ``axes`` (booleans); False over an empty axis."""

    axes: tuple[int, ...]
    keep_dims: bool = False
    accepted = (et.boolean,)
    differentiable = False


def reduce_any(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Whether some element of the boolean ``x`` is true along ``axes``.

    Args:
        x: a boolean value.
        axes: the axes to reduce (negatives allowed; ``()`` reduces nothing).
        keep_dims: keep the reduced axes with size 1.
    """
    return ReduceAny(axes, keep_dims)(x)


# ------------------------------------------------------------------ decomposed reductions
class DecomposedReduction(Reduction):
    """Family base of reductions defined by a decomposition into core ops. After the element
    type check, the decomposition is the type rule; gradients flow through it."""

    __slots__ = ()

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, self.accepted)
        result = Op.infer(self, x)
        assert isinstance(result, TensorType)
        return result

    def sum(self, value: Output) -> Output:
        """``value`` summed over this reduction's axes (keeping them when ``keep_dims``)."""
        return ReduceSum(self.axes, self.keep_dims)(value)


@opclass
class ReduceMean(DecomposedReduction):
    """Arithmetic mean over ``axes`` (floating-point types): the sum divided by the number of
    reduced elements. An empty axis gives NaN (0/0), as numpy does."""

    axes: tuple[int, ...]
    keep_dims: bool = False
    accepted = et.FLOATS

    def decompose(self, x: Output) -> Output:
        count = math.prod(x.shape[a] for a in self.axes)
        if type(count) is int:
            return _divide_by_count(self.sum(x), count)
        return _divide_by_run_time_count(self.sum(x), x, self.axes)


def reduce_mean(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Mean of ``x`` over ``axes`` (NaN over an empty axis)."""
    return ReduceMean(axes, keep_dims)(x)


@opclass
class ReduceL1(DecomposedReduction):
    """Sum of absolute values over ``axes``."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def decompose(self, x: Output) -> Output:
        return self.sum(elementwise.abs(x))


def reduce_l1(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """L1 norm of ``x`` over ``axes``: ``Σ|x|``."""
    return ReduceL1(axes, keep_dims)(x)


@opclass
class ReduceL2(DecomposedReduction):
    """Euclidean norm over ``axes`` (floating-point types): ``sqrt(Σx²)``, unscaled (it
    overflows where ``x²`` does)."""

    axes: tuple[int, ...]
    keep_dims: bool = False
    accepted = et.FLOATS

    def decompose(self, x: Output) -> Output:
        return sqrt(self.sum(multiply(x, x)))


def reduce_l2(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """L2 norm of ``x`` over ``axes``: ``sqrt(Σx²)``."""
    return ReduceL2(axes, keep_dims)(x)


@opclass
class ReduceLogSum(DecomposedReduction):
    """``log(Σx)`` over ``axes`` (floating-point types); -inf over an empty axis."""

    axes: tuple[int, ...]
    keep_dims: bool = False
    accepted = et.FLOATS

    def decompose(self, x: Output) -> Output:
        return log(self.sum(x))


def reduce_log_sum(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Logarithm of the sum of ``x`` over ``axes``."""
    return ReduceLogSum(axes, keep_dims)(x)


@opclass
class ReduceLogSumExp(DecomposedReduction):
    """``log(Σ exp(x))`` over ``axes`` (floating-point types), computed stably as
    ``m + log(Σ exp(x - m))`` with ``m`` the group's maximum (0 where that is infinite, so
    groups of -inf give -inf and a +inf gives +inf). -inf over an empty axis."""

    axes: tuple[int, ...]
    keep_dims: bool = False
    accepted = et.FLOATS

    def decompose(self, x: Output) -> Output:
        peak = ReduceMax(self.axes)(x)
        # The shift cancels exactly, so no gradient needs to flow through it.
        shift = stop_gradient(select(is_finite(peak), peak, zeros_like(peak)))
        total = self.sum(exp(subtract(x, broadcast(shift, x.shape, self.axes))))
        return add(log(total), reshape(shift, total.shape) if self.keep_dims else shift)


def reduce_log_sum_exp(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """``log(Σ exp(x))`` over ``axes``, without overflow for large ``x``."""
    return ReduceLogSumExp(axes, keep_dims)(x)


@opclass
class ReduceSumSquare(DecomposedReduction):
    """Sum of squares over ``axes`` (integers wrap)."""

    axes: tuple[int, ...]
    keep_dims: bool = False

    def decompose(self, x: Output) -> Output:
        return self.sum(multiply(x, x))


def reduce_sum_square(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Sum of the squares of ``x`` over ``axes``: ``Σx²``."""
    return ReduceSumSquare(axes, keep_dims)(x)


def element_count(x: Output, axes: Sequence[int], like: Output) -> Output:
    """The number of elements of ``x`` over ``axes`` as a value of ``like``'s element type,
    broadcast to ``like``'s shape: a Constant when those sizes are static (the graph static
    Functions always had), else ``reduce_prod`` of the sizes from ``shape_of(x)``, computed
    when the Function runs (and folded to a Constant by ``fold_constants`` once specialised).
    Used by the decompositions that divide by a count (mean, normalizations)."""
    count = math.prod(x.shape[a] for a in axes)
    if type(count) is int:
        return scalar_like(count, like)
    sizes = gather(shape_of(x), constant(np.array(axes, np.int64)), 0)
    value = convert(ReduceProd((0,))(sizes), like.element_type)
    return broadcast(value, like.shape, tuple(range(like.rank))) if like.rank else value


def _divide_by_run_time_count(total: Output, x: Output, axes: Sequence[int]) -> Output:
    """``total`` divided by the symbolic element count of ``x`` over ``axes``, in f32 (f64 for
    f64): a count known only at run time may exceed f16's range, which the static path
    handles by a reciprocal chosen from the count's value."""
    wide = et.f64 if total.element_type is et.f64 else et.f32
    work = convert(total, wide) if total.element_type is not wide else total
    quotient = divide(work, element_count(x, axes, work))
    return quotient if wide is total.element_type else convert(quotient, total.element_type)


def _divide_by_count(total: Output, count: int) -> Output:
    """``total / count``; by the reciprocal when ``count`` overflows the type (f16 > 65504)."""
    if count <= float(ml_dtypes.finfo(total.element_type.dtype).max):
        return divide(total, scalar_like(count, total))
    return multiply(total, scalar_like(1.0 / count, total))


# ------------------------------------------------------------------------ adjoint helpers
def _extremum_adjoint(op: Reduction, x: Output, result: Output, ct: Output) -> Output:
    """Ties split the gradient equally among the extreme elements (none is dropped)."""
    hits = convert(equal(x, op.expand(result, x)), x.element_type)
    counts = op.expand(ReduceSum(op.axes, op.keep_dims)(hits), x)
    return divide(multiply(op.expand(ct, x), hits), counts)


def _product_adjoint(op: Reduction, x: Output, ct: Output) -> Output:
    """d prod / d x_i is the product of the other elements, computed without dividing by zero:
    with no zero in the group it is prod / x_i; with one zero, only the zero's position gets
    the product of the rest; with two or more zeros, everything is zero."""
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
