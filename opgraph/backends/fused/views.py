"""Operands of generated code: strided views of buffers, and uniform literals.

Movement ops (broadcast, transpose, slice, reshape) never copy in the fused compiler: they map an
operand to another operand (``lowering/movement.py``), and kernels read through the resulting
strides. A reshape that strides cannot express asks for a contiguous copy first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from opgraph.core.dim import Dim, DimExpr, InconclusiveDimensionError, dim_max
from opgraph.core.element_type import ElementType
from opgraph.core.errors import UnsupportedOpError
from opgraph.core.shape import DimShape


def static(d: Dim) -> int:
    """``d`` where only static Programs get (the GPU, steps without a symbolic lowering).

    Raises:
        UnsupportedOpError: ``d`` is symbolic (a compiler bug: that code was reached).
    """
    if isinstance(d, int):
        return d
    raise UnsupportedOpError(f"the symbolic size {d} reached code that needs static sizes")


def static_all(ds: tuple[Dim, ...] | list[Dim]) -> tuple[int, ...]:
    """Every dimension of ``ds`` by :func:`static`."""
    return tuple(static(d) for d in ds)


def shape_size(shape: DimShape) -> Dim:
    """The element count of ``shape``: an int, or an expression of its symbols."""
    return math.prod(shape)


def row_major_strides(shape: DimShape) -> tuple[Dim, ...]:
    """Element strides of a dense row-major array of ``shape`` (expressions where the shape
    is symbolic: ``max(d, 1)`` stays a ``max`` unless the bounds decide it)."""
    strides: list[Dim] = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        d = shape[axis + 1]
        strides[axis] = strides[axis + 1] * (max(d, 1) if type(d) is int else dim_max(d, 1))
    return tuple(strides)


@dataclass(frozen=True, slots=True)
class View:
    """Elements of buffer ``buffer`` at ``offset + sum(index * strides)`` (in elements)."""

    buffer: int
    element_type: ElementType
    shape: DimShape
    strides: tuple[Dim, ...]
    offset: Dim = 0

    @staticmethod
    def dense(buffer: int, element_type: ElementType, shape: DimShape) -> View:
        return View(buffer, element_type, shape, row_major_strides(shape), 0)

    @property
    def size(self) -> Dim:
        return math.prod(self.shape)

    @property
    def is_dense(self) -> bool:
        """Row-major and gap-free (size-1 axes may have any stride)."""
        if type(self.size) is int and self.size == 0:
            return True
        expected = row_major_strides(self.shape)
        return all(
            d == 1 or s == e for d, s, e in zip(self.shape, self.strides, expected, strict=True)
        )

    @property
    def is_whole(self) -> bool:
        """Dense and starting at the buffer's first element."""
        return self.is_dense and self.offset == 0


@dataclass(frozen=True, slots=True)
class Literal:
    """A tensor whose elements all equal ``value`` (a uniform constant): no buffer."""

    value: bool | int | float
    element_type: ElementType
    shape: DimShape

    @property
    def size(self) -> Dim:
        return math.prod(self.shape)


Operand = View | Literal


def permute(x: Operand, order: tuple[int, ...]) -> Operand:
    """``x`` with axes reordered: new axis i is old axis ``order[i]``."""
    shape = tuple(x.shape[a] for a in order)
    if isinstance(x, Literal):
        return Literal(x.value, x.element_type, shape)
    return View(x.buffer, x.element_type, shape, tuple(x.strides[a] for a in order), x.offset)


def reshape(x: Operand, shape: DimShape) -> Operand | None:
    """``x`` re-viewed row-major as ``shape``, or None when strides cannot express it."""
    if isinstance(x, Literal):
        return Literal(x.value, x.element_type, shape)
    if (type(x.size) is int and x.size == 0) or x.is_dense:
        return View(x.buffer, x.element_type, shape, row_major_strides(shape), x.offset)
    if any(isinstance(d, DimExpr) for d in (*x.shape, *shape)):
        try:  # symbolic: split/merge only where the bounds decide every comparison
            strides = _nocopy_strides(
                [(d, s) for d, s in zip(x.shape, x.strides, strict=True) if d != 1], shape
            )
        except (InconclusiveDimensionError, IndexError):
            return None
    else:
        strides = _nocopy_strides(
            [(d, s) for d, s in zip(x.shape, x.strides, strict=True) if d != 1], shape
        )
    if strides is None:
        return None
    return View(x.buffer, x.element_type, shape, strides, x.offset)


def _nocopy_strides(old: list[tuple[Dim, Dim]], new: DimShape) -> tuple[Dim, ...] | None:
    """numpy's ``_attempt_nocopy_reshape``: split/merge groups of old axes that are
    contiguous relative to each other."""
    result: list[Dim] = [0] * len(new)
    oi = ni = 0
    while oi < len(old) and ni < len(new):
        oj, nj = oi + 1, ni + 1
        np_, op_ = new[ni], old[oi][0]
        while np_ != op_:
            if np_ < op_:
                np_ *= new[nj]
                nj += 1
            else:
                op_ *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        result[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            result[k - 1] = result[k] * new[k]
        oi, ni = oj, nj
    for k in range(ni, len(new)):  # trailing size-1 axes
        result[k] = 1
    return tuple(result)
