"""Type rules of the pooling family: accepted cases and one test per error."""

import pytest

import opgraph as og
from opgraph import ops
from opgraph.ops.convolution import AutoPad


def p(shape, t=og.f32):
    return og.parameter(t, shape)


ACCEPTED = [
    ("avg_2d", lambda: ops.avg_pool(p((1, 3, 5, 5)), (2, 2)), "f32[1,3,4,4]"),
    ("avg_1d_strided", lambda: ops.avg_pool(p((2, 1, 7), og.f16), (3,), (2,)), "f16[2,1,3]"),
    (
        "avg_3d",
        lambda: ops.avg_pool(p((1, 1, 4, 4, 4), og.bf16), (2, 2, 2), (2, 2, 2)),
        "bf16[1,1,2,2,2]",
    ),
    (
        "avg_padded_only_above",  # nGraph avg_pool_2d_2channel_2image_padded_only_above
        lambda: ops.avg_pool(p((2, 1, 3, 3)), (2, 2), None, (0, 0), (1, 1)),
        "f32[2,1,3,3]",
    ),
    (
        "avg_window_in_padding_counted",
        lambda: ops.avg_pool(p((1, 1, 2)), (2,), (1,), (2,), (0,), include_padding=True),
        "f32[1,1,3]",
    ),
    (
        "avg_ceil_mode_extra_window",
        lambda: ops.avg_pool(p((1, 1, 5)), (2,), (2,), ceil_mode=True),
        "f32[1,1,3]",
    ),
    (
        "avg_ceil_mode_drops_window_starting_in_padding",
        lambda: ops.avg_pool(p((1, 1, 4)), (3,), (2,), (0,), (2,), ceil_mode=True),
        "f32[1,1,2]",
    ),
    ("avg_flag_as_int", lambda: ops.avg_pool(p((1, 1, 4)), (2,), ceil_mode=1), "f32[1,1,3]"),
    (
        "avg_same_upper",
        lambda: ops.avg_pool(p((1, 1, 5, 6)), (3, 2), (2, 2), auto_pad="same_upper"),
        "f32[1,1,3,3]",
    ),
    ("max_2d", lambda: ops.max_pool(p((1, 3, 5, 5)), (3, 3), (2, 2)), "f32[1,3,2,2]"),
    ("max_integer", lambda: ops.max_pool(p((1, 1, 4), og.i8), (2,), (2,)), "i8[1,1,2]"),
    ("max_unsigned", lambda: ops.max_pool(p((1, 1, 4), og.u64), (2,)), "u64[1,1,3]"),
    (
        "max_dilated",
        lambda: ops.max_pool(p((1, 1, 7, 7)), (2, 3), dilations=(3, 2)),
        "f32[1,1,4,3]",
    ),
    (
        "max_dilated_ceil",
        lambda: ops.max_pool(p((1, 1, 6)), (2,), (2,), (1,), (1,), (2,), ceil_mode=True),
        "f32[1,1,4]",
    ),
    ("max_valid", lambda: ops.max_pool(p((1, 1, 6)), (4,), auto_pad=AutoPad.VALID), "f32[1,1,3]"),
    (
        "max_with_indices",
        lambda: ops.tuple_(*ops.max_pool_with_indices(p((2, 2, 4, 4), og.f16), (2, 2), (2, 2))),
        "(f16[2,2,2,2], i64[2,2,2,2])",
    ),
    (
        "max_backprop",
        lambda: ops.max_pool_backprop(p((1, 2, 5)), p((1, 2, 2)), (2,), (2,)),
        "f32[1,2,5]",
    ),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    ("avg_rank", lambda: ops.avg_pool(p((2, 4)), (2,)), "AvgPool: data must have rank >= 3"),
    ("avg_integer", lambda: ops.avg_pool(p((1, 1, 4), og.i32), (2,)), "input element type i32"),
    (
        "max_boolean",
        lambda: ops.max_pool(p((1, 1, 4), og.boolean), (2,)),
        "input element type boolean",
    ),
    (
        "window_length",
        lambda: ops.avg_pool(p((1, 1, 4, 4)), (2,)),
        "window_shape (2,) has 1 entries, expected 2",
    ),
    ("window_zero", lambda: ops.max_pool(p((1, 1, 4)), (0,)), "window_shape[0] must be >= 1"),
    (
        "window_type",
        lambda: ops.max_pool(p((1, 1, 4)), (1.5,)),
        "window_shape[0] must be an integer",
    ),
    ("stride_zero", lambda: ops.avg_pool(p((1, 1, 4)), (2,), (0,)), "strides[0] must be >= 1"),
    (
        "strides_length",
        lambda: ops.max_pool(p((1, 1, 4)), (2,), (1, 1)),
        "strides (1, 1) has 2 entries",
    ),
    (
        "padding_negative",
        lambda: ops.avg_pool(p((1, 1, 4, 4)), (2, 2), None, (0, -1)),
        "padding_below[1] must be >= 0",
    ),
    (
        "dilation_zero",
        lambda: ops.max_pool(p((1, 1, 4)), (2,), dilations=(0,)),
        "dilations[0] must be >= 1",
    ),
    (
        "window_too_large",
        lambda: ops.max_pool(p((1, 1, 3)), (4,)),
        "spatial axis 0: window size 4 exceeds the padded data size 3",
    ),
    (
        "avg_window_in_padding",
        lambda: ops.avg_pool(p((1, 1, 2)), (2,), (1,), (2,), (0,)),
        "spatial axis 0: window 0 lies entirely in the padding",
    ),
    (
        "max_dilated_window_straddles_data",  # taps at -1 and 2 of a 2-element axis
        lambda: ops.max_pool(p((1, 1, 2)), (2,), None, (1,), (1,), (3,)),
        "spatial axis 0: window 0 lies entirely in the padding",
    ),
    (
        "ceil_mode_type",
        lambda: ops.max_pool(p((1, 1, 4)), (2,), ceil_mode="yes"),
        "ceil_mode must be a bool",
    ),
    (
        "include_padding_type",
        lambda: ops.avg_pool(p((1, 1, 4)), (2,), include_padding=2),
        "include_padding must be a bool",
    ),
    (
        "auto_pad_with_padding",
        lambda: ops.avg_pool(p((1, 1, 4)), (2,), padding_above=(1,), auto_pad="valid"),
        "must not be given with auto_pad=valid",
    ),
    (
        "auto_pad_name",
        lambda: ops.max_pool(p((1, 1, 4)), (2,), auto_pad="full"),
        "auto_pad must be one of",
    ),
    (
        "backprop_cotangent_shape",
        lambda: ops.max_pool_backprop(p((1, 2, 5)), p((1, 2, 3)), (2,), (2,)),
        "output cotangent shape [1, 2, 3] differs from the max pool's result shape [1, 2, 2]",
    ),
    (
        "backprop_types",
        lambda: ops.max_pool_backprop(p((1, 2, 5)), p((1, 2, 2), og.f64), (2,), (2,)),
        "element types of data and output cotangent differ",
    ),
    (
        "backprop_integer",
        lambda: ops.max_pool_backprop(p((1, 2, 5), og.i32), p((1, 2, 2), og.i32), (2,), (2,)),
        "input element type i32",
    ),
    (
        "with_indices_rank",
        lambda: ops.max_pool_with_indices(p((4,)), (2,)),
        "MaxPoolWithIndices: data must have rank >= 3",
    ),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_canonical_attributes():
    op = ops.max_pool(p((1, 1, 5, 6)), (3, 2), (2, 2), auto_pad="same_lower").node.op
    assert op.auto_pad is AutoPad.EXPLICIT
    assert (op.padding_below, op.padding_above, op.dilations) == ((1, 0), (1, 0), (1, 1))
    op = ops.avg_pool(p((1, 1, 5)), [2]).node.op
    assert (op.window_shape, op.strides, op.padding_below, op.padding_above) == (
        (2,),
        (1,),
        (0,),
        (0,),
    )
