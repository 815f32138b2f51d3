"""Type rules of linear quantization: accepted cases and one test per error."""

import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


ACCEPTED = [
    ("quantize_u8", lambda: ops.quantize_linear(p((2, 3)), p(()), p((), og.u8)), "u8[2,3]"),
    (
        "quantize_i16",
        lambda: ops.quantize_linear(p((4,), og.f16), p((), og.f16), p((), og.i16)),
        "i16[4]",
    ),
    (
        "quantize_per_axis",
        lambda: ops.quantize_linear(p((2, 3, 4)), p((3,)), p((3,), og.i8), axis=1),
        "i8[2,3,4]",
    ),
    (
        "quantize_negative_axis",
        lambda: ops.quantize_linear(
            p((2, 3, 4), og.bf16), p((4,), og.bf16), p((4,), og.u8), axis=-1
        ),
        "u8[2,3,4]",
    ),
    ("quantize_default_zero_point", lambda: ops.quantize_linear(p((2,)), p(())), "u8[2]"),
    (
        "quantize_element_type_name",
        lambda: ops.quantize_linear(p((2,)), p(()), element_type="i8"),
        "i8[2]",
    ),
    (
        "quantize_matching_element_type",
        lambda: ops.quantize_linear(p((2,)), p(()), p((), og.u16), element_type=og.u16),
        "u16[2]",
    ),
    (
        "dequantize_u8",
        lambda: ops.dequantize_linear(p((2, 3), og.u8), p(()), p((), og.u8)),
        "f32[2,3]",
    ),
    ("dequantize_i32", lambda: ops.dequantize_linear(p((5,), og.i32), p((), og.f64)), "f64[5]"),
    (
        "dequantize_per_axis",
        lambda: ops.dequantize_linear(p((3, 2), og.i8), p((3,), og.f16), p((3,), og.i8), axis=0),
        "f16[3,2]",
    ),
    (
        "matmul_integer_batched_per_column",
        lambda: ops.matmul_integer(
            p((2, 3, 4), og.u8), p((4, 5), og.i8), p((), og.u8), p((5,), og.i8)
        ),
        "i32[2,3,5]",
    ),
    (
        "matmul_integer_defaults",
        lambda: ops.matmul_integer(p((3, 4), og.i8), p((4, 2), og.u8)),
        "i32[3,2]",
    ),
    (
        "conv_integer_strided_per_channel",
        lambda: ops.conv_integer(
            p((1, 3, 8, 8), og.u8),
            p((4, 3, 3, 3), og.i8),
            p((), og.u8),
            p((4,), og.i8),
            strides=(2, 2),
            padding_below=(1, 1),
            padding_above=(1, 1),
        ),
        "i32[1,4,4,4]",
    ),
    (
        "conv_integer_grouped_1d",
        lambda: ops.conv_integer(p((2, 4, 9), og.i8), p((6, 2, 3), og.i8), groups=2),
        "i32[2,6,7]",
    ),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    (
        "quantize_integer_input",
        lambda: ops.quantize_linear(p((2,), og.i32), p((), og.i32), p((), og.u8)),
        "QuantizeLinear: x element type i32 is not supported",
    ),
    (
        "quantize_scale_type",
        lambda: ops.quantize_linear(p((2,)), p((), og.f64), p((), og.u8)),
        "scale element type f64 differs from x's f32",
    ),
    (
        "quantize_zero_point_type",
        lambda: ops.quantize_linear(p((2,)), p(()), p(())),
        "zero_point element type f32 is not supported",
    ),
    (
        "quantize_zero_point_32_bit",
        lambda: ops.quantize_linear(p((2,)), p(()), p((), og.i32)),
        "zero_point element type i32 is not supported",
    ),
    (
        "quantize_element_type_mismatch",
        lambda: ops.quantize_linear(p((2,)), p(()), p((), og.u8), element_type=og.i8),
        "element_type i8 differs from zero_point's u8",
    ),
    (
        "quantize_element_type_unsupported",
        lambda: ops.quantize_linear(p((2,)), p(()), element_type=og.u32),
        "element_type u32 is not one of u8, i8, u16, i16",
    ),
    (
        "quantize_element_type_name",
        lambda: ops.quantize_linear(p((2,)), p(()), p((), og.u8), element_type="uint8"),
        "unknown element type 'uint8'",
    ),
    (
        "quantize_per_tensor_scale_shape",
        lambda: ops.quantize_linear(p((2, 3)), p((3,)), p((3,), og.u8)),
        "scale must be a scalar (per-tensor: axis=None), got f32[3]",
    ),
    (
        "quantize_per_axis_scale_shape",
        lambda: ops.quantize_linear(p((2, 3)), p((2,)), p((3,), og.u8), axis=1),
        "scale must be shape [3] (x's axis 1), got f32[2]",
    ),
    (
        "quantize_per_axis_zero_point_shape",
        lambda: ops.quantize_linear(p((2, 3)), p((3,)), p((), og.u8), axis=1),
        "zero_point must be shape [3] (x's axis 1), got u8[]",
    ),
    (
        "quantize_axis_range",
        lambda: ops.quantize_linear(p((2, 3)), p((3,)), p((3,), og.u8), axis=2),
        "axis 2 is out of range for rank 2",
    ),
    (
        "quantize_axis_type",
        lambda: ops.quantize_linear(p((2, 3)), p((3,)), p((3,), og.u8), axis="1"),
        "axis must be an integer",
    ),
    (
        "dequantize_float_input",
        lambda: ops.dequantize_linear(p((2,)), p(()), p(())),
        "DequantizeLinear: x element type f32 is not supported",
    ),
    (
        "dequantize_u32_input",
        lambda: ops.dequantize_linear(p((2,), og.u32), p(()), p((), og.u32)),
        "x element type u32 is not supported",
    ),
    (
        "dequantize_scale_type",
        lambda: ops.dequantize_linear(p((2,), og.u8), p((), og.i32), p((), og.u8)),
        "scale element type i32 is not supported",
    ),
    (
        "dequantize_zero_point_type",
        lambda: ops.dequantize_linear(p((2,), og.u8), p(()), p((), og.i8)),
        "zero_point element type i8 differs from x's u8",
    ),
    (
        "dequantize_per_axis_shape",
        lambda: ops.dequantize_linear(p((2, 3), og.u8), p((2,)), p((2,), og.u8), axis=1),
        "scale must be shape [3] (x's axis 1)",
    ),
    (
        "dequantize_arity",
        lambda: ops.DequantizeLinear()(p((2,), og.u8), p(())),
        "DequantizeLinear: expected 3 input(s), got 2",
    ),
    (
        "matmul_integer_float_operand",
        lambda: ops.matmul_integer(p((2, 3)), p((3, 2), og.i8)),
        "a element type f32 is not supported",
    ),
    (
        "matmul_integer_batched_weights",
        lambda: ops.matmul_integer(p((2, 3), og.u8), p((2, 3, 2), og.i8)),
        "b must be a matrix (K, N)",
    ),
    (
        "matmul_integer_inner_mismatch",
        lambda: ops.matmul_integer(p((2, 3), og.u8), p((4, 2), og.i8)),
        "contracted dimensions differ",
    ),
    (
        "matmul_integer_zero_point_type",
        lambda: ops.matmul_integer(p((2, 3), og.u8), p((3, 2), og.i8), p((), og.i8)),
        "a_zero_point element type i8 differs from its operand's u8",
    ),
    (
        "matmul_integer_per_row_zero_point",
        lambda: ops.matmul_integer(p((2, 3), og.u8), p((3, 2), og.i8), p((2,), og.u8)),
        "a_zero_point must be a scalar",
    ),
    (
        "matmul_integer_zero_point_length",
        lambda: ops.matmul_integer(
            p((2, 3), og.u8), p((3, 2), og.i8), p((), og.u8), p((3,), og.i8)
        ),
        "b_zero_point must be a scalar or shape [2]",
    ),
    (
        "conv_integer_channels",
        lambda: ops.conv_integer(p((1, 3, 8, 8), og.u8), p((4, 2, 3, 3), og.i8)),
        "filters take 2 channel(s) per group",
    ),
    (
        "conv_integer_float_filters",
        lambda: ops.conv_integer(p((1, 3, 8, 8), og.u8), p((4, 3, 3, 3))),
        "w element type f32 is not supported",
    ),
    (
        "conv_integer_zero_point_length",
        lambda: ops.conv_integer(
            p((1, 3, 8, 8), og.u8), p((4, 3, 3, 3), og.i8), None, p((3,), og.i8)
        ),
        "w_zero_point must be a scalar or shape [4]",
    ),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_canonical_attributes():
    q = ops.quantize_linear(p((2, 3)), p((3,)), p((3,), og.i8), axis=-1).node.op
    assert (q.axis, q.element_type) == (1, og.i8)
    assert ops.dequantize_linear(p((2, 3), og.u8), p((2,)), axis=-2).node.op.axis == 0
