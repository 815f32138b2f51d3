"""Records for elementwise ops: unary math, rounding, predicates, remainders, logic, bitwise
ops, shifts and trigonometry, with their edge cases as data (round half to even, floor vs C
remainders with negative operands, x/0, shifts beyond the bitwidth, domain errors)."""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.ops import bitwise as bw
from opgraph.ops import trigonometric as tg
from opgraph.testing.records.base import BOOL, FLOATS, NUMERIC, SIGNED, In, OpRecord

S = (2, 3)
NAN = float("nan")
INF = float("inf")
INTS_AND_BOOL = (*et.INTS, et.boolean)


def _unary(name: str, builder: Callable[[Output], Output], low: float, high: float) -> OpRecord:
    return OpRecord(name, builder, (In((3, 4), low=low, high=high),), FLOATS)


def _special(name: str, builder: Callable[..., Output], *values: list[float]) -> OpRecord:
    inputs = tuple(In((len(v),), values=v) for v in values)
    return OpRecord(name, builder, inputs, FLOATS, differentiable=False)


_HALVES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.25, -3.75]
_FRACTIONS = [-1.5, -0.5, -0.0, 0.5, 1.5, 2.0, INF, -INF, NAN]

_UNARY = [
    _unary("erf", ops.erf, -4, 4),
    _special("erf_special", ops.erf, [0.0, -0.0, INF, -INF, NAN, 3.5, -5.0, 1e-30]),
    OpRecord("ceiling", ops.ceiling, (In(S),), NUMERIC),
    OpRecord("floor", ops.floor, (In(S),), NUMERIC),
    OpRecord("round", ops.round, (In(S),), NUMERIC),
    OpRecord("sign", ops.sign, (In(S),), NUMERIC),
    _special("ceiling_special", ops.ceiling, _FRACTIONS),
    _special("floor_special", ops.floor, _FRACTIONS),
    _special("round_half_to_even", ops.round, [*_HALVES, INF, NAN]),
    _special("round_half_away_from_zero", lambda x: ops.round(x, "half_away_from_zero"), _HALVES),
    _special("sign_special", ops.sign, [-2.0, -0.0, 0.0, 3.0, NAN, -INF, INF]),
    OpRecord("reciprocal", ops.reciprocal, (In(S, nonzero=True),), FLOATS),
    _special("reciprocal_special", ops.reciprocal, [0.0, -0.0, INF, -INF, NAN]),
    *(
        _special(name, builder, [0.0, NAN, INF, -INF, 1.5, -2.0, -NAN])
        for name, builder in (
            ("is_nan", ops.is_nan),
            ("is_inf", ops.is_inf),
            ("is_finite", ops.is_finite),
        )
    ),
]

_TRIGONOMETRIC = [
    _unary("sin", tg.sin, -6, 6),
    _unary("cos", tg.cos, -6, 6),
    _unary("tan", tg.tan, -1.4, 1.4),
    _unary("asin", tg.asin, -0.95, 0.95),
    _unary("acos", tg.acos, -0.95, 0.95),
    _unary("atan", tg.atan, -5, 5),
    _unary("sinh", tg.sinh, -3, 3),
    _unary("cosh", tg.cosh, -3, 3),
    _unary("asinh", tg.asinh, -5, 5),
    _unary("acosh", tg.acosh, 1.1, 5),
    _unary("atanh", tg.atanh, -0.95, 0.95),
    _special("asin_domain", tg.asin, [2.0, -2.0, 1.0, -1.0, NAN]),
    _special("acos_domain", tg.acos, [2.0, -2.0, 1.0, -1.0, NAN]),
    _special("acosh_domain", tg.acosh, [0.5, 1.0, INF, -1.0]),
    _special("atanh_domain", tg.atanh, [1.0, -1.0, 2.0, 0.0]),
    OpRecord("atan2", tg.atan2, (In(S), In(S)), FLOATS),
    _special(
        "atan2_special",
        tg.atan2,
        [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, INF, 1.0, NAN],
        [0.0, 0.0, -0.0, -0.0, 0.0, 0.0, INF, -INF, 1.0],
    ),
]

_SIGNS_A = [-7, 7, -7, 7, -6, 6, 0, -1]
_SIGNS_B = [3, 3, -3, -3, 3, -3, 5, 4]

_BINARY = [
    OpRecord("mod", ops.mod, (In(S, low=-9, high=9), In(S, nonzero=True, low=-4, high=4)), NUMERIC),
    OpRecord(
        "mod_fmod",
        lambda a, b: ops.mod(a, b, fmod=True),
        (In(S, low=-9, high=9), In(S, nonzero=True, low=-4, high=4)),
        NUMERIC,
    ),
    # floor mod takes the divisor's sign (-7 mod 3 == 2), fmod the dividend's (fmod(-7, 3) == -1)
    OpRecord(
        "mod_signs",
        ops.mod,
        (In((8,), values=_SIGNS_A), In((8,), values=_SIGNS_B)),
        SIGNED,
        differentiable=False,
    ),
    OpRecord(
        "mod_signs_fmod",
        lambda a, b: ops.mod(a, b, fmod=True),
        (In((8,), values=_SIGNS_A), In((8,), values=_SIGNS_B)),
        SIGNED,
        differentiable=False,
    ),
    _special("mod_by_zero_float", ops.mod, [1.0, -1.0, 0.0], [0.0, -0.0, 0.0]),
    _special("mod_infinities", ops.mod, [5.0, -5.0, INF, 5.0], [INF, INF, 3.0, -INF]),
    _special(
        "mod_fmod_infinities",
        lambda a, b: ops.mod(a, b, fmod=True),
        [5.0, -5.0, INF, 5.0],
        [INF, INF, 3.0, -INF],
    ),
    # integer quotients in both rounding modes, every sign combination (-10 / 3 == -4 floor)
    OpRecord(
        "divide_signs_floor",
        ops.divide,
        (In((8,), values=[-10, 10, -10, 10, -9, 9, 0, -1]), In((8,), values=_SIGNS_B)),
        et.SIGNED_INTS,
    ),
    OpRecord(
        "divide_signs_trunc",
        lambda a, b: ops.divide(a, b, floor_division=False),
        (In((8,), values=[-10, 10, -10, 10, -9, 9, 0, -1]), In((8,), values=_SIGNS_B)),
        et.SIGNED_INTS,
    ),
    OpRecord("logical_xor", ops.logical_xor, (In(S), In(S)), BOOL),
]


def _wide(shape: tuple[int, ...]) -> In:
    """Random integers in ±1e12 clipped to the type: every bit pattern of the 8-32 bit types."""
    return In(shape, low=-1e12, high=1e12)


def _shift_record(
    name: str, builder: Callable[..., Output], x: list[int], s: list[int]
) -> OpRecord:
    types = et.SIGNED_INTS if min(x) < 0 else et.INTS
    return OpRecord(name, builder, (In((len(x),), values=x), In((len(s),), values=s)), types)


# amounts 8, 16, 32, 64 are >= the bitwidth of some types; -1 reads as a huge amount
_SIGNED_X = [1, -1, 5, -5, 3, -3, 1, -7, -1, 100]
_SIGNED_S = [0, 1, 1, 1, 100, 100, -1, 2, 64, 8]
_NON_NEGATIVE_X = [1, 127, 5, 100, 3, 3, 1, 7, 1, 100]
_NON_NEGATIVE_S = [0, 1, 7, 8, 100, 16, 32, 64, 63, 2]

_BITWISE = [
    OpRecord("bitwise_not", bw.bitwise_not, (_wide(S),), INTS_AND_BOOL),
    OpRecord("bitwise_and", bw.bitwise_and, (_wide(S), _wide(S)), INTS_AND_BOOL),
    OpRecord("bitwise_or", bw.bitwise_or, (_wide(S), _wide(S)), INTS_AND_BOOL),
    OpRecord("bitwise_xor", bw.bitwise_xor, (_wide(S), _wide(S)), INTS_AND_BOOL),
    OpRecord("shift_left", bw.shift_left, (_wide(S), In(S, low=0, high=7)), et.INTS),
    OpRecord("shift_right", bw.shift_right, (_wide(S), In(S, low=0, high=7)), et.INTS),
    _shift_record("shift_left_edges", bw.shift_left, _SIGNED_X, _SIGNED_S),
    _shift_record("shift_right_edges", bw.shift_right, _SIGNED_X, _SIGNED_S),
    _shift_record("shift_left_edges_non_negative", bw.shift_left, _NON_NEGATIVE_X, _NON_NEGATIVE_S),
    _shift_record(
        "shift_right_edges_non_negative", bw.shift_right, _NON_NEGATIVE_X, _NON_NEGATIVE_S
    ),
]

RECORDS: list[OpRecord] = [*_UNARY, *_TRIGONOMETRIC, *_BINARY, *_BITWISE]
