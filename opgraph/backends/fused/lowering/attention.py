"""Fused attention: ``softmax(Q·K * scale [+ mask]) · V`` as one step per batch entry and
block of query rows (:class:`AttentionStep`).

The pattern is what BERT/ViT-style lowerings produce once ``Softmax`` is expanded
(``lowering/nn.py``): ``MatMul(q, k)``, optionally multiplied or divided by a scalar constant,
optionally plus an additive mask, then the stable softmax over the last axis (``ReduceMax``,
``Sub``, ``Exp``, ``ReduceSum``, ``Div``), then ``MatMul(·, v)``; the probabilities may
pass through ``Select(IsNaN(p), 0, p)`` first (torch's exporter guards masked attention so:
a row whose scores are all ``-inf`` gives zeros, not NaN; GPT-2's causal mask arrives so).
The rewrite on the second
``MatMul`` replaces the chain by one :class:`Attention` node, an internal lowering op (never
in user graphs, not registered as an IR op); its step computes, per block of query rows, the
scores into a scratch block that stays in cache, the softmax in f32 in the reference's order
(scale, mask, maximum, ``exp(x - max)``, sum, quotient) and the product with ``v``, so the
full score tensor is never written to memory. The values are those of the unfused chain (the
same scalar operations per element; only the sum's association differs, as between any two
vectorised sums), with two exceptions: scalar constant factors on ``q`` and ``k`` themselves
(torch's export of ``scaled_dot_product_attention``: ``(q·c)·(k·c)``, ViT) are folded into
the scale (one multiplication per score instead of one per element of ``q`` and ``k``, a
rounding apart), and an all-zero constant mask (the same export adds one) is dropped, which
changes no value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from opgraph.backends.fused import views
from opgraph.backends.fused.lowering.linalg import _batch_offsets, _operand
from opgraph.backends.fused.lowering.registry import REWRITES, STEP_OPS
from opgraph.backends.fused.program import Step
from opgraph.backends.fused.views import Literal, View, static, static_all
from opgraph.core import element_type as et
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import Constant
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.core.shape import static_shape
from opgraph.core.tensor_type import TensorType
from opgraph.ops import elementwise as ew
from opgraph.ops.linalg import MatMul
from opgraph.ops.movement import Broadcast, Reshape, transpose
from opgraph.ops.reduction import ReduceMax, ReduceSum

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Bytes of scores one block of query rows may hold (per thread): well inside L2.
SCORE_BYTES = 1 << 17


@dataclass(frozen=True, slots=True)
class Attention(Op):
    """``softmax(q·k ⊙ scale [+ mask], -1) · v`` over matching batch dimensions (f32).

    Inputs ``q (..., n, d)``, ``k (..., d, m)``, ``v (..., m, e)`` and optionally ``mask``
    of the scores' shape ``(..., n, m)``; output ``(..., n, e)``. The scores are
    ``q·k * scale`` (``q·k / scale`` when ``divide``). ``zero_nan``: a NaN probability is 0
    (a row of ``-inf`` scores gives zeros). ``interleave`` (rank >= 3): the output
    is laid out ``(..., n, heads, e)``, the last batch axis (the heads) moved after the query
    axis, which is how multi-head attention merges its heads next. An internal op of the
    fused compiler: only :func:`_attention` builds it, after ``lower`` has expanded the
    softmax; it has no reference kernel and is never serialized.
    """

    scale: float = 1.0
    divide: bool = False
    interleave: bool = False
    zero_nan: bool = False
    foldable: ClassVar[bool] = False
    differentiable: ClassVar[bool] = False

    def infer(self, *inputs: TensorType) -> TensorType:
        if len(inputs) not in (3, 4):
            raise OpTypeError(f"expected 3 or 4 inputs (q, k, v[, mask]), got {len(inputs)}")
        q, k, v = inputs[:3]
        for t in inputs:
            if t.element_type is not et.f32 or t.rank < 2 or t.rank != q.rank:
                raise OpTypeError(f"expected f32 operands of rank {q.rank} >= 2, got {t}")
        batch, (n, d), (d2, m), (m2, e) = q.shape[:-2], q.shape[-2:], k.shape[-2:], v.shape[-2:]
        if k.shape[:-2] != batch or v.shape[:-2] != batch or d != d2 or m != m2:
            raise OpTypeError(f"q {q}, k {k}, v {v} do not form an attention product")
        if len(inputs) == 4 and inputs[3].shape != (*batch, n, m):
            raise OpTypeError(f"the mask {inputs[3]} is not of the scores' shape")
        if self.interleave:
            if not batch:
                raise OpTypeError(f"interleave needs a batch axis; q is {q}")
            return TensorType(et.f32, (*batch[:-1], n, batch[-1], e))
        return TensorType(et.f32, (*batch, n, e))


# ------------------------------------------------------------------------------ rewrite
def _producer(x: Output, cls: type[Op]) -> Node | None:
    return x.node if type(x.node.op) is cls else None


def _row_statistic(x: Output, cls: type[Op], source: Output) -> bool:
    """Whether ``x`` is ``cls(source)`` over the last axis broadcast back along it."""
    wide = _producer(x, Broadcast)
    if wide is None or wide.op.broadcast_axes != (source.rank - 1,):  # type: ignore[attr-defined]
        return False
    stat = _producer(wide.inputs[0], cls)
    last = (source.rank - 1,)
    return (
        stat is not None
        and stat.inputs[0] == source
        and stat.op.axes == last  # type: ignore[attr-defined]
        and not stat.op.keep_dims  # type: ignore[attr-defined]
    )


def _softmax_input(p: Output) -> Output | None:
    """``x`` when ``p`` is the expanded stable softmax of ``x`` over its last axis."""
    quotient = _producer(p, ew.Div)
    if quotient is None:
        return None
    e, total = quotient.inputs
    power = _producer(e, ew.Exp)
    if power is None or not _row_statistic(total, ReduceSum, e):
        return None
    shifted = _producer(power.inputs[0], ew.Sub)
    if shifted is None:
        return None
    x, peak = shifted.inputs
    return x if _row_statistic(peak, ReduceMax, x) else None


def _nan_guarded(p: Output) -> Output | None:
    """``s`` when ``p`` is ``Select(IsNaN(s), 0, s)`` (NaN probabilities replaced by 0)."""
    select = _producer(p, ew.Select)
    if select is None:
        return None
    condition, zero, s = select.inputs
    test = _producer(condition, ew.IsNaN)
    if test is None or test.inputs[0] != s or _scalar(zero) != 0.0:
        return None
    return s


def _scalar(x: Output) -> float | None:
    """The value of ``x`` when it is a constant with every element equal (through
    broadcasts and reshapes)."""
    while type(x.node.op) in (Broadcast, Reshape):
        x = x.node.inputs[0]
    op = x.node.op
    if not isinstance(op, Constant) or op.element_type is not et.f32:
        return None
    flat = np.asarray(op.value, np.float32).reshape(-1)
    if flat.size == 0 or not bool(np.all(flat.view(np.uint32) == flat.view(np.uint32)[0])):
        return None
    return float(flat[0])


def _scores(x: Output) -> tuple[Output, float, bool, Output | None] | None:
    """(the product ``q·k``, scale, divide, mask) of softmax's input ``x``."""
    mask: Output | None = None
    total = _producer(x, ew.Add)
    if total is not None:
        for scaled, other in (total.inputs, total.inputs[::-1]):
            if type(scaled.node.op) in (ew.Mul, ew.Div, MatMul):
                x, mask = scaled, other
                break
        else:
            return None
    for cls, divide in ((ew.Mul, False), (ew.Div, True)):
        node = _producer(x, cls)
        if node is None:
            continue
        pairs = [node.inputs] if divide else [node.inputs, node.inputs[::-1]]
        for product, factor in pairs:
            value = _scalar(factor)
            if value is not None and type(product.node.op) is MatMul:
                return product, value, divide, mask
        return None
    return (x, 1.0, False, mask) if type(x.node.op) is MatMul else None


def _unscaled(x: Output) -> tuple[Output, float]:
    """(``y``, ``c``) when ``x`` is ``Mul(y, c)`` by a scalar constant ``c`` (torch's exporter
    of ``scaled_dot_product_attention`` scales q and k so, each by the 4th root of the head
    width, before their product: ViT), else (``x``, 1)."""
    node = _producer(x, ew.Mul)
    if node is not None:
        for y, factor in (node.inputs, node.inputs[::-1]):
            value = _scalar(factor)
            if value is not None and y.shape == x.shape and y.element_type is x.element_type:
                return y, value
    return x, 1.0


def _folded(q: Output, k: Output, scale: float, divide: bool) -> tuple[Output, Output, float]:
    """q and k without their scalar factors (:func:`_unscaled`), and the scores' scale with
    them folded in (rounded once, from doubles); the operands as given where a factor is 0 or
    the folded scale would leave f32's normal range."""
    (q0, a), (k0, b) = _unscaled(q), _unscaled(k)
    factor = a * b
    if factor in (0.0, 1.0) or not math.isfinite(factor):
        return q, k, scale
    wide = scale / factor if divide else scale * factor
    f32 = np.finfo(np.float32)
    if not float(f32.tiny) <= abs(wide) <= float(f32.max):
        return q, k, scale
    return q0, k0, float(np.float32(wide))


@REWRITES.register(MatMul)
def _attention(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    """``MatMul(softmax(scores), v)`` → one :class:`Attention` node (see the module doc)."""
    p, v = inputs
    guarded = _nan_guarded(p)
    zero_nan = guarded is not None
    if guarded is not None:
        p = guarded
    x = _softmax_input(p)
    found = _scores(x) if x is not None else None
    if found is None:
        return None
    product, scale, divide, mask = found
    if mask is not None and _scalar(mask) == 0.0:
        mask = None  # a zero mask (ViT's export adds one) changes no score's value
    q, k = product.node.inputs
    q, k, scale = _folded(q, k, scale, divide)
    operands = [q, k, v] if mask is None else [q, k, v, mask]
    if any(o.element_type is not et.f32 or o.rank != p.rank for o in operands):
        return None
    if any(type(d) is not int for o in (*operands, p) for d in o.shape):
        return None  # the step needs static sizes; symbolic attention runs unfused
    batch = p.shape[:-2]
    if p.rank < 2 or q.shape[:-2] != batch or k.shape[:-2] != batch or v.shape[:-2] != batch:
        return None
    if mask is not None and mask.shape != p.shape:
        return None
    if 0 in node.outputs[0].shape or 0 in p.shape or q.shape[-1] == 0:
        return None  # empty products: the unfused steps handle them
    if divide and scale == 0.0:
        return None
    rank = p.rank
    if rank < 3:
        op = Attention(scale, divide, zero_nan=zero_nan)
        return op.build(*operands, provenance=node.provenance).outputs
    fused = Attention(scale, divide, True, zero_nan).build(*operands, provenance=node.provenance)
    perm = (*range(rank - 3), rank - 2, rank - 3, rank - 1)  # heads back before the queries
    return [transpose(fused.outputs[0], perm)]


# ------------------------------------------------------------------------------ the step
@dataclass(eq=False)
class AttentionStep(Step):
    """``out = softmax(q @ k * scale [+ mask]) @ v`` per batch entry (2-D views of one entry;
    ``batch`` lists element offsets added to (q, k, v, out, mask)). Units are (entry, block of
    ``block_rows`` query rows); each thread keeps one block of scores, and its entry's ``k``
    and ``v`` repacked, in its slice of ``scratch`` (:func:`scratch_floats` per thread).
    ``q``'s rows are contiguous; ``zero_nan``: NaN probabilities are 0 (see
    :class:`Attention`)."""

    q: View | None = None
    k: View | None = None
    v: View | None = None
    out: View | None = None
    mask: View | None = None  # one entry's (n, m) scores view; strides may be 0
    scale: float = 1.0
    divide: bool = False
    batch: tuple[tuple[int, ...], ...] = ((0, 0, 0, 0, 0),)
    block_rows: int = 1
    scratch: View | None = None
    zero_nan: bool = False

    def reads(self) -> list[View]:
        assert self.q is not None and self.k is not None and self.v is not None
        return [self.q, self.k, self.v, *([self.mask] if self.mask is not None else [])]

    def writes(self) -> list[View]:
        assert self.out is not None and self.scratch is not None
        return [self.out, self.scratch]


#: Floats at the start of each thread's scratch slice for a target's own bookkeeping (the
#: CPU keeps there which batch entry its packed ``k`` and ``v`` belong to); one cache line.
SCRATCH_HEADER = 16


def scratch_floats(step: AttentionStep) -> int:
    """Floats of scratch one thread needs: a header (:data:`SCRATCH_HEADER`), a block of
    scores, and room for ``k`` and ``v`` repacked as 32-column panels (zero-padded) for
    targets that multiply from panels."""
    assert step.k is not None and step.v is not None
    (d, m), e = static_all(step.k.shape), static(step.v.shape[1])
    return SCRATCH_HEADER + step.block_rows * m + _panels(m) * d + _panels(e) * m


def _panels(columns: int) -> int:
    return -(-columns // 32) * 32


def block_rows(n: int, m: int, entries: int, threads: int) -> int:
    """Query rows per unit: a block of scores within :data:`SCORE_BYTES`, halved (down to
    16 rows) while there are fewer than four units per thread."""
    rows = max(1, min(n, SCORE_BYTES // (4 * max(m, 1))))
    while rows > 16 and entries * -(-n // rows) < 4 * threads:
        rows = -(-rows // 2)
    return rows


@STEP_OPS.register(Attention)
def _lower(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, Attention)
    out = node.outputs[0]
    target = builder.home(out)
    batch = static_shape(node.inputs[0].shape[:-2])
    q, k, v = (_operand(builder, x, x.shape, et.f32) for x in node.inputs[:3])
    (n, d), (m, e) = static_all(q.shape[-2:]), static_all((k.shape[-1], v.shape[-1]))
    if q.strides[-1] != 1 and d > 1:  # query rows must be contiguous
        dense = views.reshape(builder.materialize(q), q.shape)
        assert isinstance(dense, View)
        q = dense
    offsets = _batch_offsets(q, k, batch, n * e)
    values = _batch_offsets(v, v, batch, 0)
    mask, mask_offsets = _mask(builder, node, batch)
    heads = batch[-1] if op.interleave else 1
    rows: list[tuple[int, ...]] = []
    for i, (qo, ko, _) in enumerate(offsets):
        out_offset = (i // heads) * n * heads * e + (i % heads) * e
        rows.append(static_all((qo, ko, values[i][0], out_offset, mask_offsets[i])))
    entries = math.prod(batch)
    block = block_rows(n, m, entries, builder.threads)
    step = AttentionStep(
        builder.describe(node),
        (node,),
        _matrix(q, (n, d)),
        _matrix(k, (d, m)),
        _matrix(v, (m, e)),
        View(target.buffer, et.f32, (n, e), (heads * e, 1), target.offset),
        mask,
        op.scale,
        op.divide,
        tuple(rows),
        block,
        zero_nan=op.zero_nan,
    )
    step.scratch = builder.scratch(et.f32, (builder.threads, scratch_floats(step)))
    builder.add_step(step)


def _matrix(view: View, shape: tuple[int, int]) -> View:
    return View(view.buffer, view.element_type, shape, view.strides[-2:], view.offset)


def _mask(
    builder: ProgramBuilder, node: Node, batch: tuple[int, ...]
) -> tuple[View | None, list[int]]:
    """The mask's (n, m) view of one entry and each entry's offset (zeros without one)."""
    entries = math.prod(batch)
    if len(node.inputs) < 4:
        return None, [0] * entries
    source = builder.operand(node.inputs[3])
    if isinstance(source, Literal) or source.element_type is not et.f32:
        source = builder.materialize(source, et.f32)
    assert isinstance(source, View)
    strides = [0 if size == 1 else s for size, s in zip(source.shape, source.strides, strict=True)]
    lead = strides[: len(batch)]
    offsets = []
    for position in range(entries):
        index = np.unravel_index(position, batch) if batch else ()
        offsets.append(static(sum(int(i) * s for i, s in zip(index, lead, strict=True))))
    n, m = source.shape[-2:]
    view = View(source.buffer, et.f32, (n, m), tuple(strides[-2:]), source.offset)
    return view, offsets


def numpy_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, op: Attention
) -> np.ndarray:
    """The reference semantics of :class:`Attention` in numpy (for targets without a
    kernel of their own, and tests): the unfused chain's operations in its order."""
    scores = np.matmul(q, k)
    factor = np.float32(op.scale)
    scores = scores / factor if op.divide else scores * factor
    if mask is not None:
        scores = scores + mask
    shifted = np.exp(scores - scores.max(-1, keepdims=True))
    p = shifted / shifted.sum(-1, keepdims=True)
    if op.zero_nan:
        p = np.where(np.isnan(p), np.float32(0), p)
    return np.matmul(p, v).astype(np.float32)


__all__ = [
    "SCRATCH_HEADER",
    "Attention",
    "AttentionStep",
    "block_rows",
    "numpy_attention",
    "scratch_floats",
]
