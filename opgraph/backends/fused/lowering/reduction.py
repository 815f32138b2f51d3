"""Reductions: how each accumulates. Fused as phases of row kernels (``codegen/loops.py``).

Sums and products of 16-bit floats accumulate in f32 (the reference does); floating-point
sums are *pairwise* (blocks of vector-lane partial sums combined by a pairwise cascade, see
``codegen/loops.py``), so their error grows like log(n), as numpy's does, not like n; integer
accumulations wrap, which is order-independent; max/min carry a NaN flag so that NaN
propagates whatever order the vectorized loop uses. Products are not reordered: their
relative error bound is the same in every order.
"""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.fused.dialect import highest_value, lowest_value
from opgraph.backends.fused.lowering.registry import (
    REDUCTIONS,
    REWRITES,
    ReductionRule,
    reduction_axes,
)
from opgraph.core.node import Node, Output
from opgraph.ops import movement
from opgraph.ops import reduction as rd

REDUCTIONS.add(rd.ReduceSum, ReductionRule("{acc} += {x};", "+", lambda t: 0, pairwise=True))
REDUCTIONS.add(rd.ReduceProd, ReductionRule("{acc} *= {x};", "*", lambda t: 1))
REDUCTIONS.add(rd.ReduceAll, ReductionRule("{acc} &= {x};", "&", lambda t: True))
REDUCTIONS.add(rd.ReduceAny, ReductionRule("{acc} |= {x};", "|", lambda t: False))
REDUCTIONS.add(
    rd.ReduceMax,
    ReductionRule("{acc} = {x} > {acc} ? {x} : {acc};", "max", lowest_value, True),
)
REDUCTIONS.add(
    rd.ReduceMin,
    ReductionRule("{acc} = {x} < {acc} ? {x} : {acc};", "min", highest_value, True),
)


def _reduce_nothing(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    """A reduction over no axes is the identity: a reshape view (no kernel)."""
    if reduction_axes(node.op):
        return None
    (x,) = inputs
    return [movement.reshape(x, node.outputs[0].shape)]


for _cls in (rd.ReduceSum, rd.ReduceProd, rd.ReduceMax, rd.ReduceMin, rd.ReduceAll, rd.ReduceAny):
    REWRITES.add(_cls, _reduce_nothing)
