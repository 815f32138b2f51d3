"""Scalar semantics of the trigonometric and hyperbolic ops: libm calls (vectorized through
libmvec), computed in f32 for the 16-bit floats as the reference does."""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.fused.lowering.registry import SCALAR_OPS, ScalarContext, ScalarRenderer
from opgraph.ops import trigonometric as tg


def _math(name: str) -> ScalarRenderer:
    def render(op: object, args: Sequence[str], ctx: ScalarContext) -> str:
        return ctx.math(name, *args)

    return render


for _cls, _name in (
    (tg.Sin, "sin"),
    (tg.Cos, "cos"),
    (tg.Tan, "tan"),
    (tg.Asin, "asin"),
    (tg.Acos, "acos"),
    (tg.Atan, "atan"),
    (tg.Sinh, "sinh"),
    (tg.Cosh, "cosh"),
    (tg.Asinh, "asinh"),
    (tg.Acosh, "acosh"),
    (tg.Atanh, "atanh"),
    (tg.Atan2, "atan2"),
):
    SCALAR_OPS.add(_cls, _math(_name))
