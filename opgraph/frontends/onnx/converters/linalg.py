"""MatMul and Gemm."""

from __future__ import annotations

from opgraph import ops
from opgraph.builders.broadcasting import broadcast_to
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.registry import onnx_op


@onnx_op("MatMul", since=1)
def _matmul(ctx: NodeContext) -> Output:
    a, b = ctx.input(0), ctx.input(1)
    matmul = getattr(ops, "matmul", None)
    if matmul is not None:
        result: Output = matmul(a, b)
        return result
    if a.rank <= 2 and b.rank <= 2:
        return ops.dot(a, b)
    raise ctx.fail("batched MatMul needs ops.matmul")


@onnx_op("Gemm", since=7)
def _gemm(ctx: NodeContext) -> Output:
    a, b, c = ctx.input(0), ctx.input(1), ctx.optional(2)
    if ctx.attr("transA", 0):
        a = ops.transpose(a, (1, 0))
    if ctx.attr("transB", 0):
        b = ops.transpose(b, (1, 0))
    y = ops.dot(a, b)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        term = broadcast_to(c, y.shape)
        y = y + (term * beta if beta != 1.0 else term)
    return y
