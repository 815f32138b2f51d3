"""Matrix products: mm, bmm, addmm, baddbmm, matmul, linear, dot, mv, addmv."""

from __future__ import annotations

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.torch.context import NodeContext
from opgraph.frontends.torch.converters.common import broadcast_like, overloads, scale
from opgraph.frontends.torch.registry import aten_op


def _affine(product: Output, bias: Output | None, beta: float, alpha: float) -> Output:
    """``beta · bias + alpha · product`` (a zero ``beta`` ignores ``bias``, NaNs included,
    as ATen does)."""
    result = scale(product, alpha)
    if bias is None or beta == 0:
        return result
    return ops.add(result, scale(broadcast_like(bias, result.shape), beta))


@aten_op(*overloads("mm.default"))
def _mm(ctx: NodeContext) -> Output:
    return ops.dot(ctx.tensor("self"), ctx.tensor("mat2"))


@aten_op(*overloads("bmm.default", "matmul.default"))
def _matmul(ctx: NodeContext) -> Output:
    other = ctx.tensor("mat2") if "mat2" in ctx.args else ctx.tensor("other")
    return ops.matmul(ctx.tensor("self"), other)


@aten_op(*overloads("addmm.default"))
def _addmm(ctx: NodeContext) -> Output:
    """``beta · self + alpha · (mat1 @ mat2)``: one Gemm, so backends can fuse the bias."""
    bias, a, b = ctx.tensor("self"), ctx.tensor("mat1"), ctx.tensor("mat2")
    alpha, beta = float(ctx["alpha"]), float(ctx["beta"])
    if beta == 0:
        return _affine(ops.dot(a, b), None, beta, alpha)
    return ops.gemm(a, b, bias, alpha=alpha, beta=beta)


@aten_op(*overloads("baddbmm.default"))
def _baddbmm(ctx: NodeContext) -> Output:
    product = ops.matmul(ctx.tensor("batch1"), ctx.tensor("batch2"))
    return _affine(product, ctx.tensor("self"), float(ctx["beta"]), float(ctx["alpha"]))


@aten_op(*overloads("linear.default"))
def _linear(ctx: NodeContext) -> Output:
    x, weight, bias = ctx.tensor("input"), ctx.tensor("weight"), ctx.optional_tensor("bias")
    product = ops.matmul(x, ops.transpose(weight) if weight.rank == 2 else weight)
    return _affine(product, bias, 1.0, 1.0)


@aten_op(*overloads("dot.default"))
def _dot(ctx: NodeContext) -> Output:
    return ops.dot(ctx.tensor("self"), ctx.tensor("tensor"))


@aten_op(*overloads("mv.default"))
def _mv(ctx: NodeContext) -> Output:
    return ops.dot(ctx.tensor("self"), ctx.tensor("vec"))


@aten_op(*overloads("addmv.default"))
def _addmv(ctx: NodeContext) -> Output:
    product = ops.dot(ctx.tensor("mat"), ctx.tensor("vec"))
    return _affine(product, ctx.tensor("self"), float(ctx["beta"]), float(ctx["alpha"]))
