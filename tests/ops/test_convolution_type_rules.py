"""Type rules of the convolution family: accepted cases and one test per error."""

import pytest

import opgraph as og
from opgraph import ops
from opgraph.ops.convolution import AutoPad


def p(shape, t=og.f32):
    return og.parameter(t, shape)


def conv(x_shape, w_shape, t=og.f32, **attributes):
    return ops.convolution(p(x_shape, t), p(w_shape, t), **attributes)


def transposed(x_shape, w_shape, t=og.f32, **attributes):
    return ops.convolution_backprop_data(p(x_shape, t), p(w_shape, t), **attributes)


def filters(x_shape, ct_shape, filter_shape, t=og.f32, **attributes):
    return ops.convolution_backprop_filters(
        p(x_shape, t), p(ct_shape, t), filter_shape, **attributes
    )


ACCEPTED = [
    ("conv_2d", lambda: conv((1, 3, 5, 5), (4, 3, 3, 3)), "f32[1,4,3,3]"),
    ("conv_1d", lambda: conv((2, 1, 7), (3, 1, 2), og.f16), "f16[2,3,6]"),
    ("conv_3d", lambda: conv((1, 2, 4, 5, 6), (1, 2, 2, 2, 2), og.bf16), "bf16[1,1,3,4,5]"),
    ("conv_strided", lambda: conv((1, 1, 7, 6), (1, 1, 3, 2), strides=(2, 3)), "f32[1,1,3,2]"),
    ("conv_dilated", lambda: conv((1, 1, 7, 6), (1, 1, 3, 2), dilations=(3, 2)), "f32[1,1,1,4]"),
    (
        "conv_padded",
        lambda: conv((1, 1, 3, 5), (2, 1, 2, 2), padding_below=(2, 3), padding_above=(4, 5)),
        "f32[1,2,8,12]",
    ),
    (
        "conv_negative_padding",
        lambda: conv((1, 1, 5, 5), (1, 1, 2, 2), padding_below=(-1, 0), padding_above=(0, -2)),
        "f32[1,1,3,2]",
    ),
    (
        "conv_data_dilated",  # nGraph convolution_2d_1item_2o1i_data_dilated
        lambda: conv((1, 1, 3, 5), (2, 1, 2, 2), data_dilations=(2, 2)),
        "f32[1,2,4,8]",
    ),
    ("conv_grouped", lambda: conv((1, 4, 5), (6, 2, 3), groups=2), "f32[1,6,3]"),
    ("conv_depthwise", lambda: conv((1, 8, 5, 5), (8, 1, 3, 3), groups=8), "f32[1,8,3,3]"),
    ("conv_empty_batch", lambda: conv((0, 2, 4), (3, 2, 2)), "f32[0,3,3]"),
    (
        "conv_padding_only_data",
        lambda: conv((1, 1, 0), (1, 1, 1), padding_above=(2,)),
        "f32[1,1,2]",
    ),
    (
        "conv_same_upper",
        lambda: conv((1, 1, 5, 6), (1, 1, 3, 4), strides=(2, 1), auto_pad="same_upper"),
        "f32[1,1,3,6]",
    ),
    (
        "conv_same_lower_upper_case",
        lambda: conv((1, 1, 7), (1, 1, 4), strides=(3,), auto_pad="SAME_LOWER"),
        "f32[1,1,3]",
    ),
    ("conv_valid", lambda: conv((1, 1, 7), (1, 1, 4), auto_pad=AutoPad.VALID), "f32[1,1,4]"),
    ("transposed_2d", lambda: transposed((1, 2, 3, 3), (2, 4, 3, 3)), "f32[1,4,5,5]"),
    (
        "transposed_strided_padded",
        lambda: transposed(
            (1, 2, 3, 4),
            (2, 1, 3, 3),
            strides=(2, 2),
            padding_below=(1, 1),
            padding_above=(1, 0),
            output_padding=(1, 0),
        ),
        "f32[1,1,6,8]",
    ),
    (
        "transposed_grouped_dilated",
        lambda: transposed((1, 4, 3), (4, 3, 2), dilations=(2,), groups=2),
        "f32[1,6,5]",
    ),
    (
        "transposed_output_shape",
        lambda: transposed((1, 1, 3), (1, 1, 3), strides=(2,), output_shape=(8,)),
        "f32[1,1,8]",
    ),
    (
        "transposed_negative_padding",
        lambda: transposed((1, 1, 2), (1, 1, 2), padding_below=(-1,)),
        "f32[1,1,4]",
    ),
    ("filters_2d", lambda: filters((2, 3, 5, 5), (2, 4, 3, 3), (3, 3)), "f32[4,3,3,3]"),
    (
        "filters_strided_ambiguous_size",  # out 2 fits filters of 3 and 4 with stride 2
        lambda: filters((1, 1, 6), (1, 1, 2), (4,), strides=(2,)),
        "f32[1,1,4]",
    ),
    (
        "filters_grouped_data_dilated",
        lambda: filters((1, 4, 3), (1, 6, 4), (2,), data_dilations=(2,), groups=2),
        "f32[6,2,2]",
    ),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    ("conv_rank", lambda: conv((1, 3), (4, 3)), "Convolution: data must have rank >= 3"),
    ("conv_filter_rank", lambda: conv((1, 3, 5, 5), (4, 3, 3)), "filters must have rank 4"),
    (
        "conv_types",
        lambda: ops.convolution(p((1, 1, 3)), p((1, 1, 2), og.f64)),
        "element types of data and filters differ: f32 vs f64",
    ),
    ("conv_integer", lambda: conv((1, 1, 3), (1, 1, 2), og.i32), "input element type i32"),
    (
        "conv_strides_length",
        lambda: conv((1, 1, 3, 3), (1, 1, 2, 2), strides=(1,)),
        "strides (1,) has 1 entries, expected 2",
    ),
    (
        "conv_stride_zero",
        lambda: conv((1, 1, 3, 3), (1, 1, 2, 2), strides=(1, 0)),
        "strides[1] must be >= 1",
    ),
    (
        "conv_dilation_zero",
        lambda: conv((1, 1, 3), (1, 1, 2), dilations=(0,)),
        "dilations[0] must be >= 1",
    ),
    (
        "conv_data_dilation_zero",
        lambda: conv((1, 1, 3), (1, 1, 2), data_dilations=(0,)),
        "data_dilations[0] must be >= 1",
    ),
    (
        "conv_padding_length",
        lambda: conv((1, 1, 3), (1, 1, 2), padding_below=(0, 0)),
        "padding_below (0, 0) has 2 entries, expected 1",
    ),
    (
        "conv_groups_zero",
        lambda: conv((1, 2, 3), (2, 2, 2), groups=0),
        "groups must be >= 1, got 0",
    ),
    (
        "conv_groups_type",
        lambda: conv((1, 2, 3), (2, 1, 2), groups=2.0),
        "groups must be an integer",
    ),
    ("conv_stride_type", lambda: conv((1, 2, 3), (2, 2, 2), strides=(True,)), "must be an integer"),
    (
        "conv_channels_groups",
        lambda: conv((1, 3, 4), (2, 1, 2), groups=2),
        "data channels 3 are not divisible by groups 2",
    ),
    (
        "conv_filters_groups",
        lambda: conv((1, 4, 4), (3, 2, 2), groups=2),
        "filter count 3 is not divisible by groups 2",
    ),
    (
        "conv_filter_channels",
        lambda: conv((1, 4, 4), (2, 3, 2)),
        "filters take 3 channel(s) per group, data has 4 channel(s)",
    ),
    (
        "conv_empty_padded_data",
        lambda: conv((1, 1, 3), (1, 1, 1), padding_below=(-2,), padding_above=(-1,)),
        "spatial axis 0: data size after dilation and padding is 0, must be > 0",
    ),
    (
        "conv_empty_filter",
        lambda: conv((1, 1, 3), (1, 1, 0)),
        "spatial axis 0: filter size must be >= 1",
    ),
    (
        "conv_filter_too_large",
        lambda: conv((1, 1, 4, 4), (1, 1, 2, 3), dilations=(1, 2)),
        "spatial axis 1: dilated filter size 5 exceeds the padded data size 4",
    ),
    (
        "conv_auto_pad_with_padding",
        lambda: conv((1, 1, 4), (1, 1, 2), padding_below=(1,), auto_pad="same_upper"),
        "must not be given with auto_pad=same_upper",
    ),
    (
        "conv_auto_pad_name",
        lambda: conv((1, 1, 4), (1, 1, 2), auto_pad="same"),
        "auto_pad must be one of 'explicit'",
    ),
    (
        "transposed_rank",
        lambda: transposed((2, 3), (3, 3)),
        "ConvolutionBackpropData: data must have rank >= 3",
    ),
    ("transposed_filter_rank", lambda: transposed((1, 2, 3), (2, 2)), "filters must have rank 3"),
    (
        "transposed_integer",
        lambda: transposed((1, 1, 3), (1, 1, 2), og.i8),
        "input element type i8",
    ),
    (
        "transposed_types",
        lambda: ops.convolution_backprop_data(p((1, 1, 3)), p((1, 1, 2), og.f16)),
        "element types of data and filters differ",
    ),
    (
        "transposed_filter_channels",
        lambda: transposed((1, 4, 3), (3, 1, 2)),
        "filters have 3 input channel(s) (axis 0), data has 4",
    ),
    (
        "transposed_groups",
        lambda: transposed((1, 3, 3), (3, 1, 2), groups=2),
        "data channels 3 are not divisible by groups 2",
    ),
    (
        "transposed_output_padding",
        lambda: transposed((1, 1, 3), (1, 1, 2), output_padding=(-1,)),
        "output_padding[0] must be >= 0",
    ),
    (
        "transposed_empty_output",
        lambda: transposed((1, 1, 1), (1, 1, 1), padding_below=(1,), padding_above=(1,)),
        "spatial axis 0: output size -1 must be > 0",
    ),
    (
        "transposed_empty_filter",
        lambda: transposed((1, 1, 3), (1, 1, 0)),
        "filter size must be >= 1",
    ),
    (
        "transposed_output_shape_and_padding",
        lambda: transposed((1, 1, 3), (1, 1, 2), output_shape=(5,), output_padding=(1,)),
        "give output_shape or output_padding, not both",
    ),
    (
        "transposed_output_shape_small",
        lambda: transposed((1, 1, 3), (1, 1, 2), strides=(2,), output_shape=(5,)),
        "output_shape (5,) is smaller than the transposed convolution's natural size (6,)",
    ),
    (
        "transposed_output_shape_length",
        lambda: transposed((1, 1, 3, 3), (1, 1, 2, 2), output_shape=(5,)),
        "output_shape (5,) must have one entry per spatial axis",
    ),
    (
        "filters_cotangent_shape",
        lambda: filters((1, 2, 5, 5), (1, 3, 3, 4), (3, 3)),
        "output cotangent shape [1, 3, 3, 4] differs from the forward convolution's result shape [1, 3, 3, 3]",
    ),
    (
        "filters_cotangent_rank",
        lambda: filters((1, 2, 5, 5), (1, 3, 9), (3, 3)),
        "output cotangent must have rank 4",
    ),
    (
        "filters_shape_length",
        lambda: filters((1, 2, 5, 5), (1, 3, 3, 3), (3,)),
        "filter_shape (3,) has 1 entries, expected 2",
    ),
    (
        "filters_shape_zero",
        lambda: filters((1, 1, 5), (1, 1, 5), (0,)),
        "filter_shape[0] must be >= 1",
    ),
    (
        "filters_groups_zero",
        lambda: filters((1, 2, 5), (1, 2, 3), (3,), groups=0),
        "groups must be >= 1",
    ),
    (
        "filters_groups",
        lambda: filters((1, 3, 5), (1, 2, 3), (3,), groups=2),
        "data channels 3 are not divisible by groups 2",
    ),
    (
        "filters_types",
        lambda: ops.convolution_backprop_filters(p((1, 1, 3)), p((1, 1, 2), og.f64), (2,)),
        "element types of data and output cotangent differ",
    ),
    ("filters_rank", lambda: filters((1, 3), (1, 3), (1,)), "data must have rank >= 3"),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_canonical_attributes():
    op = conv((1, 1, 5, 6), (1, 1, 3, 4), strides=(2, 1), auto_pad="same_lower").node.op
    assert op.auto_pad is AutoPad.EXPLICIT
    assert (op.padding_below, op.padding_above) == ((1, 2), (1, 1))
    assert (op.dilations, op.data_dilations) == ((1, 1), (1, 1))
    op = transposed((1, 1, 3), (1, 1, 3), strides=(2,), output_shape=(8,)).node.op
    assert (op.output_padding, op.padding_below, op.dilations) == ((1,), (0,), (1,))
    op = filters((1, 1, 5), (1, 1, 3), [3]).node.op
    assert (op.filter_shape, op.strides, op.padding_above) == ((3,), (1,), (0,))


def test_attributes_accept_lists_and_enum_members():
    a = conv((1, 1, 5), (1, 1, 2), strides=[2], auto_pad=AutoPad.SAME_UPPER).node.op
    b = conv((1, 1, 5), (1, 1, 2), strides=(2,), auto_pad="same_upper").node.op
    assert a == b
