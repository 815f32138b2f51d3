"""Element type conversion."""

from __future__ import annotations

from typing import Any

from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, set_attr
from opgraph.core.tensor_type import TensorType

__all__ = [
    "Convert",
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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct, x = cotangents[0], inputs[0]
        if ct is None or not x.element_type.is_real:
            return (None,)
        return (convert(ct, x.element_type),)


def convert(x: Output, element_type: Any) -> Output:
    """``x`` converted to ``element_type`` (see :class:`Convert` for the rounding rules)."""
    return Convert(element_type)(x)
