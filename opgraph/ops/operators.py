"""Operator sugar: ``a + b``, ``x * 0.5``, ``-x`` on Outputs build the elementwise ops.

``Output`` (in core) defines the operators and looks their builders up in
:data:`opgraph.core.node.OPERATORS`; importing this module (``opgraph.ops`` does) registers
them. The rules are the strict ones: equal element types and shapes, no promotion; a Python
scalar operand becomes a Constant of the other operand's element type, explicitly broadcast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.core.node import OPERATORS, Output
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.elementwise import add, divide, multiply, negative, subtract

__all__: list[str] = []


def _with_scalars(builder: Callable[[Output, Output], Output]) -> Callable[[Any, Any], Output]:
    """``builder`` taking one operand that may be a Python scalar (typed like the other)."""

    def apply(a: Any, b: Any) -> Output:
        if not isinstance(a, Output):
            a = scalar_like(a, b)
        if not isinstance(b, Output):
            b = scalar_like(b, a)
        return builder(a, b)

    apply.__name__ = builder.__name__
    return apply


for _builder in (add, subtract, multiply, divide):
    OPERATORS.add(_builder.__name__, _with_scalars(_builder))
OPERATORS.add("negative", negative)
