"""Algebraic simplification (nGraph's AlgebraicSimplification, as rules).

Float rules are kept to those that give the same value for every input, up to the sign of a
zero (``x + 0 -> x`` turns ``-0.0 + 0.0 = +0.0`` into ``-0.0``; the two compare equal), or that
give the mathematically exact value where the original rounds or overflows:

* ``log(exp(x)) -> x`` differs only where ``exp`` overflows or underflows (|x| > ~88 in f32),
  and there ``x`` is the right answer;
* ``exp(log(x)) -> x`` is applied only when ``x`` is provably non-negative (an ``exp``,
  ``relu``, ``sigmoid``, ``abs``, ``sqrt``, a square ``a*a``, or a constant with no negative
  element): for negative ``x`` the original gives NaN. At 0 both give 0.

``x * 0 -> 0`` and ``x - x -> 0`` hold for integers only (for floats, ``inf * 0`` and
``inf - inf`` are NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from opgraph.builders.scalars import scalar_like
from opgraph.core.dim import Dim
from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.ops import elementwise as ew
from opgraph.ops import movement
from opgraph.ops.movement import Broadcast, Concat, Slice, broadcast, concat
from opgraph.passes.eliminate_nops import NOP_RULES
from opgraph.pattern import P, Rules, constant_value, rewrite

__all__ = ["ALGEBRA_RULES", "simplify_algebra"]

_x = P.var("x")


def _integral(o: Output) -> bool:
    return o.element_type.is_integral


def _keep(x: Output) -> Output:
    return x


def _zeros(x: Output) -> Output:
    return scalar_like(0, x)


#: Ops whose result is never negative (NaN aside).
_NONNEGATIVE = (ew.Exp, ew.Relu, ew.Sigmoid, ew.Abs, ew.Sqrt)


def _nonnegative(o: Output) -> bool:
    if isinstance(o.op, _NONNEGATIVE):
        return True
    if isinstance(o.op, ew.Mul) and o.node.inputs[0] == o.node.inputs[1]:
        return True
    value = constant_value(o)
    return value is not None and bool(np.all(value >= 0))


def _not_relu_of_int_abs(o: Output) -> bool:
    inner = o.node.inputs[0]
    return not (isinstance(o.op, ew.Relu) and isinstance(inner.op, ew.Abs) and _integral(o))


def _inner(inner: Output) -> Output:
    return inner


def _broadcast_of_broadcast(x: Output, inner: Output, outer: Output) -> Output:
    first, second = inner.op, outer.op
    assert isinstance(first, Broadcast) and isinstance(second, Broadcast)
    kept = [axis for axis in range(len(second.shape)) if axis not in second.broadcast_axes]
    axes = sorted({*second.broadcast_axes, *(kept[a] for a in first.broadcast_axes)})
    return broadcast(x, second.shape, axes)


def _select_constant(c: Output, a: Output, b: Output) -> Output | None:
    value = constant_value(c)
    if value is None or value.size == 0:
        return None
    if np.all(value):
        return a
    return b if not np.any(value) else None


def _merge_slices(cat: Output) -> Output | None:
    """Concat of adjacent slices of one tensor, contiguous along the axis: one slice (or the
    tensor itself when it covers it)."""
    op = cat.op
    assert isinstance(op, Concat)
    merged: list[Output] = []
    changed = False
    for value in cat.node.inputs:
        joined = _join(merged[-1], value, op.axis) if merged else None
        if joined is None:
            merged.append(value)
        else:
            merged[-1] = joined
            changed = True
    if not changed:
        return None
    return merged[0] if len(merged) == 1 else concat(merged, op.axis)


def _join(left: Output, right: Output, axis: int) -> Output | None:
    a, b = _slice_of(left), _slice_of(right)
    if a is None or b is None or a[0] != b[0]:
        return None
    (source, lo_a, hi_a), (_, lo_b, hi_b) = a, b
    others_equal = all(
        (lo_a[k], hi_a[k]) == (lo_b[k], hi_b[k]) for k in range(len(lo_a)) if k != axis
    )
    if not others_equal or hi_a[axis] != lo_b[axis]:
        return None
    lower, upper = list(lo_a), list(hi_a)
    upper[axis] = hi_b[axis]
    if not any(lower) and tuple(upper) == source.shape:
        return source
    return movement.slice(source, lower, upper)


def _slice_of(value: Output) -> tuple[Output, Sequence[Dim], Sequence[Dim]] | None:
    """``(source, lower, upper)`` of a unit-stride Slice, or the whole of any other value."""
    op = value.op
    if isinstance(op, Slice):
        assert op.strides is not None
        if all(s == 1 for s in op.strides):
            return value.node.inputs[0], op.lower_bounds, op.upper_bounds
        return None
    return value, (0,) * value.rank, value.shape


ALGEBRA_RULES = Rules(
    [
        (P(ew.Add, _x, P.const(0)), _keep),
        (P(ew.Sub, _x, P.const(0)), _keep),
        (P(ew.Mul, _x, P.const(1)), _keep),
        (P(ew.Div, _x, P.const(1)), _keep),
        (P(ew.Pow, _x, P.const(1)), _keep),
        (P(ew.Mul, _x, P.const(0), where=_integral), _zeros),
        (P(ew.Sub, _x, _x, where=_integral), _zeros),
        (P(ew.Add, P.var("a"), P(ew.Neg, P.var("b"))), lambda a, b: ew.subtract(a, b)),
        (P(ew.Sub, P.var("a"), P(ew.Neg, P.var("b"))), lambda a, b: ew.add(a, b)),
        (P(ew.Mul, _x, P.const(-1)), lambda x: ew.negative(x)),
        (P(ew.Neg, P(ew.Neg, _x)), _keep),
        (P(ew.Not, P(ew.Not, _x)), _keep),
        (P((ew.Max, ew.Min, ew.And, ew.Or), _x, _x), _keep),
        # abs and relu are idempotent, and each is the identity on the other's results — except
        # relu(abs(x)) for signed integers: abs of the lowest value wraps to itself (negative)
        (
            P((ew.Abs, ew.Relu), P((ew.Abs, ew.Relu), name="inner"), where=_not_relu_of_int_abs),
            _inner,
        ),
        (P(ew.Abs, P(ew.Neg, _x)), lambda x: ew.abs(x)),
        (P(ew.Log, P(ew.Exp, _x)), _keep),
        (P(ew.Exp, P(ew.Log, P.var("x", where=_nonnegative))), _keep),
        (P(Broadcast, P(Broadcast, _x, name="inner"), name="outer"), _broadcast_of_broadcast),
        (P(ew.Select, P.var("c"), P.var("a"), P.var("b")), _select_constant),
        (P(ew.Select, P.any(), _x, _x), _keep),
        (P(Concat, name="cat"), _merge_slices),
    ]
)


def simplify_algebra(fn: Function) -> Function:
    """Apply the algebraic identities (:data:`ALGEBRA_RULES`) and the identity-op removals
    (:data:`~opgraph.passes.eliminate_nops.NOP_RULES`, since each exposes the other) until none
    applies.

    Identities: ``x+0, x-0, x*1, x/1, x**1 -> x``; for integers ``x*0, x-x -> 0``;
    ``a+(-b) -> a-b``, ``a-(-b) -> a+b``, ``x*-1 -> -x``, ``--x, not not x -> x``;
    ``max(x,x), min(x,x), x and x, x or x -> x``; ``abs``/``relu`` of ``abs``/``relu`` -> the
    inner one; ``abs(-x) -> abs(x)``; ``log(exp x) -> x``; ``exp(log x) -> x`` for provably
    non-negative ``x``; a Broadcast of a Broadcast -> one Broadcast; ``select`` with a constant
    condition or equal branches -> the branch; a Concat of adjacent slices of one tensor that
    are contiguous along the axis -> one Slice (or the tensor). See the module docstring for the
    floating-point fine print.

    Needs: nothing. Guarantees: none of the identities applies any more; numerics unchanged up
    to the sign of zeros and the overflow cases named above.
    """
    return rewrite(fn, ALGEBRA_RULES + NOP_RULES)
