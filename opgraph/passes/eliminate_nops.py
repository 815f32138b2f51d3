"""Remove ops that return their input unchanged (nGraph's NopElimination)."""

from __future__ import annotations

from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.core.shape import DimShape
from opgraph.ops import reduction
from opgraph.ops.conversion import Convert
from opgraph.ops.movement import Broadcast, Concat, ReplaceSlice, Slice
from opgraph.ops.rearrange import Pad
from opgraph.pattern import P, Rules, rewrite

__all__ = ["NOP_RULES", "eliminate_nops"]


#: Reductions whose value over no axes is the input itself (not e.g. an L2 norm, which is |x|).
_IDENTITY_WHEN_EMPTY = (
    reduction.ReduceSum,
    reduction.ReduceProd,
    reduction.ReduceMax,
    reduction.ReduceMin,
    reduction.ReduceMean,
)


def _no_axes(o: Output) -> bool:
    return not getattr(o.op, "axes", True)


def _no_padding(o: Output) -> bool:
    op = o.op
    assert isinstance(op, Pad)
    return not any(op.padding_below) and not any(op.padding_above)


def _same_type(o: Output) -> bool:
    return o.type == o.node.inputs[0].type


def _keep(x: Output) -> Output:
    return x


def _whole_slice(o: Output) -> bool:
    """A slice from the origin with the input's shape covers the input: with a stride above 1
    some axis of size >= 2 would come out shorter."""
    op = o.op
    assert isinstance(op, Slice | ReplaceSlice)
    return o.node.inputs[0].shape == _slice_shape(o) and not any(op.lower_bounds)


def _slice_shape(o: Output) -> DimShape:
    return o.shape if isinstance(o.op, Slice) else o.node.inputs[1].shape


def _replaced_whole(update: Output) -> Output:
    return update


#: Each rule removes one kind of identity op; the checks are on types and attributes only.
NOP_RULES = Rules(
    [
        (P(Slice, P.var("x"), where=_whole_slice), _keep),
        (P(Pad, P.var("x"), P.any(), where=_no_padding), _keep),
        (P(Broadcast, P.var("x"), where=_same_type), _keep),
        (P(Convert, P.var("x"), where=_same_type), _keep),
        (P(_IDENTITY_WHEN_EMPTY, P.var("x"), where=_no_axes), _keep),
        (P(Concat, P.var("x")), _keep),
        (P(ReplaceSlice, P.any(), P.var("update"), where=_whole_slice), _replaced_whole),
    ]
)


def eliminate_nops(fn: Function) -> Function:
    """Bypass identity ops: a Pad adding nothing, a Slice or ReplaceSlice covering the whole
    tensor, a Broadcast
    adding no axis, a Convert to the same element type, a reduction over no axes, a Concat of
    one value. (Identity Reshapes and Transposes are :func:`eliminate_reshapes`' job.)

    Needs: nothing. Guarantees: none of those ops remains; numerics unchanged (each removed op
    returns its input bit for bit).
    """
    return rewrite(fn, NOP_RULES)
