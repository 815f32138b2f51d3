"""Quantized elementwise chains: a ``quantize_linear`` whose input is an elementwise function
of one 8-bit value becomes a lookup in a 256-entry table (or that value itself).

A QDQ model (onnxruntime's quantizer) wraps every op in a QuantizeLinear/DequantizeLinear
pair, so BERT's GELU reads ``DQ(q)`` and computes ``Q(DQ(Q(DQ(Q(DQ(Q(erf(DQ(q) / c) …``:
five quantizations per element, each part of the model's semantics (its rounding and
saturation change the values). But every value in such a chain is a function of the one
8-bit tensor ``q`` it started from, element by element, and ``q`` takes at most 256 values.
So the chain's last quantization is ``table[q]``, with ``table`` the chain evaluated on all
256 byte values by the reference kernels: bit-identical to the INTERPRETER running the
original graph, whatever the rounding inside (the table *is* the chain, run exhaustively).

The chain (the *cone* of the root QuantizeLinear) may contain unary and binary elementwise
ops, Select, Convert, and per-tensor QuantizeLinear/DequantizeLinear; its other operands must
be uniform (a constant holding one value, a broadcast or reshape of one, or an elementwise
function of such values). Single-input element permutations (Reshape, Transpose) between the
root and the cone commute with it: ``Q(transpose(DQ(q)))`` is ``transpose(table[q])``. When
the table maps every byte to itself (``Q(DQ(q))`` with the same scale and zero point: checked
exhaustively, not assumed), the root is replaced by ``q`` itself, moved: no lookup at all.

The lookup is ``convert(gather(table, convert(q, i32)), t)`` with the table held as i32 (so
that the fused loop's gather vectorizes: there are no byte gathers); for i8 ``q`` the table is
ordered by the byte's bit pattern (entries 128..255 hold the values for -128..-1), which is
where Gather's negative-index wrapping lands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.errors import OpgraphError
from opgraph.core.function import Function
from opgraph.core.graph import readers
from opgraph.core.kernels import REFERENCE_KERNELS
from opgraph.core.literals import constant
from opgraph.core.node import Node, Output
from opgraph.core.shape import DimShape
from opgraph.ops.conversion import Convert, convert
from opgraph.ops.elementwise import BinaryElementwise, FloatUnary, Select, UnaryElementwise
from opgraph.ops.indexing import gather
from opgraph.ops.movement import Broadcast, Reshape, Transpose
from opgraph.ops.quantization import DequantizeLinear, QuantizeLinear
from opgraph.pattern.pattern import constant_value

__all__ = ["MAX_CONE", "fold_quantized_chains", "quantized_table"]

#: The most nodes one cone may hold (bounds the search on long elementwise chains).
MAX_CONE = 64
#: The 8-bit types a table is indexed by.
_BYTES = (et.u8, et.i8)
#: Ops computing element ``i`` of their output from element ``i`` of each input.
_POINTWISE = (UnaryElementwise, BinaryElementwise, Select, Convert)
#: What a reference kernel may raise on some byte value (the chain then stays as it is, to
#: fail at run time only if that value occurs, as on the INTERPRETER).
_FAILURES = (OpgraphError, ArithmeticError, ValueError, TypeError, IndexError)
#: Ops that only move elements (one data input): they commute with a pointwise chain.
_MOVES = (Reshape, Transpose)


@dataclass(frozen=True)
class _Plan:
    """How a root QuantizeLinear is replaced: ``moves`` (outermost first) applied to
    ``source``, then looked up in ``table`` (None: the identity)."""

    source: Output
    moves: tuple[Node, ...]
    table: np.ndarray | None
    cone: frozenset[Node]


class _Cones:
    """The cone search over one Function (memoized per value)."""

    def __init__(self) -> None:
        self.uniform: dict[Output, np.ndarray | None] = {}

    # ------------------------------------------------------------------ uniform values
    def scalar(self, value: Output) -> np.ndarray | None:
        """``value``'s one element as a 0-d array when every element is the same, else
        None."""
        if value not in self.uniform:
            self.uniform[value] = self._scalar(value)
        return self.uniform[value]

    def _scalar(self, value: Output) -> np.ndarray | None:
        if isinstance(value.op, Broadcast | Reshape):
            return self.scalar(value.node.inputs[0])
        array = constant_value(value)
        if array is not None:
            flat = np.asarray(array).reshape(-1)
            if flat.size == 0 or not np.all(flat == flat[0]):
                return None  # NaN never equals itself: not uniform
            return np.asarray(flat[0], dtype=value.element_type.dtype)
        if not _pointwise(value.node) or len(value.node.outputs) != 1:
            return None
        args = [self.scalar(x) for x in value.node.inputs]
        if any(a is None for a in args):
            return None
        try:
            return _evaluate(value.node, args, ())
        except _FAILURES:
            return None

    # ------------------------------------------------------------------------- cones
    def plan(self, root: Node) -> _Plan | None:
        """The replacement of QuantizeLinear ``root``, or None when its input is not a
        pointwise function of one 8-bit value (or is one already: nothing to fold)."""
        if not _pointwise(root) or root.outputs[0].element_type not in _BYTES:
            return None
        moves: list[Node] = []
        x = root.inputs[0]
        while isinstance(x.op, _MOVES) and len(x.node.inputs) == 1:
            moves.append(x.node)
            x = x.node.inputs[0]
        cone: dict[Node, None] = {root: None}
        sources = self.sources(x, x.shape, cone)
        if sources is None or len(sources) != 1 or len(cone) > MAX_CONE:
            return None
        (source,) = sources
        if source.element_type not in _BYTES:
            return None
        try:
            table = quantized_table(root, source, cone, self, x if moves else None)
        except _FAILURES:  # e.g. an integer division by a byte that is 0: left to run time
            return None
        if source.element_type is root.outputs[0].element_type and np.array_equal(
            table, _codes(source.element_type)
        ):
            return _Plan(source, tuple(moves), None, frozenset(cone))
        if not moves and not _worth_a_table(cone):
            return None
        return _Plan(source, tuple(moves), table, frozenset(cone))

    def sources(self, value: Output, shape: DimShape, cone: dict[Node, None]) -> set[Output] | None:
        """The non-uniform leaves ``value`` is a pointwise function of (adding the nodes
        computing it to ``cone``), or None. An 8-bit value whose own cone fails, or has
        more than one source, is a leaf itself."""
        if self.scalar(value) is not None:
            return set()
        if value.shape != shape:
            return None
        node = value.node
        if _pointwise(node) and len(node.outputs) == 1 and len(cone) < MAX_CONE:
            inner: dict[Node, None] = dict(cone)
            inner[node] = None
            found: set[Output] | None = set()
            for x in node.inputs:
                more = None if found is None else self.sources(x, shape, inner)
                found = None if more is None or found is None else found | more
            if found is not None and len(found) <= 1:
                cone.update(inner)
                return found
        return {value} if value.element_type in _BYTES else None


def _worth_a_table(cone: dict[Node, None]) -> bool:
    """Whether a lookup (a pass of its own: a gather reads its indices from memory) saves
    work over the chain fused into its producer: the chain quantizes more than once or
    computes a transcendental function."""
    quantizes = sum(isinstance(n.op, QuantizeLinear) for n in cone)
    return quantizes > 1 or any(isinstance(n.op, FloatUnary) for n in cone)


def _pointwise(node: Node) -> bool:
    op = node.op
    if isinstance(op, QuantizeLinear | DequantizeLinear):
        return op.axis is None  # per tensor: the same map at every position
    return isinstance(op, _POINTWISE)


def _codes(element_type: et.ElementType) -> np.ndarray:
    """Every byte value, ordered by bit pattern (i8: 0..127, then -128..-1)."""
    return np.arange(256, dtype=np.uint8).view(element_type.dtype)


def _evaluate(node: Node, args: Sequence[np.ndarray | None], shape: tuple[int, ...]) -> np.ndarray:
    """``node``'s reference kernel on ``args`` (broadcast to ``shape``)."""
    kernel = REFERENCE_KERNELS[type(node.op)]
    arrays = [a if a is None or a.ndim else np.broadcast_to(a, shape) for a in args]
    if isinstance(node.op, QuantizeLinear | DequantizeLinear):
        arrays = [arrays[0], *args[1:]]  # per tensor: the parameters stay scalars
    with np.errstate(all="ignore"):
        result = kernel(node.op, *arrays)
    return np.asarray(result, dtype=node.outputs[0].element_type.dtype)


def quantized_table(
    root: Node,
    source: Output,
    cone: dict[Node, None],
    cones: _Cones | None = None,
    moved: Output | None = None,
) -> np.ndarray:
    """The value of ``root`` (a node of ``cone``) for every byte value of ``source``,
    computed by the reference kernels, ordered by ``source``'s bit pattern. ``moved``: the
    cone value that ``root``'s data input only moves (Reshape/Transpose)."""
    cones = cones or _Cones()
    values: dict[Output, np.ndarray | None] = {source: _codes(source.element_type)}

    def value_of(x: Output) -> np.ndarray | None:
        if x not in values:
            if x.node in cone:  # a pointwise node: one output (cones stay under MAX_CONE deep)
                values[x] = _evaluate(x.node, [value_of(i) for i in x.node.inputs], (256,))
            else:
                values[x] = cones.scalar(x)
        return values[x]

    if moved is not None:
        values[root.inputs[0]] = value_of(moved)
    table = value_of(root.outputs[0])
    assert table is not None
    return table


def fold_quantized_chains(fn: Function) -> Function:
    """Replace each QuantizeLinear whose input is a pointwise function of one 8-bit value
    by a table lookup (see the module docstring).

    Needs: nothing (run it before the quantize/dequantize ops are lowered). Guarantees: the
    replaced values are bit-identical to the original ones (the table is the original chain
    evaluated on every byte value by the reference kernels); a root whose only users lie in
    another root's cone is left alone (it dies with that root's chain).
    """
    cones = _Cones()
    plans: dict[Node, _Plan] = {}
    for node in fn.nodes:
        if isinstance(node.op, QuantizeLinear):
            plan = cones.plan(node)
            if plan is not None:
                plans[node] = plan
    if not plans:
        return fn
    users = readers(fn.nodes)
    inside = set().union(*(p.cone - {root} for root, p in plans.items()))
    kept = {
        root: plan
        for root, plan in plans.items()
        if not (root in inside and set(users.get(root.outputs[0], ())) <= inside)
    }
    return _rebuild(fn, kept)


def _rebuild(fn: Function, plans: dict[Node, _Plan]) -> Function:
    mapping: dict[Output, Output] = {}
    for node in fn.nodes:
        inputs = tuple(mapping.get(i, i) for i in node.inputs)
        plan = plans.get(node)
        if plan is not None:
            outputs: Sequence[Output] = [_lookup(plan, mapping.get(plan.source, plan.source))]
        elif inputs != node.inputs:
            outputs = node.op.build(*inputs, name=node.name, provenance=node.provenance).outputs
        else:
            continue
        mapping.update(zip(node.outputs, outputs, strict=True))
    return fn.with_outputs(mapping) if mapping else fn


def _lookup(plan: _Plan, source: Output) -> Output:
    moved = source
    for move in reversed(plan.moves):
        moved = move.op.build(moved, name=move.name, provenance=move.provenance).outputs[0]
    if plan.table is None:
        return moved
    # an i32 table: compilers vectorize 32-bit gathers (there are no byte gathers)
    table = constant(plan.table.astype(np.int32), et.i32)
    looked_up = gather(table, convert(moved, et.i32), 0)
    return convert(looked_up, et.from_dtype(plan.table.dtype))  # in range: exact
