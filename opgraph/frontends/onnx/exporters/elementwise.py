"""Elementwise ops: one ONNX op each where the meanings agree; floor division, the rounding
and finiteness predicates, NotEqual and Atan2 as short compositions."""

from __future__ import annotations

import math

from opgraph import ops
from opgraph.core.node import Node
from opgraph.core.op import Op
from opgraph.frontends.onnx.exporters.base import ExportContext, Exporter, exports, unsupported

_DIRECT = {
    ops.Abs: "Abs",
    ops.Neg: "Neg",
    ops.Exp: "Exp",
    ops.Log: "Log",
    ops.Sqrt: "Sqrt",
    ops.Tanh: "Tanh",
    ops.Sigmoid: "Sigmoid",
    ops.Relu: "Relu",
    ops.Erf: "Erf",
    ops.Ceil: "Ceil",
    ops.Floor: "Floor",
    ops.Sign: "Sign",
    ops.Reciprocal: "Reciprocal",
    ops.IsNaN: "IsNaN",
    ops.IsInf: "IsInf",
    ops.Not: "Not",
    ops.Add: "Add",
    ops.Sub: "Sub",
    ops.Mul: "Mul",
    ops.Pow: "Pow",
    ops.Max: "Max",
    ops.Min: "Min",
    ops.Equal: "Equal",
    ops.Less: "Less",
    ops.LessOrEqual: "LessOrEqual",
    ops.Greater: "Greater",
    ops.GreaterOrEqual: "GreaterOrEqual",
    ops.And: "And",
    ops.Or: "Or",
    ops.Xor: "Xor",
    ops.Select: "Where",
    ops.Sin: "Sin",
    ops.Cos: "Cos",
    ops.Tan: "Tan",
    ops.Asin: "Asin",
    ops.Acos: "Acos",
    ops.Atan: "Atan",
    ops.Sinh: "Sinh",
    ops.Cosh: "Cosh",
    ops.Asinh: "Asinh",
    ops.Acosh: "Acosh",
    ops.Atanh: "Atanh",
}

_BITWISE = {
    ops.BitwiseAnd: "BitwiseAnd",
    ops.BitwiseOr: "BitwiseOr",
    ops.BitwiseXor: "BitwiseXor",
    ops.BitwiseNot: "BitwiseNot",
}


def _direct(op_type: str) -> Exporter:
    def export(ctx: ExportContext, op: Op, node: Node, inputs: list[str]) -> list[str]:
        return [ctx.one(op_type, inputs)]

    return export


for _cls, _name in _DIRECT.items():
    exports(_cls)(_direct(_name))
for _cls, _name in _BITWISE.items():
    exports(_cls, since=18)(_direct(_name))


@exports(ops.Div)
def _div(ctx: ExportContext, op: ops.Div, node: Node, inputs: list[str]) -> list[str]:
    """ONNX Div truncates integers; floor division is ``(a - mod(a, b)) / b``."""
    a, b = inputs
    if not (op.floor_division and node.inputs[0].element_type.is_integral):
        return [ctx.one("Div", inputs)]
    remainder = ctx.one("Mod", [a, b], fmod=0)
    return [ctx.one("Div", [ctx.one("Sub", [a, remainder]), b])]


@exports(ops.Mod)
def _mod(ctx: ExportContext, op: ops.Mod, node: Node, inputs: list[str]) -> list[str]:
    fmod = 1 if op.fmod or node.inputs[0].element_type.is_real else 0
    if node.inputs[0].element_type.is_real and not op.fmod:
        # Floor modulo of floats: fmod, then move a remainder of the wrong sign by b.
        a, b = inputs
        rest = ctx.one("Mod", [a, b], fmod=1)
        zero = ctx.scalar_like(0, node)
        wrong = ctx.one(
            "And",
            [
                ctx.one("Not", [ctx.one("Equal", [rest, zero])]),
                ctx.one("Xor", [ctx.one("Less", [rest, zero]), ctx.one("Less", [b, zero])]),
            ],
        )
        return [ctx.one("Where", [wrong, ctx.one("Add", [rest, b]), rest])]
    return [ctx.one("Mod", inputs, fmod=fmod)]


@exports(ops.Round)
def _round(ctx: ExportContext, op: ops.Round, node: Node, inputs: list[str]) -> list[str]:
    if op.mode is ops.RoundMode.HALF_TO_EVEN:
        return [ctx.one("Round", inputs)]
    (x,) = inputs  # half away from zero: sign(x) · floor(|x| + 0.5)
    shifted = ctx.one("Add", [ctx.one("Abs", [x]), ctx.scalar_like(0.5, node)])
    return [ctx.one("Mul", [ctx.one("Sign", [x]), ctx.one("Floor", [shifted])])]


@exports(ops.IsFinite)
def _is_finite(ctx: ExportContext, op: ops.IsFinite, node: Node, inputs: list[str]) -> list[str]:
    special = ctx.one("Or", [ctx.one("IsInf", inputs), ctx.one("IsNaN", inputs)])
    return [ctx.one("Not", [special])]


@exports(ops.NotEqual)
def _not_equal(ctx: ExportContext, op: ops.NotEqual, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Not", [ctx.one("Equal", inputs)])]


@exports(ops.BitShift, since=11)
def _bit_shift(ctx: ExportContext, op: ops.BitShift, node: Node, inputs: list[str]) -> list[str]:
    element_type = node.inputs[0].element_type
    if not element_type.is_integral or element_type.is_signed:
        raise unsupported(node, "ONNX BitShift takes unsigned integers only")
    direction = "LEFT" if op.direction is ops.ShiftDirection.LEFT else "RIGHT"
    return [ctx.one("BitShift", inputs, direction=direction)]


@exports(ops.Atan2)
def _atan2(ctx: ExportContext, op: ops.Atan2, node: Node, inputs: list[str]) -> list[str]:
    """``atan(y / x)`` moved to the right quadrant; x = 0 gives ±π/2 (or 0 at the origin)."""
    y, x = inputs

    def scalar(v: float) -> str:
        return ctx.scalar_like(v, node)

    base = ctx.one("Atan", [ctx.one("Div", [y, x])])
    y_negative = ctx.one("Less", [y, scalar(0)])
    turn = ctx.one("Where", [y_negative, scalar(-math.pi), scalar(math.pi)])
    left = ctx.one("Less", [x, scalar(0)])
    value = ctx.one("Where", [left, ctx.one("Add", [base, turn]), base])
    on_axis = ctx.one("Equal", [x, scalar(0)])
    vertical = ctx.one("Mul", [ctx.one("Sign", [y]), scalar(math.pi / 2)])
    return [ctx.one("Where", [on_axis, vertical, value])]
