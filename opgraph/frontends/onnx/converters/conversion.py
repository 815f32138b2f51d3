"""Cast, CastLike, Identity, Constant, Dropout (inference)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.registry import onnx_op
from opgraph.frontends.onnx.types import from_onnx


@onnx_op("Cast", since=6)
def _cast(ctx: NodeContext) -> Output:
    target = from_onnx(int(ctx.attr("to")), ctx.where)
    x = ctx.input(0)
    return x if x.element_type is target else ops.convert(x, target)


@onnx_op("CastLike", since=15)
def _cast_like(ctx: NodeContext) -> Output:
    x, like = ctx.input(0), ctx.input(1)
    return x if x.element_type is like.element_type else ops.convert(x, like.element_type)


@onnx_op("Identity", since=1)
def _identity(ctx: NodeContext) -> Output:
    return ctx.input(0)


_CONSTANT_ATTRS = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}


@onnx_op("Constant", since=1)
def _constant(ctx: NodeContext) -> Output:
    from onnx import numpy_helper

    if ctx.has_attr("value"):
        tensor = ctx.attr("value")
        return constant(numpy_helper.to_array(tensor), from_onnx(tensor.data_type, ctx.where))
    for name, dtype in _CONSTANT_ATTRS.items():
        if ctx.has_attr(name):
            return constant(np.asarray(ctx.attr(name), dtype=dtype))
    raise ctx.fail("only value, value_float(s) and value_int(s) constants are supported")


@onnx_op("Dropout", since=7)
def _dropout(ctx: NodeContext) -> Any:
    """Inference semantics: identity, and an all-true mask when asked for."""
    x = ctx.input(0)
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        mask = np.ones(x.shape, dtype=bool)
        return [x, constant(mask)]
    return [x]
