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

**Per-channel chains.** A batch norm between two quantizations (``Q(BN(DQ(q)))``, as
onnxruntime's quantizer leaves a BatchNormalization it does not fold into the convolution)
has per-channel constants: each value is a function of ``q`` *and its channel* (axis 1).
Where the cone's other operands are uniform or vary along axis 1 only (a BatchNormInference's
parameters, a ``(C,)`` constant broadcast over the other axes), the table has one row of 256
per channel, evaluated by the same reference kernels on a ``(256, C)`` array (channels on axis
1, as the kernels expect), and the lookup's index is ``q + 256 · c`` (``q + 128 + 256 · c``
for i8 ``q``, whose rows are then ordered by value): ``C · 256`` entries. No moves (a Reshape
or Transpose would move the channel axis) and no identity case.
"""

from __future__ import annotations

import math
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
from opgraph.ops.elementwise import BinaryElementwise, FloatUnary, Select, UnaryElementwise, add
from opgraph.ops.indexing import gather
from opgraph.ops.movement import Broadcast, Reshape, Transpose, broadcast
from opgraph.ops.nn import BatchNormInference
from opgraph.ops.quantization import DequantizeLinear, QuantizeLinear
from opgraph.pattern.pattern import constant_value

__all__ = ["MAX_CONE", "fold_quantized_chains", "quantized_table"]

#: Entries of a table (one per byte value).
ENTRIES = 256
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
#: The axis a per-channel table's rows follow (a batch norm's).
CHANNEL_AXIS = 1
#: The most channels a per-channel table may have (its bytes: 256 a channel, as i32).
MAX_CHANNELS = 4096
#: The default fewest elements a channel's plane (one image) needs for a per-channel table
#: (``fold_quantized_chains``' ``min_plane``; a target says its own through
#: ``TargetFeatures.channel_table_plane``). The CPU looks a plane up through its channel's 256
#: entries turned into bytes, in the pieces a convolution's epilogue is called with: on the
#: Intel guest a 32x32 plane (pieces of 448) gained 8-10 % on the layer (convolution,
#: requantization, batch norm chain); 16x16 ones (pieces of 128) lost 7-20 % on a layer alone
#: and were mixed in the model (docs/performance.md, h150).
MIN_PLANE = 1024


@dataclass(frozen=True)
class _Plan:
    """How a root QuantizeLinear is replaced: ``moves`` (outermost first) applied to
    ``source``, then looked up in ``table`` (None: the identity)."""

    source: Output
    moves: tuple[Node, ...]
    table: np.ndarray | None  # (256,), or (256, C) for a per-channel chain
    cone: frozenset[Node]


class _Cones:
    """The cone search over one Function (memoized per value); per-channel tables only for
    planes of ``min_plane`` elements or more (None: none)."""

    def __init__(self, min_plane: int | None = MIN_PLANE) -> None:
        self.min_plane = min_plane
        self.uniform: dict[Output, np.ndarray | None] = {}
        self.vectors: dict[Output, np.ndarray | None] = {}

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

    # ----------------------------------------------------------- per-channel values
    def vector(self, value: Output) -> np.ndarray | None:
        """``value``'s elements when it is a rank-1 function of constants (at most
        ``MAX_CHANNELS`` of them), else None."""
        if value not in self.vectors:
            self.vectors[value] = self._vector(value)
        return self.vectors[value]

    def _vector(self, value: Output) -> np.ndarray | None:
        (length,) = value.shape if len(value.shape) == 1 else (None,)
        if not isinstance(length, int) or length > MAX_CHANNELS:
            return None
        array = constant_value(value)
        if array is not None:
            return np.asarray(array, dtype=value.element_type.dtype).reshape(-1)
        node = value.node
        if not _pointwise(node) or len(node.outputs) != 1:
            return None
        args = [self._operand(x) for x in node.inputs]
        if any(a is None for a in args):
            return None
        try:
            return _evaluate(node, args, (length,))
        except _FAILURES:
            return None

    def _operand(self, value: Output) -> np.ndarray | None:
        scalar = self.scalar(value)
        return scalar if scalar is not None else self.vector(value)

    def channel(self, value: Output, shape: DimShape) -> np.ndarray | None:
        """The ``(C,)`` values of ``value`` (of ``shape``) when it is a function of constants
        varying along ``CHANNEL_AXIS`` only (a ``(C,)`` one broadcast over the other axes)."""
        if not isinstance(value.op, Broadcast) or value.shape != shape:
            return None
        others = tuple(a for a in range(len(shape)) if a != CHANNEL_AXIS)
        if tuple(value.op.broadcast_axes) != others:
            return None
        return self.vector(value.node.inputs[0])

    def batch_norm(self, node: Node, shape: DimShape) -> bool:
        """Whether ``node`` is a BatchNormInference of ``shape`` whose parameters are
        constant (per channel)."""
        if not isinstance(node.op, BatchNormInference) or node.outputs[0].shape != shape:
            return False
        return all(self.vector(p) is not None for p in node.inputs[1:])

    def in_cone(self, node: Node, shape: DimShape, channels: bool) -> bool:
        """Whether ``node`` may join a cone (per-channel ones: a batch norm too)."""
        return _pointwise(node) or (channels and self.batch_norm(node, shape))

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
        if sources is None and not moves:
            return self.channel_plan(root, x)
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

    def channel_plan(self, root: Node, x: Output) -> _Plan | None:
        """The per-channel table's plan of ``root`` (its data input ``x``), or None."""
        shape = x.shape
        channels = shape[CHANNEL_AXIS] if len(shape) > CHANNEL_AXIS else None
        if self.min_plane is None or not isinstance(channels, int) or channels > MAX_CHANNELS:
            return None
        plane = [d for d in shape[CHANNEL_AXIS + 1 :] if isinstance(d, int)]
        if len(plane) < len(shape) - CHANNEL_AXIS - 1 or math.prod(plane) < self.min_plane:
            return None
        cone: dict[Node, None] = {root: None}
        sources = self.sources(x, shape, cone, channels=True)
        if sources is None or len(sources) != 1 or len(cone) > MAX_CONE:
            return None
        (source,) = sources
        if source.element_type not in _BYTES or not _worth_a_table(cone):
            return None
        try:
            table = channel_table(root, source, cone, self, channels)
        except _FAILURES:
            return None
        return _Plan(source, (), table, frozenset(cone))

    def sources(
        self, value: Output, shape: DimShape, cone: dict[Node, None], channels: bool = False
    ) -> set[Output] | None:
        """The non-uniform leaves ``value`` is a pointwise function of (adding the nodes
        computing it to ``cone``), or None. An 8-bit value whose own cone fails, or has
        more than one source, is a leaf itself. ``channels``: operands constant along all
        axes but ``CHANNEL_AXIS`` count as uniform, and batch norms join the cone."""
        if self.scalar(value) is not None:
            return set()
        if channels and self.channel(value, shape) is not None:
            return set()
        if value.shape != shape:
            return None
        node = value.node
        if self.in_cone(node, shape, channels) and len(node.outputs) == 1 and len(cone) < MAX_CONE:
            inner: dict[Node, None] = dict(cone)
            inner[node] = None
            found: set[Output] | None = set()
            data = node.inputs[:1] if isinstance(node.op, BatchNormInference) else node.inputs
            for x in data:
                more = None if found is None else self.sources(x, shape, inner, channels)
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
    return quantizes > 1 or any(isinstance(n.op, FloatUnary | BatchNormInference) for n in cone)


def _stored(users: Sequence[Node] | None) -> bool:
    """Whether a per-channel lookup's result is stored as it is: no user is pointwise (a
    fused loop ending in the lookup looks its bytes up by rows; one that goes on computing
    from it gathers element by element, with a range check, costlier than the chain)."""
    return not any(_pointwise(u) or isinstance(u.op, _MOVES) for u in users or ())


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


def channel_table(
    root: Node, source: Output, cone: dict[Node, None], cones: _Cones, channels: int
) -> np.ndarray:
    """The value of ``root`` for every byte value of ``source`` (rows, ordered by bit
    pattern) and every channel (columns): the cone evaluated by the reference kernels on a
    ``(256, channels)`` array, per-channel operands as ``(1, channels)`` rows."""
    shape = (ENTRIES, channels)
    codes = _codes(source.element_type)
    values: dict[Output, np.ndarray | None] = {source: np.broadcast_to(codes[:, None], shape)}

    def value_of(x: Output) -> np.ndarray | None:
        if x not in values:
            if x.node in cone and isinstance(x.op, BatchNormInference):
                params = [cones.vector(p) for p in x.node.inputs[1:]]
                values[x] = _evaluate(x.node, [value_of(x.node.inputs[0]), *params], shape)
            elif x.node in cone:
                values[x] = _evaluate(x.node, [value_of(i) for i in x.node.inputs], shape)
            elif (row := cones.channel(x, x.shape)) is not None:
                values[x] = np.broadcast_to(row[None, :], shape)
            else:
                values[x] = cones.scalar(x)
        return values[x]

    table = value_of(root.outputs[0])
    assert table is not None
    return np.ascontiguousarray(table)


def fold_quantized_chains(fn: Function, min_plane: int | None = MIN_PLANE) -> Function:
    """Replace each QuantizeLinear whose input is a pointwise function of one 8-bit value
    by a table lookup (see the module docstring); a per-channel chain only where a channel's
    plane has at least ``min_plane`` elements (None: per-tensor tables only).

    Needs: nothing (run it before the quantize/dequantize ops are lowered). Guarantees: the
    replaced values are bit-identical to the original ones (the table is the original chain
    evaluated on every byte value by the reference kernels); a root whose only users lie in
    another root's cone is left alone (it dies with that root's chain).
    """
    cones = _Cones(min_plane)
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
        and (plan.table is None or plan.table.ndim == 1 or _stored(users.get(root.outputs[0])))
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
    if plan.table.ndim == 2:
        return _channel_lookup(plan.table, source)
    # an i32 table: compilers vectorize 32-bit gathers (there are no byte gathers)
    table = constant(plan.table.astype(np.int32), et.i32)
    looked_up = gather(table, convert(moved, et.i32), 0)
    return convert(looked_up, et.from_dtype(plan.table.dtype))  # in range: exact


def _channel_lookup(table: np.ndarray, source: Output) -> Output:
    """``table[q + 256 · c]`` (rows by value: i8 ``q`` shifted by 128) per channel ``c``."""
    channels = table.shape[1]
    first = 0
    rows = table.T
    if source.element_type is et.i8:  # bit-pattern order -> value order (-128 .. 127)
        rows, first = np.roll(rows, -128, axis=1), 128
    flat = constant(np.ascontiguousarray(rows).reshape(-1).astype(np.int32), et.i32)
    starts = np.arange(channels, dtype=np.int32) * ENTRIES + first
    others = tuple(a for a in range(len(source.shape)) if a != CHANNEL_AXIS)
    offsets = broadcast(constant(starts, et.i32), source.shape, others)
    looked_up = gather(flat, add(convert(source, et.i32), offsets), 0)
    return convert(looked_up, et.from_dtype(table.dtype))  # in range: exact
