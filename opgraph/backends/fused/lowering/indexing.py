"""Gathers as indexed loads (``GATHERS``): Gather, GatherElements and GatherND read their data
at positions computed from index values, inside a loop kernel over the output's shape.

Each rule re-views the data over the output's shape (stride 0 along the axes the indices
span) and the indices over the output's shape (one operand per indexed data axis: a
broadcast for Gather, the indices themselves for GatherElements, one coordinate slice each
for GatherND). The loop emitter wraps negative indices, checks them against the axis size
(an out-of-range index fails the run with an ``ExecutionError`` naming the node) and never
reads outside the data: a bad index reads element 0 of the axis while the failure is
recorded. Consumers of the gathered value fuse into the same kernel (an embedding lookup, its
position add and the layer norm after it are one loop).

OneHot is a rewrite (``REWRITES``) into a pointwise compare: the indices (negative ones
wrapped; unsigned ones compared as they are, in u64) broadcast along the new axis, equal to
the position along it, select the on or the off value. An index out of range matches no
position: its row is all off, as the reference gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from opgraph.backends.fused.lowering.registry import GATHERS, REWRITES, IndexedRead
from opgraph.backends.fused.program import IndexTerm
from opgraph.backends.fused.views import Literal, Operand, View
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.literals import constant
from opgraph.core.node import Node, Output
from opgraph.core.shape import DimShape
from opgraph.ops import elementwise as ew
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.conversion import convert
from opgraph.ops.indexing import Gather, GatherElements, GatherND, OneHot
from opgraph.ops.movement import broadcast


def _restrided(x: Operand, shape: DimShape, strides: tuple[Dim, ...], offset: Dim = 0) -> Operand:
    """``x``'s elements seen as ``shape`` through ``strides`` (a literal stays uniform)."""
    if isinstance(x, Literal):
        return Literal(x.value, x.element_type, shape)
    return View(x.buffer, x.element_type, shape, strides, x.offset + offset)


def _strides(x: Operand) -> tuple[Dim, ...]:
    return x.strides if isinstance(x, View) else (0,) * len(x.shape)


@GATHERS.register(Gather)
def _gather(op: Gather, x: Operand, indices: Operand, shape: DimShape) -> IndexedRead:
    """``out[B, M, J, T] = x[B, M, indices[B, J], T]``: ``B`` the batch axes, ``M`` the
    data's axes before ``axis``, ``J`` the indices' own axes, ``T`` the data's after."""
    axis, b = op.axis, op.batch_dims
    xs, js = _strides(x), _strides(indices)
    j = len(indices.shape) - b
    tail = len(x.shape) - axis - 1
    table = _restrided(x, shape, xs[:axis] + (0,) * j + xs[axis + 1 :])
    index = _restrided(indices, shape, js[:b] + (0,) * (axis - b) + js[b:] + (0,) * tail)
    term = IndexTerm(x.shape[axis], xs[axis], f"axis {axis}")
    return IndexedRead(table, (index,), (term,))


@GATHERS.register(GatherElements)
def _gather_elements(
    op: GatherElements, x: Operand, indices: Operand, shape: DimShape
) -> IndexedRead:
    """``out[i] = x[i with i[axis] replaced by indices[i]]``: the data's own strides, the
    indexed axis's set to 0 (the other axes of ``indices`` are no longer than the data's)."""
    xs = list(_strides(x))
    stride, xs[op.axis] = xs[op.axis], 0
    table = _restrided(x, shape, tuple(xs))
    term = IndexTerm(x.shape[op.axis], stride, f"axis {op.axis}")
    return IndexedRead(table, (indices,), (term,))


@GATHERS.register(GatherND)
def _gather_nd(op: GatherND, x: Operand, indices: Operand, shape: DimShape) -> IndexedRead:
    """``out[B, J, R] = x[B, indices[B, J, 0], …, indices[B, J, k-1], R]``: coordinate
    ``c`` is the slice ``indices[..., c]`` broadcast along ``R``."""
    b, k = op.batch_dims, indices.shape[-1]
    xs, js = _strides(x), _strides(indices)
    inner = len(indices.shape) - 1 - b
    rest = len(x.shape) - b - k
    table = _restrided(x, shape, xs[:b] + (0,) * inner + xs[b + k :])
    coordinate = js[:-1] + (0,) * rest
    slices = tuple(_restrided(indices, shape, coordinate, c * js[-1]) for c in range(k))
    terms = tuple(IndexTerm(x.shape[b + c], xs[b + c], f"axis {b + c}") for c in range(k))
    return IndexedRead(table, slices, terms)


@REWRITES.register(OneHot)
def _one_hot(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    op = node.op
    assert isinstance(op, OneHot)
    (indices,) = inputs
    shape = node.outputs[0].shape
    wide = et.i64 if indices.element_type.is_signed else et.u64
    index = convert(indices, wide) if indices.element_type is not wide else indices
    if wide is et.i64:
        below = ew.less(index, scalar_like(0, index))
        index = ew.select(below, ew.add(index, scalar_like(op.depth, index)), index)
    others = tuple(a for a in range(len(shape)) if a != op.axis)
    positions = constant(np.arange(op.depth, dtype=wide.dtype), wide)
    hot = ew.equal(broadcast(index, shape, (op.axis,)), broadcast(positions, shape, others))
    on, off = (
        broadcast(constant(v, op.element_type), shape, tuple(range(len(shape))))
        for v in (op.on_value, op.off_value)
    )
    return [ew.select(hot, on, off)]
