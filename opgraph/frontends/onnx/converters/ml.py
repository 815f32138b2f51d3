"""The ai.onnx.ml ops that are plain tensor functions: Binarizer and ArrayFeatureExtractor."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import full, prod
from opgraph.frontends.onnx.registry import onnx_op

DOMAIN = "ai.onnx.ml"


@onnx_op("Binarizer", since=1, domain=DOMAIN)
def _binarizer(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    above = ops.greater(x, full(float(ctx.attr("threshold", 0.0)), x))
    return ops.select(above, full(1, x), full(0, x))


@onnx_op("ArrayFeatureExtractor", since=1, domain=DOMAIN)
def _array_feature_extractor(ctx: NodeContext) -> Output:
    """The last axis of X at the (flattened) indices; a vector gives one row."""
    x, indices = ctx.input(0), ctx.input(1)
    flat = ops.reshape(indices, [prod(indices.shape)])
    if flat.element_type is not et.i64:
        flat = ops.convert(flat, et.i64)
    picked = ops.gather(x, flat, axis=x.rank - 1)
    return ops.reshape(picked, [1, flat.shape[0]]) if x.rank == 1 else picked
