"""CumSum as a scan step (:class:`~opgraph.backends.fused.program.ScanStep`): the data seen as
(outer, n, inner) around the summed axis, read through its strides (copied first when strides
cannot express that view), the sums written densely."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from opgraph.backends.fused import views
from opgraph.backends.fused.lowering.registry import STEP_OPS
from opgraph.backends.fused.program import ScanStep
from opgraph.backends.fused.views import View
from opgraph.core.node import Node
from opgraph.ops.ordering import CumSum

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder


@STEP_OPS.register(CumSum)
def _cumsum(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, CumSum)
    value = node.outputs[0]
    shape = value.shape
    target = builder.home(value)
    if value.tensor_type.size == 0:
        return
    three = (math.prod(shape[: op.axis]), shape[op.axis], math.prod(shape[op.axis + 1 :]))
    source = builder.operand(node.inputs[0])
    x = views.reshape(source, three) if isinstance(source, View) else None
    if x is None:
        x = views.reshape(builder.materialize(source), three)
    out = views.reshape(target, three)
    assert isinstance(x, View) and isinstance(out, View)
    label = builder.describe(node)
    builder.add_step(ScanStep(label, (node,), x, out, op.exclusive, op.reverse))
