"""Element type conversion."""

from __future__ import annotations

from typing import Any

from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.tensor_type import TensorType

__all__ = [
    "Bitcast",
    "Convert",
    "bitcast",
    "convert",
]


@opclass
class Convert(Op):
    """Convert to ``element_type``, same shape.

    Float to integer truncates toward zero and saturates at the type's range; NaN becomes 0.
    To boolean: ``x != 0``. From boolean: 0 or 1.
    """

    element_type: ElementType
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "element_type", as_element_type(self.element_type))

    def infer(self, x: TensorType) -> TensorType:
        return TensorType(self.element_type, x.shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x = inputs[0]
        return (convert(ct, x.element_type) if x.element_type.is_real else None,)


def convert(x: Output, element_type: Any) -> Output:
    """``x`` converted to ``element_type`` (see :class:`Convert` for the rounding rules)."""
    return Convert(element_type)(x)


@opclass
class Bitcast(Op):
    """Reinterpret the bytes of each element as ``element_type``, which must have the same
    width (f32 ↔ i32/u32, f64 ↔ i64/u64, f16/bf16 ↔ i16/u16, i8 ↔ u8…); same shape. Booleans
    are not bit patterns (a boolean's only values are 0 and 1), so they are refused."""

    element_type: ElementType
    num_inputs = 1
    differentiable = False

    def __post_init__(self) -> None:
        set_attr(self, "element_type", as_element_type(self.element_type))

    def infer(self, x: TensorType) -> TensorType:
        source, target = x.element_type, self.element_type
        require(
            not source.is_boolean and not target.is_boolean,
            f"cannot bitcast {source.name} to {target.name}: booleans have no bit pattern",
        )
        require(
            source.bitwidth == target.bitwidth,
            f"cannot bitcast {source.name} ({source.bitwidth} bits) to {target.name} "
            f"({target.bitwidth} bits): the widths differ",
        )
        return TensorType(target, x.shape)


def bitcast(x: Output, element_type: Any) -> Output:
    """``x``'s bytes reinterpreted as ``element_type`` of the same width."""
    return Bitcast(element_type)(x)
