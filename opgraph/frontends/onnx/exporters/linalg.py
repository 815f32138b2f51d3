"""Dot (a MatMul of the operands flattened to matrices), MatMul and Gemm."""

from __future__ import annotations

from opgraph import ops
from opgraph.core.errors import ConversionError
from opgraph.core.node import Node
from opgraph.frontends.onnx.converters.common import prod
from opgraph.frontends.onnx.exporters.base import ExportContext, exports


@exports(ops.Dot)
def _dot(ctx: ExportContext, op: ops.Dot, node: Node, inputs: list[str]) -> list[str]:
    a, b = node.inputs
    count = op.reduction_axes_count
    assert count is not None  # nodes hold the canonical op, where it is filled in
    what = "the Reshape shapes of an exported Dot"
    a_shape, b_shape = a.static_shape(what, ConversionError), b.static_shape(what, ConversionError)
    outer_a, inner = a_shape[: a.rank - count], a_shape[a.rank - count :]
    outer_b = b_shape[count:]
    left = ctx.one("Reshape", [inputs[0], ctx.ints([prod(outer_a), prod(inner)], "shape")])
    right = ctx.one("Reshape", [inputs[1], ctx.ints([prod(inner), prod(outer_b)], "shape")])
    product = ctx.one("MatMul", [left, right])
    return [ctx.one("Reshape", [product, ctx.ints([*outer_a, *outer_b], "shape")])]


@exports(ops.MatMul)
def _matmul(ctx: ExportContext, op: ops.MatMul, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("MatMul", inputs)]


@exports(ops.Gemm)
def _gemm(ctx: ExportContext, op: ops.Gemm, node: Node, inputs: list[str]) -> list[str]:
    return [
        ctx.one(
            "Gemm",
            inputs,
            alpha=float(op.alpha),
            beta=float(op.beta),
            transA=int(op.trans_a),
            transB=int(op.trans_b),
        )
    ]
