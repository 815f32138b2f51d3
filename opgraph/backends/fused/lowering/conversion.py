"""Scalar semantics of Convert: float to integer truncates, saturates and maps NaN to 0;
integer to integer saturates; to boolean is ``x != 0``; 16-bit floats round to nearest even.
Bitcast is a view: the same bytes read as another type of the same width."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from opgraph.backends.fused.lowering.registry import SCALAR_OPS, VIEW_OPS, ScalarContext
from opgraph.backends.fused.views import Literal, Operand, View
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.ops.conversion import Bitcast, Convert


@SCALAR_OPS.register(Convert)
def _convert(op: Convert, args: Sequence[str], ctx: ScalarContext) -> str:
    (x,) = args
    source, target = ctx.inputs[0], ctx.output
    if target.is_boolean:
        return f"({x} != 0)"
    if source.is_boolean or source is target:
        return f"(({ctx.ctype(target)}){x})"
    if target.is_integral and source.is_real and target.itemsize <= 2 and source.itemsize <= 4:
        ctx.helper(f"f2if_{target.name}")  # a float helper: the loop vectorizes
        return f"og_f2if_{target.name}((float){x})"
    if target.is_integral and source.is_real:
        ctx.helper(f"f2i_{target.name}")
        return f"og_f2i_{target.name}((double){x})"
    if target.is_integral:
        return _saturate(x, source, target, ctx)
    if target is et.f16 and source is et.f64:  # one rounding, straight from double
        return ctx.narrow(target, x)
    return f"(({ctx.ctype(target)}){x})"


def _saturate(x: str, source: ElementType, target: ElementType, ctx: ScalarContext) -> str:
    """Clamp ``x`` to ``target``'s range; only the comparisons the ranges need."""
    src, dst = np.iinfo(source.dtype), np.iinfo(target.dtype)
    c = ctx.ctype(target)
    expr = f"(({c}){x})"
    if src.max > dst.max:
        expr = f"({x} > {ctx.literal(int(dst.max), source)} ? ({c}){dst.max}ULL : {expr})"
    if src.min < dst.min:
        low = ctx.literal(int(dst.min), target)
        expr = f"({x} < {ctx.literal(int(dst.min), source)} ? {low} : {expr})"
    return expr


@VIEW_OPS.register(Bitcast)
def _bitcast(op: Bitcast, x: Operand, copy: Callable[[Operand], Operand]) -> Operand:
    """The same bytes read as another type of the same width: a view (a literal is
    materialized first, since its value would change)."""
    source = copy(x) if isinstance(x, Literal) else x
    assert isinstance(source, View)
    return View(source.buffer, op.element_type, source.shape, source.strides, source.offset)
