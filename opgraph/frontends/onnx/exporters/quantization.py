"""QuantizeLinear and DequantizeLinear (per tensor, or per axis from opset 13)."""

from __future__ import annotations

from opgraph import ops
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, exports


def _linear(op_type: str) -> object:
    def export(ctx: ExportContext, node: Node, inputs: list[str]) -> list[str]:
        axis = node.op.axis
        return [ctx.one(op_type, inputs, axis=axis)]

    return export


exports(ops.QuantizeLinear, since=13)(_linear("QuantizeLinear"))  # type: ignore[arg-type]
exports(ops.DequantizeLinear, since=13)(_linear("DequantizeLinear"))  # type: ignore[arg-type]
