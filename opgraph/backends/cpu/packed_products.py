"""Sibling products by constant weights as one product (``pack_sibling_products``).

Attention's query, key and value projections multiply one activation by three constant
matrices (``x @ Wq + bq``, ``x @ Wk + bk``, ``x @ Wv + bv``). Packed, they are one product
by ``[Wq | Wk | Wv]`` (and one bias add by ``[bq | bk | bv]``) whose output the three
consumers read as column slices, which the fused compiler keeps as views: one panel-GEMM
step instead of three, so one fork and join of the thread pool instead of three, one pass
over ``x`` and a column split over 2304 columns instead of three over 768. Each column of
the packed product is computed by the same kernel over the same inner dimension as before,
so the values are bitwise those of the separate products.

A group is every ``MatMul(x, W)`` with the same ``x`` (static f32, rank >= 2) and a constant
f32 ``W`` of rank 2 and the same inner size, two or more of them. When each member's only
use is ``Add`` of a constant vector broadcast along the rows, the adds are packed too. Each
member's value (after its add) must be read only by movement views (``Reshape``,
``Transpose``, ``Slice``: attention's split into heads) and not be a result: an activation
of its own after a member would otherwise lose its place in the product's epilogue and cost
a pass of its own over the slice (measured: ``relu(x @ W_i + b_i)`` for three siblings became
one product and three ReLU steps).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.function import Function
from opgraph.core.graph import readers, rebuild_nodes
from opgraph.core.literals import Constant, constant
from opgraph.core.node import Node, Output
from opgraph.ops import elementwise as ew
from opgraph.ops.linalg import MatMul, matmul
from opgraph.ops.movement import Broadcast, Reshape, Slice, Transpose, broadcast
from opgraph.ops.movement import slice as slice_

#: Columns above which a group is not packed further (the packed weights stay one L3-sized
#: constant; QKV of BERT-large is 3072).
MAX_COLUMNS = 4096


@dataclass
class _Group:
    x: Output
    members: list[Node]  # the MatMul nodes, in graph order
    adds: list[Node] | None  # each member's bias Add, when all have one
    built: list[Output] | None = None  # the packed outputs, column slices per member


def _weight(node: Node) -> np.ndarray | None:
    w = node.inputs[1]
    op = w.node.op
    if not isinstance(op, Constant) or op.element_type is not et.f32 or w.rank != 2:
        return None
    return np.asarray(op.value, np.float32)


def _vector(x: Output, rows: tuple[int, ...], cols: int) -> np.ndarray | None:
    """The constant (cols,) vector ``x`` broadcasts along every axis but the last."""
    node = x.node
    if type(node.op) is not Broadcast:
        return None
    if node.op.broadcast_axes != tuple(range(len(rows))):  # type: ignore[attr-defined]
        return None
    op = node.inputs[0].node.op
    if not isinstance(op, Constant) or op.element_type is not et.f32:
        return None
    value = np.asarray(op.value, np.float32)
    return value if value.shape == (cols,) else None


def _bias_add(node: Node, uses: dict[Output, list[Node]], results: set[Output]) -> Node | None:
    out = node.outputs[0]
    if out in results or len(uses[out]) != 1:
        return None
    add = uses[out][0]
    if type(add.op) is not ew.Add or out not in add.inputs:
        return None
    other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
    rows = tuple(int(d) for d in out.shape[:-1])
    return add if _vector(other, rows, int(out.shape[-1])) is not None else None


#: What may read a packed member's value: views of the packed output (no work lost).
VIEWS = (Reshape, Transpose, Slice)


def _read_as_views(x: Output, uses: dict[Output, list[Node]], results: set[Output]) -> bool:
    return x not in results and bool(uses[x]) and all(type(u.op) in VIEWS for u in uses[x])


def _groups(fn: Function) -> dict[Node, _Group]:
    uses = defaultdict(list, readers(fn.nodes))
    results = set(fn.results)
    by_input: dict[Output, list[Node]] = defaultdict(list)
    for node in fn.nodes:
        if type(node.op) is not MatMul:
            continue
        x, w = node.inputs
        if x.element_type is not et.f32 or x.rank < 2 or _weight(node) is None:
            continue
        if any(type(d) is not int for d in x.shape) or x.shape[-1] != w.shape[0]:
            continue
        by_input[x].append(node)
    groups: dict[Node, _Group] = {}
    for x, members in by_input.items():
        members = members[: _fitting(members)]
        if len(members) < 2:
            continue
        adds = [_bias_add(m, uses, results) for m in members]
        group = _Group(x, members, None if None in adds else [a for a in adds if a])
        tails = group.adds if group.adds is not None else members
        if not all(_read_as_views(t.outputs[0], uses, results) for t in tails):
            continue
        for node in [*members, *(group.adds or [])]:
            groups[node] = group
    return groups


def _fitting(members: list[Node]) -> int:
    total = 0
    for i, m in enumerate(members):
        total += int(m.inputs[1].shape[1])
        if total > MAX_COLUMNS:
            return i
    return len(members)


def _build(group: _Group, x: Output) -> list[Output]:
    weights = [_weight(m) for m in group.members]
    packed = matmul(x, constant(np.concatenate(weights, axis=1)))  # type: ignore[arg-type]
    out = packed
    if group.adds is not None:
        rows = tuple(int(d) for d in packed.shape[:-1])
        vectors = []
        for m, add in zip(group.members, group.adds, strict=True):
            other = add.inputs[1] if add.inputs[0] == m.outputs[0] else add.inputs[0]
            vectors.append(_vector(other, rows, int(m.outputs[0].shape[-1])))
        bias = constant(np.concatenate(vectors))  # type: ignore[arg-type]
        out = ew.add(packed, broadcast(bias, packed.shape, tuple(range(len(rows)))))
    slices, start = [], 0
    lead = [0] * (x.rank - 1)
    for m in group.members:
        width = int(m.outputs[0].shape[-1])
        upper = [int(d) for d in packed.shape[:-1]] + [start + width]
        slices.append(slice_(out, [*lead, start], upper))
        start += width
    return slices


def pack_sibling_products(fn: Function) -> Function:
    """``fn`` with each group of sibling products by constant weights packed into one (see
    the module docstring). Needs: nothing. Guarantees: the same parameters, result types and
    values (bitwise, each column computed as before)."""
    groups = _groups(fn)
    if not groups:
        return fn

    def replace(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        group = groups.get(node)
        if group is None:
            return None
        if group.built is None:  # at its first member: the adds come after their products
            group.built = _build(group, inputs[0])
        if group.adds is None:
            return [group.built[group.members.index(node)]]
        if node in group.members:
            return None  # its bias add takes the slice; the product itself becomes dead
        return [group.built[group.adds.index(node)]]

    mapping = rebuild_nodes(fn.nodes, replace)
    return fn.with_outputs(mapping) if mapping else fn


__all__ = ["MAX_COLUMNS", "VIEWS", "pack_sibling_products"]
