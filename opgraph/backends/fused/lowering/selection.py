"""Index searches and selections as whole steps (``STEP_OPS``): ArgMax/ArgMin become an
:class:`~opgraph.backends.fused.indexed.ArgStep`, TopK a
:class:`~opgraph.backends.fused.indexed.TopKStep`, ScatterElements/ScatterND a
:class:`~opgraph.backends.fused.indexed.ScatterStep` (a copy of the data, then the indexed
stores).

The searched axis is seen as the middle of (outer, n, inner), read through the input's
strides (copied first when strides cannot express that view); results are written densely.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from opgraph.backends.fused import views
from opgraph.backends.fused.indexed import ArgStep, ScatterStep, TopKStep
from opgraph.backends.fused.lowering.registry import STEP_OPS
from opgraph.backends.fused.views import View
from opgraph.core.node import Node, Output
from opgraph.ops.indexing import ScatterElements, ScatterND
from opgraph.ops.ordering import ArgMax, ArgMin, IndexReduction, TopK

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder


def three(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """``shape`` as (outer, n, inner) around ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def strided(builder: ProgramBuilder, value: Output, shape: tuple[int, ...]) -> View:
    """``value`` re-viewed as ``shape`` (same size), copied densely first when its strides
    cannot express that (or when it is a uniform literal)."""
    source = builder.operand(value)
    seen = views.reshape(source, shape) if isinstance(source, View) else None
    if seen is None:
        seen = views.reshape(builder.materialize(source), shape)
    assert isinstance(seen, View)
    return seen


def _arg(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, IndexReduction)
    (x,) = node.inputs
    target = builder.home(node.outputs[0])
    if target.size == 0:
        return
    outer, n, inner = three(views.static_all(x.shape), op.axis)  # static Programs only
    out = views.reshape(target, (outer, inner))
    assert isinstance(out, View)
    step = ArgStep(
        builder.describe(node),
        (node,),
        node,
        (builder.operand(x),),
        (target,),
        strided(builder, x, (outer, n, inner)),
        out,
        isinstance(op, ArgMax),
        op.select_last_index,
    )
    builder.add_step(step)


STEP_OPS.add(ArgMax, _arg)
STEP_OPS.add(ArgMin, _arg)


@STEP_OPS.register(TopK)
def _top_k(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, TopK)
    (x,) = node.inputs
    values, indices = (builder.home(o) for o in node.outputs)
    if values.size == 0:
        return
    outer, n, inner = three(views.static_all(x.shape), op.axis)  # static Programs only
    shape = (outer, op.k, inner)
    dense = [views.reshape(v, shape) for v in (values, indices)]
    assert isinstance(dense[0], View) and isinstance(dense[1], View)
    step = TopKStep(
        builder.describe(node),
        (node,),
        node,
        (builder.operand(x),),
        (values, indices),
        strided(builder, x, (outer, n, inner)),
        dense[0],
        dense[1],
        op.k,
        op.largest,
        op.sorted,
    )
    builder.add_step(step)


def _scatter(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, ScatterElements | ScatterND)
    operands = tuple(builder.operand(v) for v in node.inputs)
    target = builder.home(node.outputs[0])
    if target.size == 0:
        return
    index = operands[1]
    if not isinstance(index, View):
        index = builder.materialize(index)
    step = ScatterStep(
        builder.describe(node),
        (node,),
        node,
        operands,
        (target,),
        operands[0],
        index,
        operands[2],
        target,
        op.axis if isinstance(op, ScatterElements) else -1,
        op.reduction,
    )
    builder.add_step(step)


STEP_OPS.add(ScatterElements, _scatter)
STEP_OPS.add(ScatterND, _scatter)
