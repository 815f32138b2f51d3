"""Convert (Cast) and StopGradient (Identity)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core.element_type import ElementType
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, exports, onnx_type


@exports(ops.Convert)
def _convert(ctx: ExportContext, op: ops.Convert, node: Node, inputs: list[str]) -> list[str]:
    """Cast, made to saturate (and map NaN to 0) the way Convert does where ONNX's Cast is
    undefined or wraps: float to integer, and integer to a narrower integer."""
    source, target = node.inputs[0].element_type, op.element_type
    cast = onnx_type(target)
    if not target.is_integral or source.is_boolean:
        return [ctx.one("Cast", inputs, to=cast)]
    info = np.iinfo(target.dtype)
    if source.is_real:
        return [_float_to_int(ctx, node, inputs[0], info, target)]
    have = np.iinfo(source.dtype)
    if have.min >= info.min and have.max <= info.max:
        return [ctx.one("Cast", inputs, to=cast)]
    low = ctx.scalar_like(max(info.min, have.min), node)
    high = ctx.scalar_like(min(info.max, have.max), node)
    return [ctx.one("Cast", [ctx.one("Clip", [inputs[0], low, high])], to=cast)]


def _float_to_int(ctx: ExportContext, node: Node, x: str, info: Any, target: ElementType) -> str:
    """Truncate toward zero, saturate at the type's range, NaN → 0."""
    zero = ctx.scalar_like(0, node)
    finite = ctx.one("Where", [ctx.one("IsNaN", [x]), zero, x])
    low = ctx.one("LessOrEqual", [finite, ctx.scalar_like(float(info.min), node)])
    high = ctx.one("GreaterOrEqual", [finite, ctx.scalar_like(float(info.max), node)])
    inside = ctx.one("Where", [ctx.one("Or", [low, high]), zero, finite])
    value = ctx.one("Cast", [inside], to=onnx_type(target))
    dtype = target.dtype
    top = ctx.constant(np.asarray(info.max, dtype), "max")
    bottom = ctx.constant(np.asarray(info.min, dtype), "min")
    return ctx.one("Where", [high, top, ctx.one("Where", [low, bottom, value])])


@exports(ops.StopGradient)
def _stop_gradient(
    ctx: ExportContext, op: ops.StopGradient, node: Node, inputs: list[str]
) -> list[str]:
    return [ctx.one("Identity", inputs)]
