"""NonMaxSuppression as ``ops.non_max_suppression``: its output size is decided by the data
(a fresh symbol bound at run time). With constant boxes and scores the importer folds it to a
Constant."""

from __future__ import annotations

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.registry import onnx_op


@onnx_op("NonMaxSuppression", since=10)
def _non_max_suppression(ctx: NodeContext) -> Output:
    return ops.non_max_suppression(
        ctx.input(0),
        ctx.input(1),
        ctx.optional(2),
        ctx.optional(3),
        ctx.optional(4),
        center_point_box=int(ctx.attr("center_point_box", 0)),
    )
