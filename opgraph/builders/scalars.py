"""Python scalars as typed constants, explicitly broadcast."""

from __future__ import annotations

from typing import Any

from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output


def scalar_like(value: Any, like: Any) -> Output:
    """``value`` as a Constant of ``like``'s element type, broadcast to ``like``'s shape.

    Raises:
        OpTypeError: ``like`` is not a value, or ``value`` does not fit its element type
            (e.g. ``0.5`` for an integer tensor).
    """
    from opgraph.ops.movement import broadcast

    if not isinstance(like, Output):
        raise OpTypeError(
            f"cannot combine {type(value).__name__} {value!r:.40} with {type(like).__name__}: "
            "one operand must be an opgraph value"
        )
    scalar = constant(value, like.element_type)
    if scalar.shape != ():
        raise OpTypeError(
            f"operator sugar takes Python scalars, got a value of shape {scalar.shape}"
        )
    return broadcast(scalar, like.shape, tuple(range(like.rank))) if like.rank else scalar
