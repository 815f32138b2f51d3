"""Value types: a tensor type (element type + shape) or a tuple of value types."""

from __future__ import annotations

from dataclasses import dataclass

from opgraph.core.element_type import ElementType
from opgraph.core.shape import DimShape, format_shape, is_static, shape_size


@dataclass(frozen=True, slots=True)
class TensorType:
    """The type of a tensor value: element type and shape (ints, or symbolic dimensions)."""

    element_type: ElementType
    shape: DimShape

    @property
    def rank(self) -> int:
        return len(self.shape)

    # size and nbytes are annotated as ints for the static-only consumers (backends, bridges);
    # on a symbolic type they are expressions (see ShapeAttr in core/shape.py).
    @property
    def size(self) -> int:
        return shape_size(self.shape)  # type: ignore[return-value]

    @property
    def nbytes(self) -> int:
        return self.size * self.element_type.itemsize

    @property
    def is_static(self) -> bool:
        """True when every dimension is an int."""
        return is_static(self.shape)

    def __str__(self) -> str:
        return f"{self.element_type.name}{format_shape(self.shape)}"

    __repr__ = __str__


@dataclass(frozen=True, slots=True)
class TupleType:
    """The type of a tuple value (seed semantics; removed by ``unbox_tuples``)."""

    elements: tuple[ValueType, ...]

    def flatten(self) -> tuple[TensorType, ...]:
        return flatten_types((self,))

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elements) + ")"

    __repr__ = __str__


ValueType = TensorType | TupleType


def flatten_types(types: tuple[ValueType, ...]) -> tuple[TensorType, ...]:
    """Tensor types of ``types`` with tuples expanded in order (depth first)."""
    out: list[TensorType] = []
    for t in types:
        if isinstance(t, TupleType):
            out.extend(flatten_types(t.elements))
        else:
            out.append(t)
    return tuple(out)
