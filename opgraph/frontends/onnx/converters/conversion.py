"""Cast, CastLike, BitCast, Identity, Constant, Dropout (inference)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
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
    for name in ("value", "sparse_value"):
        if ctx.has_attr(name):
            attribute = next(a for a in ctx.node.attribute if a.name == name)
            tensor = attribute.sparse_tensor.values if name == "sparse_value" else attribute.t
            element_type = from_onnx(tensor.data_type, ctx.where)
            array = ctx.tensor_attr(name)
            assert array is not None
            return constant(array, element_type)
    for name, dtype in _CONSTANT_ATTRS.items():
        if ctx.has_attr(name):
            return constant(np.asarray(ctx.attr(name), dtype=dtype))
    raise ctx.fail("only value, sparse_value, value_float(s) and value_int(s) are supported")


@onnx_op("Dropout", since=1)
def _dropout(ctx: NodeContext) -> Any:
    """Inference semantics: identity, and an all-true mask when asked for."""
    x = ctx.input(0)
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        return [x, constant(np.ones(x.shape, dtype=bool))]
    return [x]


@onnx_op("Dropout", since=12)
def _dropout_v12(ctx: NodeContext) -> Any:
    """Training mode (input 2) drops at random: refused unless the ratio is 0."""
    training = ctx.const_or_none(2, "training_mode")
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        ratio = ctx.const_or_none(1, "ratio")
        if ratio is None or float(np.asarray(ratio).reshape(-1)[0]) != 0.0:
            raise ctx.fail("training-mode Dropout is random; only inference is supported")
    return _dropout(ctx)


@onnx_op("BitCast", since=26)
def _bit_cast(ctx: NodeContext) -> Output:
    """Reinterpret bits between types of one width (bool → u8 reads 0/1 bytes)."""
    x = ctx.input(0)
    target = from_onnx(int(ctx.attr("to")), ctx.where)
    if x.element_type is target:
        return x
    if x.element_type is et.boolean and target is et.u8:
        return ops.convert(x, target)
    return ops.bitcast(x, target)
