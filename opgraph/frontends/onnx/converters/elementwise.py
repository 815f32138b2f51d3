"""Elementwise ONNX ops: unary math, broadcasting binary ops, comparisons, logic, bitwise ops,
variadic Max/Min/Sum/Mean, Pow, Where, IsInf, BitShift.

Before opset 7 the binary ops broadcast only when asked (``broadcast=1``), aligning the second
operand at ``axis``; from opset 7 on they broadcast NumPy-style. Both become explicit core
broadcasts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import broadcast_all, full, register_all
from opgraph.frontends.onnx.registry import onnx_op

Unary = Callable[[Output], Output]
Binary = Callable[[Output, Output], Output]

_UNARY: dict[str, tuple[Unary, int]] = {
    "Abs": (ops.abs, 1),
    "Neg": (ops.negative, 1),
    "Exp": (ops.exp, 1),
    "Log": (ops.log, 1),
    "Sqrt": (ops.sqrt, 1),
    "Tanh": (ops.tanh, 1),
    "Sigmoid": (ops.sigmoid, 1),
    "Relu": (ops.relu, 1),
    "Not": (ops.logical_not, 1),
    "Ceil": (ops.ceiling, 1),
    "Floor": (ops.floor, 1),
    "Round": (ops.round, 11),
    "Sign": (ops.sign, 9),
    "Erf": (ops.erf, 9),
    "IsNaN": (ops.is_nan, 9),
    "Reciprocal": (ops.reciprocal, 1),
    "Sin": (ops.sin, 7),
    "Cos": (ops.cos, 7),
    "Tan": (ops.tan, 7),
    "Asin": (ops.asin, 7),
    "Acos": (ops.acos, 7),
    "Atan": (ops.atan, 7),
    "Sinh": (ops.sinh, 9),
    "Cosh": (ops.cosh, 9),
    "Asinh": (ops.asinh, 9),
    "Acosh": (ops.acosh, 9),
    "Atanh": (ops.atanh, 9),
    "BitwiseNot": (ops.bitwise_not, 18),
}

_BINARY: dict[str, tuple[Binary, int]] = {
    "Add": (ops.add, 1),
    "Sub": (ops.subtract, 1),
    "Mul": (ops.multiply, 1),
    "Div": (functools.partial(ops.divide, floor_division=False), 1),  # ONNX: C truncation
    "Equal": (ops.equal, 1),
    "Less": (ops.less, 1),
    "LessOrEqual": (ops.less_equal, 12),
    "Greater": (ops.greater, 1),
    "GreaterOrEqual": (ops.greater_equal, 12),
    "And": (ops.logical_and, 1),
    "Or": (ops.logical_or, 1),
    "Xor": (ops.logical_xor, 1),
    "BitwiseAnd": (ops.bitwise_and, 18),
    "BitwiseOr": (ops.bitwise_or, 18),
    "BitwiseXor": (ops.bitwise_xor, 18),
}


def _unary(builder: Unary) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        return builder(ctx.input(0))

    return convert


def binary_operands(ctx: NodeContext) -> tuple[Output, Output]:
    """The two operands broadcast to a common shape, by the rules of the model's opset."""
    a, b = ctx.input(0), ctx.input(1)
    if ctx.opset >= 7 or a.shape == b.shape:
        a, b = broadcast_all(a, b)
        return a, b
    if not ctx.attr("broadcast", 0):
        raise ctx.fail(f"shapes {list(a.shape)} and {list(b.shape)} differ and broadcast=0")
    if b.rank == 0:
        a, b = broadcast_all(a, b)
        return a, b
    axis = int(ctx.attr("axis", a.rank - b.rank))
    axis = axis + a.rank if axis < 0 else axis
    kept = [a_ for a_ in range(b.rank) if b.shape[a_] != 1]
    squeezed = ops.reshape(b, [b.shape[i] for i in kept]) if len(kept) != b.rank else b
    covered = {axis + i for i in kept}
    new_axes = tuple(i for i in range(a.rank) if i not in covered)
    return a, ops.broadcast(squeezed, a.shape, new_axes) if new_axes else squeezed


def _binary(builder: Binary) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        return builder(*binary_operands(ctx))

    return convert


register_all(_UNARY, _unary)
register_all(_BINARY, _binary)


def _present(ctx: NodeContext) -> list[Output]:
    return [v for v in ctx.inputs if v is not None]


def _variadic(builder: Binary) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        return functools.reduce(builder, broadcast_all(*_present(ctx)))

    return convert


onnx_op("Max", since=1)(_variadic(ops.maximum))
onnx_op("Min", since=1)(_variadic(ops.minimum))
onnx_op("Sum", since=1)(_variadic(ops.add))


@onnx_op("Mean", since=1)
def _mean(ctx: NodeContext) -> Output:
    values = broadcast_all(*_present(ctx))
    total = functools.reduce(ops.add, values)
    return ops.divide(total, full(len(values), total)) if len(values) > 1 else total


@onnx_op("Mod", since=10)
def _mod(ctx: NodeContext) -> Output:
    a, b = broadcast_all(ctx.input(0), ctx.input(1))
    return ops.mod(a, b, fmod=bool(ctx.attr("fmod", 0)))


@onnx_op("Pow", since=1)
def _pow(ctx: NodeContext) -> Output:
    base, exponent = binary_operands(ctx)
    if exponent.element_type is not base.element_type:  # ONNX allows mixed types from opset 12
        exponent = ops.convert(exponent, base.element_type)
    return ops.power(base, exponent)


@onnx_op("Where", since=9)
def _where(ctx: NodeContext) -> Output:
    return ops.select(*broadcast_all(ctx.input(0), ctx.input(1), ctx.input(2)))


@onnx_op("IsInf", since=10)
def _is_inf(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    negative, positive = ctx.attr("detect_negative", 1), ctx.attr("detect_positive", 1)
    infinite = ops.is_inf(x)
    if negative and positive:
        return infinite
    if not negative and not positive:
        return ops.logical_and(infinite, ops.logical_not(infinite))
    zero = full(0, x)
    side = ops.greater(x, zero) if positive else ops.less(x, zero)
    return ops.logical_and(infinite, side)


@onnx_op("BitShift", since=11)
def _bit_shift(ctx: NodeContext) -> Output:
    x, shift = broadcast_all(ctx.input(0), ctx.input(1))
    direction = str(ctx.attr("direction", "")).upper()
    shifts: dict[str, Binary] = {"LEFT": ops.shift_left, "RIGHT": ops.shift_right}
    if direction not in shifts:
        raise ctx.fail(f"direction must be LEFT or RIGHT, got {direction!r}")
    return shifts[direction](x, shift)
