"""QuantizeLinear and DequantizeLinear (per tensor, or per axis from opset 13)."""

from __future__ import annotations

from opgraph import ops
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, Exporter, exports


def _linear(op_type: str) -> Exporter:
    def export(
        ctx: ExportContext, op: ops.QuantizationBase, node: Node, inputs: list[str]
    ) -> list[str]:
        return [ctx.one(op_type, inputs, axis=op.axis)]

    return export


exports(ops.QuantizeLinear, since=13)(_linear("QuantizeLinear"))
exports(ops.DequantizeLinear, since=13)(_linear("DequantizeLinear"))
