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


def reduce_sum(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Sum of ``x`` over ``axes`` (negatives allowed; ``()`` reduces nothing)."""
    return ReduceSum(axes, keep_dims)(x)


@opclass
class ReduceProd(Reduction):
    """Product over ``axes``."""

    axes: tuple[int, ...]
    keep_dims: bool = False


def reduce_prod(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Product of ``x`` over ``axes``."""
    return ReduceProd(axes, keep_dims)(x)


@opclass
class ReduceMax(Reduction):
    """Maximum over ``axes`` (NaN propagates)."""

    axes: tuple[int, ...]
    keep_dims: bool = False


def reduce_max(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Maximum of ``x`` over ``axes``."""
    return ReduceMax(axes, keep_dims)(x)


@opclass
class ReduceMin(Reduction):
    """Minimum over ``axes`` (NaN propagates)."""

    axes: tuple[int, ...]
    keep_dims: bool = False


def reduce_min(x: Output, axes: Any, keep_dims: bool = False) -> Output:
    """Minimum of ``x`` over ``axes``."""
    return ReduceMin(axes, keep_dims)(x)
