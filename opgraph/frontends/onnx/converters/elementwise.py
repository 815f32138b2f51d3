"""Elementwise ONNX ops: unary math, broadcasting binary ops, comparisons, logic, Where."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import broadcast_all
from opgraph.frontends.onnx.registry import onnx_op

_UNARY: dict[str, tuple[str, int]] = {
    # ONNX name: (opgraph builder, since)
    "Abs": ("abs", 6),
    "Neg": ("negative", 6),
    "Exp": ("exp", 6),
    "Log": ("log", 6),
    "Sqrt": ("sqrt", 6),
    "Tanh": ("tanh", 6),
    "Sigmoid": ("sigmoid", 6),
    "Relu": ("relu", 6),
    "Not": ("logical_not", 1),
}

_BINARY: dict[str, tuple[Callable[[Output, Output], Output], int]] = {
    "Add": (ops.add, 7),
    "Sub": (ops.subtract, 7),
    "Mul": (ops.multiply, 7),
    "Div": (functools.partial(ops.divide, floor_division=False), 7),  # ONNX: C truncation
    "Equal": (ops.equal, 7),
    "Less": (ops.less, 7),
    "LessOrEqual": (ops.less_equal, 12),
    "Greater": (ops.greater, 7),
    "GreaterOrEqual": (ops.greater_equal, 12),
    "And": (ops.logical_and, 7),
    "Or": (ops.logical_or, 7),
}


def _unary(builder: str) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        result: Output = getattr(ops, builder)(ctx.input(0))
        return result

    return convert


def _binary(builder: Callable[[Output, Output], Output]) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        return builder(*broadcast_all(ctx.input(0), ctx.input(1)))

    return convert


for _name, (_builder, _since) in _UNARY.items():
    onnx_op(_name, since=_since)(_unary(_builder))
for _name, (_fn, _since) in _BINARY.items():
    onnx_op(_name, since=_since)(_binary(_fn))


def _variadic(builder: Callable[[Output, Output], Output]) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        values = broadcast_all(*[v for v in ctx.inputs if v is not None])
        return functools.reduce(builder, values)

    return convert


onnx_op("Max", since=8)(_variadic(ops.maximum))
onnx_op("Min", since=8)(_variadic(ops.minimum))
onnx_op("Sum", since=8)(_variadic(ops.add))


@onnx_op("Mean", since=8)
def _mean(ctx: NodeContext) -> Output:
    values = broadcast_all(*[v for v in ctx.inputs if v is not None])
    total = functools.reduce(ops.add, values)
    return total / len(values)


@onnx_op("Pow", since=7)
def _pow(ctx: NodeContext) -> Output:
    base, exponent = ctx.input(0), ctx.input(1)
    if exponent.element_type is not base.element_type:  # ONNX allows mixed types here
        exponent = ops.convert(exponent, base.element_type)
    return ops.power(*broadcast_all(base, exponent))


@onnx_op("Where", since=9)
def _where(ctx: NodeContext) -> Output:
    return ops.select(*broadcast_all(ctx.input(0), ctx.input(1), ctx.input(2)))


@onnx_op("Reciprocal", since=6)
def _reciprocal(ctx: NodeContext) -> Any:
    x = ctx.input(0)
    return 1 / x
