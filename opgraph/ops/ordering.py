"""Ordering ops: arg_max and arg_min, top_k, cumsum.

Orders are total and deterministic, so every backend gives the same indices:

* Ties go to the lowest index (``arg_max``/``arg_min`` with ``select_last_index`` take the
  highest instead).
* NaN counts as larger than every number, as in PyTorch: ``arg_max`` finds a NaN if there is
  one (numpy's ``argmax``), ``top_k(largest=True)`` ranks NaNs first and
  ``top_k(largest=False)`` last. ``arg_min`` also finds a NaN if there is one (numpy's
  ``argmin``): NaN propagates through both, as it does through ``reduce_max``/``reduce_min``.

Indices are i32 or i64 (``index_element_type``, default i64). ``arg_max``/``arg_min`` are not
differentiable; ``top_k`` passes the cotangent of its values back to the positions they came
from; ``cumsum``'s adjoint is the cumulative sum of the cotangent in the other direction.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import as_int, maybe_le, normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import require_element_type
from opgraph.ops.indexing import scatter_elements
from opgraph.ops.movement import zeros_like

__all__ = [
    "IndexReduction",
    "ArgMax",
    "arg_max",
    "ArgMin",
    "arg_min",
    "TopK",
    "top_k",
    "CumSum",
    "cumsum",
]

INDEX_TYPES: tuple[ElementType, ...] = (et.i32, et.i64)


def _index_type(value: Any) -> ElementType:
    element_type = as_element_type(value)
    if element_type not in INDEX_TYPES:
        raise OpTypeError(f"index_element_type {element_type.name} is not i32 or i64")
    return element_type


def _require_indexable(x: TensorType, axis: int, index_type: ElementType) -> None:
    limit = int(np.iinfo(index_type.dtype).max)
    require(  # on a symbolic axis: unless certainly too long, checked again at each binding
        maybe_le(x.shape[axis] - 1, limit),
        f"axis {axis} of {x} has {x.shape[axis]} elements, more than {index_type.name} indexes",
    )


class IndexReduction(Op):
    """Family base of :class:`ArgMax` and :class:`ArgMin`: the index of the extreme element
    along ``axis`` (the axis is dropped unless ``keep_dims``; it must not be empty)."""

    __slots__ = ()
    num_inputs = 1
    differentiable = False
    axis: int
    keep_dims: bool
    select_last_index: bool
    index_element_type: ElementType

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))
        set_attr(self, "index_element_type", _index_type(self.index_element_type))

    def canonicalize(self, x: TensorType) -> Op:
        return dataclasses.replace(self, axis=normalize_axis(self.axis, x.rank))  # type: ignore[type-var]

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, et.NUMERIC)
        require(  # a symbolic axis: unless certainly empty, checked again at each binding
            maybe_le(1, x.shape[self.axis]),
            f"axis {self.axis} of {x} is empty: there is no extreme element to index",
        )
        _require_indexable(x, self.axis, self.index_element_type)
        if self.keep_dims:
            shape = tuple(1 if i == self.axis else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i != self.axis)
        return TensorType(self.index_element_type, shape)


@opclass
class ArgMax(IndexReduction):
    """Index of the largest element along ``axis`` (a NaN if there is one)."""

    axis: int
    keep_dims: bool = False
    select_last_index: bool = False
    index_element_type: ElementType = et.i64


def arg_max(
    x: Output,
    axis: int,
    keep_dims: bool = False,
    select_last_index: bool = False,
    index_element_type: Any = et.i64,
) -> Output:
    """Index of the maximum of ``x`` along ``axis``.

    Args:
        x: a numeric value.
        axis: the axis to search (negative counts from the end); it must not be empty.
        keep_dims: keep the searched axis with size 1.
        select_last_index: on ties, the highest index (default: the lowest).
        index_element_type: i32 or i64.

    Returns:
        The indices, of ``index_element_type``. NaN counts as the maximum.
    """
    return ArgMax(axis, keep_dims, select_last_index, index_element_type)(x)


@opclass
class ArgMin(IndexReduction):
    """Index of the smallest element along ``axis`` (a NaN if there is one)."""

    axis: int
    keep_dims: bool = False
    select_last_index: bool = False
    index_element_type: ElementType = et.i64


def arg_min(
    x: Output,
    axis: int,
    keep_dims: bool = False,
    select_last_index: bool = False,
    index_element_type: Any = et.i64,
) -> Output:
    """Index of the minimum of ``x`` along ``axis``.

    Args:
        x: a numeric value.
        axis: the axis to search (negative counts from the end); it must not be empty.
        keep_dims: keep the searched axis with size 1.
        select_last_index: on ties, the highest index (default: the lowest).
        index_element_type: i32 or i64.

    Returns:
        The indices, of ``index_element_type``. NaN propagates: it is found like a minimum.
    """
    return ArgMin(axis, keep_dims, select_last_index, index_element_type)(x)


@opclass
class TopK(Op):
    """The ``k`` largest (or smallest) elements along ``axis`` and their indices.

    Outputs ``(values, indices)``, both shaped like ``x`` with ``axis`` of size ``k``. With
    ``sorted`` they are ordered best first (ties: lower index first); without, in the order
    they have in ``x``. NaN ranks above every number. ``0 <= k <= x.shape[axis]``.
    """

    k: int
    axis: int = -1
    largest: bool = True
    sorted: bool = True
    index_element_type: ElementType = et.i64
    num_inputs = 1
    multi_output = True

    def __post_init__(self) -> None:
        set_attr(self, "k", as_int(self.k, "k"))
        set_attr(self, "axis", as_int(self.axis, "axis"))
        set_attr(self, "index_element_type", _index_type(self.index_element_type))
        if self.k < 0:
            raise OpTypeError(f"k must be >= 0, got {self.k}")

    def canonicalize(self, x: TensorType) -> Op:
        return dataclasses.replace(self, axis=normalize_axis(self.axis, x.rank))

    def infer(self, x: TensorType) -> tuple[TensorType, TensorType]:
        require_element_type(x, et.NUMERIC)
        require(  # a symbolic axis: unless certainly shorter, checked again at each binding
            maybe_le(self.k, x.shape[self.axis]),
            f"k {self.k} exceeds the size {x.shape[self.axis]} of axis {self.axis} of {x}",
        )
        _require_indexable(x, self.axis, self.index_element_type)
        shape = tuple(self.k if i == self.axis else d for i, d in enumerate(x.shape))
        return TensorType(x.element_type, shape), TensorType(self.index_element_type, shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        # Indices are distinct along the axis, so a plain scatter places every cotangent.
        return (scatter_elements(zeros_like(inputs[0]), output.node.outputs[1], ct, self.axis),)


def top_k(
    x: Output,
    k: int,
    axis: int = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002 - ONNX's name for the attribute
    index_element_type: Any = et.i64,
) -> tuple[Output, Output]:
    """The ``k`` largest (or smallest) elements of ``x`` along ``axis``, with their indices.

    Args:
        x: a numeric value.
        k: how many elements to keep, ``0 <= k <= x.shape[axis]``.
        axis: the axis to search (negative counts from the end).
        largest: the largest elements (default) or the smallest.
        sorted: best first (ties: lower index first); False keeps them in ``x``'s order.
        index_element_type: i32 or i64.

    Returns:
        ``(values, indices)``, shaped like ``x`` with ``axis`` of size ``k``.

    Example:
        >>> values, indices = ops.top_k(scores, 5)
    """
    result: tuple[Output, Output] = TopK(k, axis, largest, sorted, index_element_type)(x)
    return result


@opclass
class CumSum(Op):
    """Cumulative sum along ``axis``: ``y[i] = Σ x[j]`` over ``j <= i`` (``j < i`` when
    ``exclusive``; ``j >= i`` / ``j > i`` when ``reverse``). Integers wrap; f16 and bf16
    accumulate in f32."""

    axis: int
    exclusive: bool = False
    reverse: bool = False
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))

    def canonicalize(self, x: TensorType) -> Op:
        return dataclasses.replace(self, axis=normalize_axis(self.axis, x.rank))

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, et.NUMERIC)
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (cumsum(ct, self.axis, self.exclusive, not self.reverse),)


def cumsum(x: Output, axis: int, exclusive: bool = False, reverse: bool = False) -> Output:
    """Cumulative sum of ``x`` along ``axis``.

    Args:
        x: a numeric value.
        axis: the axis to accumulate along (negative counts from the end).
        exclusive: leave each element out of its own sum (the first result is 0).
        reverse: accumulate from the end of the axis.
    """
    return CumSum(axis, exclusive, reverse)(x)
