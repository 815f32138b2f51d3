"""Push transposes down through elementwise ops so that pairs meet and cancel (nGraph's
ReshapeSinking): ``transpose(tanh(transpose(x, p)), inverse(p))`` becomes ``tanh(x)``."""

from __future__ import annotations

import numpy as np

from opgraph.core.function import Function
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.ops.conversion import Convert
from opgraph.ops.elementwise import BinaryElementwise, Select, UnaryElementwise
from opgraph.ops.movement import Broadcast, Transpose, broadcast, transpose
from opgraph.passes.eliminate_reshapes import RESHAPE_RULES
from opgraph.passes.fold_constants import DEFAULT_MAX_ELEMENTS
from opgraph.pattern import P, Rules, constant_value, rewrite
from opgraph.pattern.pattern import source_constant

__all__ = ["SINK_RULES", "sink_transposes"]


def _perm(t: Output) -> tuple[int, ...]:
    op = t.op
    assert isinstance(op, Transpose)
    return op.perm


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(a) for a in np.argsort(perm))


def _unary(x: Output, t: Output, u: Output) -> Output:
    return transpose(u.op(x), _perm(t))


def _binary(a: Output, b: Output, ta: Output, tb: Output, op: Output) -> Output | None:
    if _perm(ta) != _perm(tb):
        return None
    return transpose(op.op(a, b), _perm(ta))


def _untransposed_constant(c: Output, perm: tuple[int, ...]) -> Output | None:
    """The constant ``c`` laid out as the input of ``transpose(·, perm)``."""
    inverse = _inverse(perm)
    shape = tuple(c.shape[a] for a in inverse)
    source = source_constant(c)
    if isinstance(c.op, Broadcast) and source is not None and source.value.size == 1:
        return broadcast(constant(source.value.reshape(()), c.element_type), shape)
    value = constant_value(c)
    if value is None or value.size > DEFAULT_MAX_ELEMENTS:
        return None
    return constant(np.transpose(value, inverse), c.element_type)


def _with_constant_right(a: Output, t: Output, c: Output, op: Output) -> Output | None:
    moved = _untransposed_constant(c, _perm(t))
    return None if moved is None else transpose(op.op(a, moved), _perm(t))


def _with_constant_left(a: Output, t: Output, c: Output, op: Output) -> Output | None:
    moved = _untransposed_constant(c, _perm(t))
    return None if moved is None else transpose(op.op(moved, a), _perm(t))


def _select(c: Output, a: Output, b: Output, tc: Output, ta: Output, tb: Output) -> Output | None:
    if not _perm(tc) == _perm(ta) == _perm(tb):
        return None
    return transpose(Select()(c, a, b), _perm(ta))


def _transposed(name: str, inner: str) -> P:
    return P(Transpose, P.var(inner), name=name)


SINK_RULES = (
    Rules(
        [
            (P((UnaryElementwise, Convert), _transposed("t", "x"), name="u"), _unary),
            (
                P(BinaryElementwise, _transposed("ta", "a"), _transposed("tb", "b"), name="op"),
                _binary,
            ),
            (
                P(BinaryElementwise, _transposed("t", "a"), P.const(name="c"), name="op"),
                _with_constant_right,
            ),
            (
                P(BinaryElementwise, P.const(name="c"), _transposed("t", "a"), name="op"),
                _with_constant_left,
            ),
            (
                P(Select, _transposed("tc", "c"), _transposed("ta", "a"), _transposed("tb", "b")),
                _select,
            ),
        ]
    )
    + RESHAPE_RULES
)


def sink_transposes(fn: Function) -> Function:
    """Move every Transpose below the elementwise ops it feeds, when all their inputs are
    transposed the same way or constant, then cancel Transpose pairs.

    Needs: nothing (run ``fold_constants`` after: moved constants are re-laid-out eagerly, but
    a constant too big to copy stops the sinking). Guarantees: no unary elementwise op or
    Convert reads a Transpose, no binary elementwise op reads two equal Transposes or a
    Transpose and a constant, no Transpose reads a Transpose; numerics unchanged (elementwise
    ops commute with permutations).
    """
    return rewrite(fn, SINK_RULES)
