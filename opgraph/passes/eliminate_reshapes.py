"""Reshape and transpose clean-ups (nGraph's ReshapeElimination).

A ``Reshape`` here is nGraph's: transpose by ``input_order``, then re-view row-major as
``output_shape``. So a transpose feeding a plain reshape folds into the reshape's
``input_order``, and a permutation that only moves axes of size 1 is a plain reshape (no data
moves).
"""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.core.dim import Dim
from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.ops.movement import Reshape, Transpose, reshape, transpose
from opgraph.pattern import P, Rules, rewrite

__all__ = ["RESHAPE_RULES", "eliminate_reshapes", "moves_data"]


def _identity(order: Sequence[int] | None) -> bool:
    return order is None or tuple(order) == tuple(range(len(order)))


def moves_data(order: Sequence[int], shape: Sequence[Dim]) -> bool:
    """Whether permuting axes of ``shape`` by ``order`` changes the row-major element order
    (it does not when only axes of size 1 move)."""
    kept = [axis for axis in order if shape[axis] != 1]
    return kept != sorted(kept)


def _plain(o: Output) -> bool:
    """A reshape that does not transpose."""
    op = o.op
    assert isinstance(op, Reshape)
    return _identity(op.input_order)


def _identity_reshape(x: Output, r: Output) -> Output | None:
    return x if _plain(r) and r.shape == x.shape else None


def _identity_transpose(x: Output, t: Output) -> Output | None:
    op = t.op
    assert isinstance(op, Transpose)
    return x if _identity(op.perm) else None


def _transpose_of_transpose(x: Output, inner: Output, outer: Output) -> Output:
    first, second = inner.op, outer.op
    assert isinstance(first, Transpose) and isinstance(second, Transpose)
    perm = tuple(first.perm[a] for a in second.perm)
    return x if _identity(perm) else transpose(x, perm)


def _reshape_of_reshape(x: Output, inner: Output, outer: Output) -> Output | None:
    first = inner.op
    assert isinstance(first, Reshape)
    if not _plain(outer):
        return None
    return reshape(x, outer.shape, first.input_order)


def _reshape_of_transpose(x: Output, t: Output, r: Output) -> Output | None:
    op = t.op
    assert isinstance(op, Transpose)
    return reshape(x, r.shape, op.perm) if _plain(r) else None


def _unit_axis_permutation(x: Output, r: Output) -> Output | None:
    """A transposing reshape (or a transpose) that only moves unit axes re-views the data."""
    op = r.op
    order = op.input_order if isinstance(op, Reshape) else getattr(op, "perm", None)
    if order is None or _identity(order) or moves_data(order, x.shape):
        return None
    return reshape(x, r.shape)


RESHAPE_RULES = Rules(
    [
        (P(Reshape, P.var("x"), name="r"), _identity_reshape),
        (P(Transpose, P.var("x"), name="t"), _identity_transpose),
        (
            P(Transpose, P(Transpose, P.var("x"), name="inner"), name="outer"),
            _transpose_of_transpose,
        ),
        (P(Reshape, P(Reshape, P.var("x"), name="inner"), name="outer"), _reshape_of_reshape),
        (P(Reshape, P(Transpose, P.var("x"), name="t"), name="r"), _reshape_of_transpose),
        (P((Reshape, Transpose), P.var("x"), name="r"), _unit_axis_permutation),
    ]
)


def eliminate_reshapes(fn: Function) -> Function:
    """Remove identity reshapes and transposes and collapse chains of them.

    Rules: an identity Reshape or Transpose goes; Transpose∘Transpose becomes one Transpose (or
    nothing); a plain Reshape of a Reshape becomes one Reshape; a plain Reshape of a Transpose
    becomes one transposing Reshape; a permutation that moves only axes of size 1 becomes a
    plain Reshape.

    Needs: nothing. Guarantees: no identity Reshape/Transpose and no Transpose of a Transpose
    remains; numerics unchanged (only data movement is rewritten).
    """
    return rewrite(fn, RESHAPE_RULES)
