"""Type rules of the ordering ops (arg_max, arg_min, top_k, cumsum): accepted cases and one
test per error."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


def types(values):
    return ", ".join(str(v.type) for v in values)


ACCEPTED = [
    ("arg_max", lambda: ops.arg_max(p((2, 3)), 1), "i64[2]"),
    ("arg_max_negative_axis", lambda: ops.arg_max(p((2, 3, 4), og.u8), -2), "i64[2,4]"),
    (
        "arg_max_keep_dims_i32",
        lambda: ops.arg_max(p((2, 3)), 0, True, index_element_type=og.i32),
        "i32[1,3]",
    ),
    (
        "arg_max_index_by_name",
        lambda: ops.arg_max(p((3,), og.i8), 0, index_element_type="i32"),
        "i32[]",
    ),
    (
        "arg_max_index_by_dtype",
        lambda: ops.arg_max(p((3,)), 0, index_element_type=np.int32),
        "i32[]",
    ),
    ("arg_min_last", lambda: ops.arg_min(p((2, 3), og.f16), 1, select_last_index=True), "i64[2]"),
    ("arg_min_empty_lanes", lambda: ops.arg_min(p((0, 3)), 1), "i64[0]"),
    ("cumsum", lambda: ops.cumsum(p((2, 3)), 1), "f32[2,3]"),
    (
        "cumsum_flags_int",
        lambda: ops.cumsum(p((2, 3), og.i8), -1, exclusive=True, reverse=True),
        "i8[2,3]",
    ),
    ("cumsum_empty", lambda: ops.cumsum(p((0,), og.u64), 0), "u64[0]"),
]

TOP_K_ACCEPTED = [
    ("top_k", lambda: ops.top_k(p((2, 5)), 3), "f32[2,3], i64[2,3]"),
    (
        "top_k_axis0_i32",
        lambda: ops.top_k(p((4, 2), og.i16), 2, 0, index_element_type="i32"),
        "i16[2,2], i32[2,2]",
    ),
    (
        "top_k_k_equals_dim",
        lambda: ops.top_k(p((2, 5)), 5, largest=False, sorted=False),
        "f32[2,5], i64[2,5]",
    ),
    ("top_k_zero", lambda: ops.top_k(p((2, 5), og.bf16), 0), "bf16[2,0], i64[2,0]"),
    ("top_k_empty_axis", lambda: ops.top_k(p((2, 0)), 0), "f32[2,0], i64[2,0]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


@pytest.mark.parametrize(
    ("case", "build", "expected"), TOP_K_ACCEPTED, ids=[c[0] for c in TOP_K_ACCEPTED]
)
def test_top_k_accepted(case, build, expected):
    values = build()
    assert isinstance(values, tuple) and len(values) == 2
    assert types(values) == expected


ERRORS = [
    (
        "arg_max_bool",
        lambda: ops.arg_max(p((2,), og.boolean), 0),
        "ArgMax: input element type boolean is not supported",
    ),
    (
        "arg_max_axis",
        lambda: ops.arg_max(p((2, 3)), 2),
        "ArgMax: axis 2 is out of range for rank 2",
    ),
    ("arg_max_scalar", lambda: ops.arg_max(p(()), 0), "ArgMax: axis 0 is out of range for rank 0"),
    (
        "arg_max_axis_float",
        lambda: ops.arg_max(p((2,)), 0.0),
        "ArgMax: axis must be an integer, got 0.0",
    ),
    (
        "arg_max_empty_axis",
        lambda: ops.arg_max(p((2, 0)), 1),
        "ArgMax: axis 1 of f32[2,0] is empty",
    ),
    (
        "arg_max_index_type",
        lambda: ops.arg_max(p((2,)), 0, index_element_type=og.f32),
        "ArgMax: index_element_type f32 is not i32 or i64",
    ),
    (
        "arg_max_index_unknown",
        lambda: ops.arg_max(p((2,)), 0, index_element_type="int"),
        "unknown element type 'int'",
    ),
    (
        "arg_max_index_overflow",
        lambda: ops.arg_max(p((2**31 + 1,), og.u8), 0, index_element_type=og.i32),
        "ArgMax: axis 0 of u8[2147483649] has 2147483649 elements, more than i32 indexes",
    ),
    (
        "arg_min_index_type",
        lambda: ops.arg_min(p((2,)), 0, index_element_type=og.u32),
        "ArgMin: index_element_type u32",
    ),
    (
        "arg_min_bool",
        lambda: ops.arg_min(p((2,), og.boolean), 0),
        "ArgMin: input element type boolean",
    ),
    ("arg_min_empty_axis", lambda: ops.arg_min(p((0,)), 0), "ArgMin: axis 0 of f32[0] is empty"),
    (
        "top_k_too_many",
        lambda: ops.top_k(p((2, 5)), 6),
        "TopK: k 6 exceeds the size 5 of axis 1 of f32[2,5]",
    ),
    ("top_k_negative_k", lambda: ops.top_k(p((2, 5)), -1), "TopK: k must be >= 0, got -1"),
    ("top_k_k_float", lambda: ops.top_k(p((2, 5)), 2.0), "TopK: k must be an integer"),
    ("top_k_bool", lambda: ops.top_k(p((2,), og.boolean), 1), "TopK: input element type boolean"),
    (
        "top_k_axis",
        lambda: ops.top_k(p((2, 5)), 1, axis=-3),
        "TopK: axis -3 is out of range for rank 2",
    ),
    ("top_k_scalar", lambda: ops.top_k(p(()), 0), "TopK: axis -1 is out of range for rank 0"),
    (
        "top_k_index_type",
        lambda: ops.top_k(p((2,)), 1, index_element_type=og.i16),
        "TopK: index_element_type i16 is not i32 or i64",
    ),
    (
        "cumsum_bool",
        lambda: ops.cumsum(p((2,), og.boolean), 0),
        "CumSum: input element type boolean",
    ),
    ("cumsum_axis", lambda: ops.cumsum(p((2, 3)), 2), "CumSum: axis 2 is out of range for rank 2"),
    ("cumsum_scalar", lambda: ops.cumsum(p(()), 0), "CumSum: axis 0 is out of range for rank 0"),
    ("cumsum_axis_tuple", lambda: ops.cumsum(p((2,)), (0,)), "CumSum: axis must be an integer"),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_canonical_attributes():
    assert ops.arg_max(p((2, 3)), -1).node.op.axis == 1
    assert ops.arg_min(p((2, 3)), 0, index_element_type="i32").node.op.index_element_type is og.i32
    values, indices = ops.top_k(p((2, 3, 4)), 2, axis=-2)
    assert values.node is indices.node and values.node.op.axis == 1
    assert ops.cumsum(p((2, 3)), -1).node.op.axis == 1
    assert ops.TopK(2, -1) != ops.TopK(2, -1, largest=False)


def test_differentiability_marks():
    assert not ops.ArgMax.differentiable and not ops.ArgMin.differentiable
    assert ops.TopK.has_vjp() and ops.CumSum.has_vjp()
