"""Type rules of the elementwise ops added with the core catalogue (unary math, rounding,
predicates, mod, xor, bitwise, shifts, trigonometry): accepted cases and one test per error."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.ops import bitwise as bw
from opgraph.ops import trigonometric as tg


def p(shape, t=og.f32):
    return og.parameter(t, shape)


def i32(*values):
    return og.constant(np.array(values, np.int32))


TRIGONOMETRIC = [tg.sin, tg.cos, tg.tan, tg.asin, tg.acos, tg.atan]
HYPERBOLIC = [tg.sinh, tg.cosh, tg.asinh, tg.acosh, tg.atanh]

ACCEPTED = [
    ("erf", lambda: ops.erf(p((2, 3))), "f32[2,3]"),
    ("erf_bf16", lambda: ops.erf(p((2,), og.bf16)), "bf16[2]"),
    ("ceiling_int", lambda: ops.ceiling(p((2,), og.i8)), "i8[2]"),
    ("floor_f16", lambda: ops.floor(p((2,), og.f16)), "f16[2]"),
    ("round_default", lambda: ops.round(p(())), "f32[]"),
    ("round_mode_name", lambda: ops.round(p((2,)), "half_away_from_zero"), "f32[2]"),
    ("round_mode_enum", lambda: ops.round(p((2,)), ops.RoundMode.HALF_TO_EVEN), "f32[2]"),
    ("round_mode_member_name", lambda: ops.round(p((2,)), "HALF_TO_EVEN"), "f32[2]"),
    ("round_uint", lambda: ops.round(p((2,), og.u16)), "u16[2]"),
    ("sign_uint", lambda: ops.sign(p((2,), og.u8)), "u8[2]"),
    ("reciprocal", lambda: ops.reciprocal(p((2,), og.f64)), "f64[2]"),
    ("is_nan", lambda: ops.is_nan(p((2, 3))), "boolean[2,3]"),
    ("is_inf_f16", lambda: ops.is_inf(p((2,), og.f16)), "boolean[2]"),
    ("is_finite_empty", lambda: ops.is_finite(p((0,), og.bf16)), "boolean[0]"),
    ("mod", lambda: ops.mod(p((2,)), p((2,))), "f32[2]"),
    ("mod_fmod_int", lambda: ops.mod(p((2,), og.i16), p((2,), og.i16), fmod=True), "i16[2]"),
    ("mod_constant_divisor", lambda: ops.mod(p((2,), og.i32), i32(3, -3)), "i32[2]"),
    ("divide_float_zero_constant", lambda: ops.divide(p((2,)), og.constant([0.0, 1.0])), "f32[2]"),
    ("divide_nonzero_constant", lambda: ops.divide(p((2,), og.i32), i32(2, -1)), "i32[2]"),
    (
        "divide_empty_broadcast_zero",
        lambda: ops.divide(p((0,), og.i32), ops.broadcast(og.constant(0, og.i32), (0,))),
        "i32[0]",
    ),
    (
        "logical_xor",
        lambda: ops.logical_xor(p((2,), og.boolean), p((2,), og.boolean)),
        "boolean[2]",
    ),
    ("bitwise_not_int", lambda: bw.bitwise_not(p((2,), og.u64)), "u64[2]"),
    ("bitwise_not_bool", lambda: bw.bitwise_not(p((2,), og.boolean)), "boolean[2]"),
    ("bitwise_and", lambda: bw.bitwise_and(p((2,), og.i8), p((2,), og.i8)), "i8[2]"),
    (
        "bitwise_or_bool",
        lambda: bw.bitwise_or(p((2,), og.boolean), p((2,), og.boolean)),
        "boolean[2]",
    ),
    ("bitwise_xor", lambda: bw.bitwise_xor(p((2,), og.u32), p((2,), og.u32)), "u32[2]"),
    ("shift_left", lambda: bw.shift_left(p((2,), og.i32), p((2,), og.i32)), "i32[2]"),
    ("shift_right_uint", lambda: bw.shift_right(p((2,), og.u8), p((2,), og.u8)), "u8[2]"),
    ("shift_by_name", lambda: bw.BitShift("right")(p((2,), og.i64), p((2,), og.i64)), "i64[2]"),
    *((f"{f.__name__}", lambda f=f: f(p((2, 3), og.f16)), "f16[2,3]") for f in TRIGONOMETRIC),
    *((f"{f.__name__}", lambda f=f: f(p((3,), og.f64)), "f64[3]") for f in HYPERBOLIC),
    ("atan2", lambda: tg.atan2(p((2,), og.bf16), p((2,), og.bf16)), "bf16[2]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    ("erf_int", lambda: ops.erf(p((2,), og.i32)), "Erf: input element type i32 is not supported"),
    (
        "reciprocal_int",
        lambda: ops.reciprocal(p((2,), og.i32)),
        "Reciprocal: input element type i32",
    ),
    ("ceiling_bool", lambda: ops.ceiling(p((2,), og.boolean)), "Ceil: input element type boolean"),
    ("floor_bool", lambda: ops.floor(p((2,), og.boolean)), "Floor: input element type boolean"),
    ("round_bool", lambda: ops.round(p((2,), og.boolean)), "Round: input element type boolean"),
    (
        "round_mode",
        lambda: ops.round(p((2,)), "half_up"),
        "Round: mode must be one of 'half_to_even', 'half_away_from_zero' (or a RoundMode member), got 'half_up'",
    ),
    ("sign_bool", lambda: ops.sign(p((2,), og.boolean)), "Sign: input element type boolean"),
    ("is_nan_int", lambda: ops.is_nan(p((2,), og.i32)), "IsNaN: input element type i32"),
    ("is_inf_bool", lambda: ops.is_inf(p((2,), og.boolean)), "IsInf: input element type boolean"),
    ("is_finite_int", lambda: ops.is_finite(p((2,), og.u8)), "IsFinite: input element type u8"),
    (
        "mod_bool",
        lambda: ops.mod(p((2,), og.boolean), p((2,), og.boolean)),
        "Mod: input element type boolean",
    ),
    (
        "mod_types",
        lambda: ops.mod(p((2,)), p((2,), og.f64)),
        "Mod: element types of inputs differ: f32 vs f64",
    ),
    ("mod_shapes", lambda: ops.mod(p((2,)), p((3,))), "Mod: shapes of inputs differ: [2] vs [3]"),
    (
        "divide_constant_zero",
        lambda: ops.divide(p((2,), og.i32), i32(1, 0)),
        "Div: integer division by zero: the divisor (input 1) is a constant holding 0",
    ),
    (
        "divide_broadcast_constant_zero",
        lambda: ops.divide(p((2, 3), og.u8), ops.broadcast(og.constant(0, og.u8), (2, 3))),
        "Div: integer division by zero",
    ),
    (
        "divide_reshaped_constant_zero",
        lambda: ops.divide(
            p((2,), og.i32), ops.reshape(og.constant(np.zeros((1, 2), np.int32)), (2,))
        ),
        "Div: integer division by zero",
    ),
    ("divide_sugar_zero", lambda: p((2,), og.i64) / 0, "Div: integer division by zero"),
    (
        "mod_constant_zero",
        lambda: ops.mod(p((2,), og.i32), i32(0, 4)),
        "Mod: integer division by zero",
    ),
    (
        "xor_int",
        lambda: ops.logical_xor(p((2,), og.i32), p((2,), og.i32)),
        "Xor: input element type i32",
    ),
    ("bitwise_not_float", lambda: bw.bitwise_not(p((2,))), "BitwiseNot: input element type f32"),
    (
        "bitwise_and_float",
        lambda: bw.bitwise_and(p((2,)), p((2,))),
        "BitwiseAnd: input element type f32",
    ),
    (
        "bitwise_or_types",
        lambda: bw.bitwise_or(p((2,), og.i8), p((2,), og.u8)),
        "BitwiseOr: element types of inputs differ: i8 vs u8",
    ),
    (
        "bitwise_xor_shapes",
        lambda: bw.bitwise_xor(p((2,), og.i8), p((1,), og.i8)),
        "BitwiseXor: shapes of inputs differ",
    ),
    (
        "shift_bool",
        lambda: bw.shift_left(p((2,), og.boolean), p((2,), og.boolean)),
        "BitShift: input element type boolean",
    ),
    ("shift_float", lambda: bw.shift_right(p((2,)), p((2,))), "BitShift: input element type f32"),
    (
        "shift_types",
        lambda: bw.shift_left(p((2,), og.i32), p((2,), og.u32)),
        "BitShift: element types of inputs differ: i32 vs u32",
    ),
    (
        "shift_direction",
        lambda: bw.BitShift("up"),
        "BitShift: direction must be one of 'left', 'right' (or a ShiftDirection member), got 'up'",
    ),
    *(
        (f"{f.__name__}_int", lambda f=f: f(p((2,), og.i32)), "input element type i32")
        for f in TRIGONOMETRIC + HYPERBOLIC
    ),
    (
        "atan2_int",
        lambda: tg.atan2(p((2,), og.i32), p((2,), og.i32)),
        "Atan2: input element type i32",
    ),
    (
        "atan2_types",
        lambda: tg.atan2(p((2,)), p((2,), og.f16)),
        "Atan2: element types of inputs differ",
    ),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_trigonometric_errors_name_the_op():
    for f in TRIGONOMETRIC + HYPERBOLIC:
        with pytest.raises(og.OpTypeError, match=rf"^{type(f(p((1,))).node.op).__name__}: "):
            f(p((1,), og.i32))


def test_constant_zero_divisor_error_names_source_line():
    with pytest.raises(og.OpTypeError, match=r"built at test_elementwise_type_rules\.py:\d+"):
        ops.divide(p((2,), og.i32), i32(0, 0))


def test_enum_attributes_are_canonical():
    by_name = ops.round(p((2,)), "half_away_from_zero").node.op
    assert by_name.mode is ops.RoundMode.HALF_AWAY_FROM_ZERO
    assert by_name == ops.Round(ops.RoundMode.HALF_AWAY_FROM_ZERO)
    assert ops.Round().mode is ops.RoundMode.HALF_TO_EVEN
    assert (
        bw.shift_right(p((2,), og.i8), p((2,), og.i8)).node.op.direction is bw.ShiftDirection.RIGHT
    )
    assert bw.BitShift("left") == bw.BitShift(bw.ShiftDirection.LEFT)


def test_class_properties():
    assert all(c.commutative for c in (ops.Xor, bw.BitwiseAnd, bw.BitwiseOr, bw.BitwiseXor))
    assert not ops.Mod.commutative and not bw.BitShift.commutative and not tg.Atan2.commutative
    not_differentiable = (ops.IsNaN, ops.IsInf, ops.IsFinite, ops.Xor, bw.BitwiseNot, bw.BitShift)
    assert not any(c.differentiable for c in not_differentiable)
    assert all(c.has_vjp() for c in (ops.Erf, ops.Floor, ops.Round, ops.Mod, tg.Acosh, tg.Atan2))
