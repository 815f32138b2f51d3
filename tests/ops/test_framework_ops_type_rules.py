"""Type rules of the framework-level ops (linalg, activation, normalization, shaping, rnn,
resize): one case per accepted form and per error, matching stable message substrings."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.ops.activation import GeluApproximation
from opgraph.ops.resize import CoordinateTransformation, ResizeMode
from opgraph.ops.rnn import RnnActivation


def p(*shape, t=og.f32):
    return og.parameter(t, shape)


def pt(t, *shape):
    return og.parameter(t, shape)


def types(values):
    if isinstance(values, tuple):
        return "(" + ", ".join(str(v.type) for v in values) + ")"
    return str(values.type)


B, IN, H = 2, 3, 4

ACCEPTED = [
    # linalg
    ("matmul_2d", lambda: ops.matmul(p(2, 3), p(3, 4)), "f32[2,4]"),
    ("matmul_vectors", lambda: ops.matmul(p(4), p(4)), "f32[]"),
    ("matmul_vector_left", lambda: ops.matmul(p(3), p(2, 3, 4)), "f32[2,4]"),
    ("matmul_vector_right", lambda: ops.matmul(p(2, 3, 4), p(4)), "f32[2,3]"),
    ("matmul_batch_broadcast", lambda: ops.matmul(p(2, 1, 3, 4), p(5, 4, 2)), "f32[2,5,3,2]"),
    ("matmul_int", lambda: ops.matmul(pt(og.i8, 2, 3), pt(og.i8, 3)), "i8[2]"),
    ("matmul_empty_batch", lambda: ops.matmul(p(0, 2, 3), p(3, 1)), "f32[0,2,1]"),
    ("gemm", lambda: ops.gemm(p(2, 3), p(3, 4), p(2, 4)), "f32[2,4]"),
    (
        "gemm_transposed",
        lambda: ops.gemm(p(3, 2), p(4, 3), p(4), trans_a=True, trans_b=True),
        "f32[2,4]",
    ),
    ("gemm_no_c", lambda: ops.gemm(p(2, 3), p(3, 4), alpha=0.5), "f32[2,4]"),
    ("gemm_c_scalar", lambda: ops.gemm(p(2, 3), p(3, 4), p()), "f32[2,4]"),
    ("gemm_int", lambda: ops.gemm(pt(og.i32, 2, 3), pt(og.i32, 3, 1), alpha=2), "i32[2,1]"),
    # activation
    ("gelu", lambda: ops.gelu(p(2, 3)), "f32[2,3]"),
    ("gelu_tanh", lambda: ops.gelu(pt(og.bf16, 2), "tanh"), "bf16[2]"),
    ("elu", lambda: ops.elu(pt(og.f16, 2), 0.5), "f16[2]"),
    ("selu", lambda: ops.selu(pt(og.f64, 2)), "f64[2]"),
    ("leaky_relu", lambda: ops.leaky_relu(p(2), 0.2), "f32[2]"),
    ("prelu_broadcast", lambda: ops.prelu(p(2, 3, 4), p(3, 1)), "f32[2,3,4]"),
    ("prelu_axis", lambda: ops.prelu(p(2, 3, 4), p(3), axis=1), "f32[2,3,4]"),
    ("prelu_int", lambda: ops.prelu(pt(og.i32, 2), pt(og.i32, 1)), "i32[2]"),
    ("hard_sigmoid", lambda: ops.hard_sigmoid(p(2), 0.1, 0.6), "f32[2]"),
    ("hard_swish", lambda: ops.hard_swish(p(2)), "f32[2]"),
    ("softplus", lambda: ops.softplus(p(2)), "f32[2]"),
    ("softsign", lambda: ops.softsign(p(2)), "f32[2]"),
    ("mish", lambda: ops.mish(p(2)), "f32[2]"),
    ("clamp_float", lambda: ops.clamp(p(2), -1, 1), "f32[2]"),
    ("clamp_unsigned_beyond_range", lambda: ops.clamp(pt(og.u8, 2), -5.5, 1e9), "u8[2]"),
    ("clamp_no_bounds", lambda: ops.clamp(pt(og.i64, 2)), "i64[2]"),
    (
        "squared_difference",
        lambda: ops.squared_difference(pt(og.u16, 2, 1), pt(og.u16, 3)),
        "u16[2,3]",
    ),
    # normalization
    ("layer_norm_plain", lambda: ops.layer_norm(p(2, 3)), "f32[2,3]"),
    (
        "layer_norm_two_axes",
        lambda: ops.layer_norm(p(2, 3, 4), p(3, 4), p(3, 4), axis=1),
        "f32[2,3,4]",
    ),
    ("layer_norm_bias_only", lambda: ops.layer_norm(p(2, 3), bias=p(3)), "f32[2,3]"),
    ("layer_norm_f16", lambda: ops.layer_norm(pt(og.f16, 2, 3), pt(og.f16, 3)), "f16[2,3]"),
    ("group_norm", lambda: ops.group_norm(p(2, 6, 5), p(6), p(6), 3), "f32[2,6,5]"),
    ("group_norm_rank_2", lambda: ops.group_norm(p(2, 6), p(6), p(6), 2), "f32[2,6]"),
    ("instance_norm", lambda: ops.instance_norm(p(2, 3, 4, 4), p(3), p(3)), "f32[2,3,4,4]"),
    # shaping
    ("squeeze_all", lambda: ops.squeeze(p(1, 3, 1)), "f32[3]"),
    ("squeeze_axes", lambda: ops.squeeze(p(1, 3, 1), -1), "f32[1,3]"),
    ("unsqueeze", lambda: ops.unsqueeze(p(2, 3), (0, -1)), "f32[1,2,3,1]"),
    ("unsqueeze_bool", lambda: ops.unsqueeze(pt(og.boolean), 0), "boolean[1]"),
    ("flatten", lambda: ops.flatten(p(2, 3, 4)), "f32[2,12]"),
    ("flatten_end", lambda: ops.flatten(p(2, 3, 4), 3), "f32[24,1]"),
    ("flatten_scalar", lambda: ops.flatten(p(), 0), "f32[1,1]"),
    ("stack", lambda: ops.stack([p(2, 4), p(2, 4), p(2, 4)], 1), "f32[2,3,4]"),
    ("stack_last", lambda: ops.stack([p(2), p(2)], -1), "f32[2,2]"),
    ("expand", lambda: ops.expand(p(3, 1), (2, 1, 6)), "f32[2,3,6]"),
    # rnn
    (
        "lstm_cell",
        lambda: ops.lstm_cell(p(B, IN), p(B, H), p(B, H), p(4 * H, IN), p(4 * H, H), p(8 * H)),
        "(f32[2,4], f32[2,4])",
    ),
    (
        "lstm_cell_peepholes",
        lambda: ops.lstm_cell(p(B, IN), p(B, H), p(B, H), p(4 * H, IN), p(4 * H, H), p=p(3 * H)),
        "(f32[2,4], f32[2,4])",
    ),
    (
        "gru_cell",
        lambda: ops.gru_cell(
            p(B, IN), p(B, H), p(3 * H, IN), p(3 * H, H), linear_before_reset=True
        ),
        "f32[2,4]",
    ),
    (
        "rnn_cell",
        lambda: ops.rnn_cell(p(B, IN), p(B, H), p(H, IN), p(H, H), p(2 * H), activations="relu"),
        "f32[2,4]",
    ),
    # resize
    ("resize_scales", lambda: ops.resize(p(1, 3, 4, 4), scales=(1, 1, 2, 2)), "f32[1,3,8,8]"),
    ("resize_fractional", lambda: ops.resize(p(1, 5), scales=(1, 1.5)), "f32[1,7]"),
    ("resize_shape", lambda: ops.resize(pt(og.u8, 1, 4, 4), (1, 2, 3)), "u8[1,2,3]"),
    ("resize_bool", lambda: ops.resize(pt(og.boolean, 2), (3,)), "boolean[3]"),
    ("resize_linear", lambda: ops.resize(p(2, 2), (3, 5), mode="linear"), "f32[3,5]"),
    ("resize_to_empty", lambda: ops.resize(p(2, 2), (0, 2)), "f32[0,2]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert types(build()) == expected


ERRORS = [
    # linalg
    ("matmul_scalar", lambda: ops.matmul(p(), p(2)), "MatMul: operand a f32[] is a scalar"),
    (
        "matmul_dims",
        lambda: ops.matmul(p(2, 3), p(4, 5)),
        "contracted dimensions differ: a f32[2,3] has 3 columns, b f32[4,5] has 4 rows",
    ),
    (
        "matmul_batch",
        lambda: ops.matmul(p(2, 3, 4), p(3, 4, 5)),
        "batch dimensions [2] of a and [3] of b do not broadcast",
    ),
    ("matmul_types", lambda: ops.matmul(p(2, 2), pt(og.f64, 2, 2)), "element types of inputs"),
    (
        "matmul_bool",
        lambda: ops.matmul(pt(og.boolean, 2), pt(og.boolean, 2)),
        "input element type boolean is not supported",
    ),
    (
        "gemm_arity",
        lambda: ops.Gemm()(p(2, 2), p(2, 2), p(2, 2), p(2, 2)),
        "Gemm: expected 2 or 3 inputs (a, b[, c]), got 4",
    ),
    ("gemm_rank", lambda: ops.gemm(p(2, 3, 1), p(3, 4)), "a must have rank 2"),
    (
        "gemm_inner",
        lambda: ops.gemm(p(2, 3), p(4, 5)),
        "inner dimensions differ: op(a) is [2, 3], op(b) is [4, 5]",
    ),
    (
        "gemm_c",
        lambda: ops.gemm(p(2, 3), p(3, 4), p(3)),
        "c shape [3] does not broadcast to the product shape [2, 4]",
    ),
    (
        "gemm_integral_alpha",
        lambda: ops.gemm(pt(og.i32, 2, 2), pt(og.i32, 2, 2), alpha=0.5),
        "alpha 0.5 must be integral for element type i32",
    ),
    ("gemm_alpha_type", lambda: ops.gemm(p(2, 2), p(2, 2), alpha="2"), "alpha must be a number"),
    ("gemm_trans_type", lambda: ops.gemm(p(2, 2), p(2, 2), trans_a=2), "trans_a must be a bool"),
    # activation
    (
        "gelu_int",
        lambda: ops.gelu(pt(og.i32, 2)),
        "Gelu: input element type i32 is not supported",
    ),
    (
        "gelu_mode",
        lambda: ops.gelu(p(2), "erf"),
        "approximate must be one of 'none', 'tanh' (or a GeluApproximation member), got 'erf'",
    ),
    ("elu_alpha", lambda: ops.elu(p(2), alpha=True), "Elu: alpha must be a number"),
    (
        "prelu_broadcast",
        lambda: ops.prelu(p(2, 3, 4), p(3)),
        "slope shape [3] does not broadcast to x shape [2, 3, 4] (for one slope per channel "
        "pass axis=1)",
    ),
    (
        "prelu_axis",
        lambda: ops.prelu(p(2, 3, 4), p(4), axis=1),
        "slope shape [4] must be [3], the size of axis 1 of x",
    ),
    ("prelu_types", lambda: ops.prelu(p(2), pt(og.f64, 2)), "element types of x and slope"),
    ("prelu_unsigned", lambda: ops.prelu(pt(og.u8, 2), pt(og.u8, 2)), "x element type u8"),
    ("clamp_order", lambda: ops.clamp(p(2), 2.0, 1.0), "Clamp: min 2.0 is greater than max 1.0"),
    ("clamp_nan", lambda: ops.clamp(p(2), float("nan")), "min must not be NaN"),
    ("clamp_bool", lambda: ops.clamp(pt(og.boolean, 2), 0), "input element type boolean"),
    (
        "squared_difference_shapes",
        lambda: ops.squared_difference(p(2, 3), p(2)),
        "SquaredDifference: shapes [2, 3], [2] do not broadcast",
    ),
    # normalization
    (
        "layer_norm_scale",
        lambda: ops.layer_norm(p(2, 4), p(5)),
        "LayerNorm: scale shape [5] does not match the normalized shape [4]",
    ),
    ("layer_norm_axis", lambda: ops.layer_norm(p(2, 4), axis=2), "axis 2 is out of range"),
    ("layer_norm_int", lambda: ops.layer_norm(pt(og.i32, 2)), "x element type i32"),
    (
        "layer_norm_types",
        lambda: ops.layer_norm(p(2, 4), p(4), pt(og.f64, 4)),
        "element types of x and bias differ",
    ),
    (
        "layer_norm_arity",
        lambda: ops.LayerNorm()(p(2), p(2), p(2), p(2)),
        "expected 1 to 3 inputs (x[, scale[, bias]]), got 4",
    ),
    ("layer_norm_epsilon", lambda: ops.layer_norm(p(2), epsilon=-1), "epsilon must be >= 0"),
    (
        "group_norm_groups",
        lambda: ops.group_norm(p(2, 6), p(6), p(6), 4),
        "the 6 channels of x do not divide into num_groups 4",
    ),
    (
        "group_norm_scale",
        lambda: ops.group_norm(p(2, 6), p(3), p(6), 3),
        "GroupNorm: scale shape [3] does not match the per-channel shape [6]",
    ),
    ("group_norm_rank", lambda: ops.group_norm(p(6), p(6), p(6), 3), "x must have rank >= 2"),
    ("group_norm_count", lambda: ops.group_norm(p(2, 6), p(6), p(6), 0), "num_groups must be >="),
    (
        "instance_norm_rank",
        lambda: ops.instance_norm(p(2, 3), p(3), p(3)),
        "x must be [N, C, D1, ...] of rank >= 3",
    ),
    (
        "instance_norm_bias",
        lambda: ops.instance_norm(p(2, 3, 4), p(3), p(2)),
        "bias shape [2] does not match the per-channel shape [3]",
    ),
    # shaping
    (
        "squeeze_size",
        lambda: ops.squeeze(p(1, 3), 1),
        "Squeeze: axis 1 has size 3; only size-1 axes can be squeezed",
    ),
    ("squeeze_axis", lambda: ops.squeeze(p(1, 3), 2), "axes 2 is out of range for rank 2"),
    ("unsqueeze_repeat", lambda: ops.unsqueeze(p(2), (0, 0)), "repeats an axis"),
    ("unsqueeze_range", lambda: ops.unsqueeze(p(2), (2,)), "axes 2 is out of range for rank 2"),
    (
        "flatten_axis",
        lambda: ops.flatten(p(2, 3), 3),
        "Flatten: axis 3 is out of range [-2, 2] for rank 2",
    ),
    (
        "stack_shapes",
        lambda: ops.stack([p(2, 3), p(2, 4)]),
        "input 1 shape [2, 4] differs from input 0 shape [2, 3]",
    ),
    ("stack_empty", lambda: ops.stack([]), "Stack: needs at least one input"),
    ("stack_axis", lambda: ops.stack([p(2)], 2), "axis 2 is out of range for rank 2"),
    ("stack_types", lambda: ops.stack([p(2), pt(og.i8, 2)]), "element types of inputs differ"),
    ("expand", lambda: ops.expand(p(3), (2, 4)), "Expand: shapes [3], [2, 4] do not broadcast"),
    ("expand_negative", lambda: ops.expand(p(3), (-1,)), "shape[0] must be >= 0"),
    # rnn
    (
        "lstm_w",
        lambda: ops.lstm_cell(p(B, IN), p(B, H), p(B, H), p(8, IN), p(4 * H, H)),
        "LSTMCell: w shape [8, 3] does not match [4 * hidden_size, input_size] = [16, 3]",
    ),
    (
        "lstm_arity",
        lambda: ops.LSTMCell()(p(B, IN), p(B, H), p(B, H), p(4 * H, IN)),
        "expected 5 to 7 inputs (x, h, c, w, r[, b[, p]]), got 4",
    ),
    (
        "lstm_c",
        lambda: ops.lstm_cell(p(B, IN), p(B, H), p(B, 3), p(4 * H, IN), p(4 * H, H)),
        "c must be like h f32[2,4], got f32[2,3]",
    ),
    (
        "lstm_peepholes",
        lambda: ops.lstm_cell(
            p(B, IN), p(B, H), p(B, H), p(4 * H, IN), p(4 * H, H), p(8 * H), p(H)
        ),
        "p shape [4] does not match [3 * hidden_size] = [12]",
    ),
    (
        "lstm_activation",
        lambda: ops.LSTMCell(activations=("sigmoid", "tanh", "swish")),
        "activation must be one of 'sigmoid', 'tanh'",
    ),
    (
        "lstm_activation_count",
        lambda: ops.LSTMCell(activations=("sigmoid", "tanh")),
        "has 2 functions, expected 3",
    ),
    (
        "lstm_alpha_count",
        lambda: ops.LSTMCell(activation_alpha=(0.5,)),
        "activation_alpha has 1 values for 3 activations",
    ),
    ("lstm_clip", lambda: ops.LSTMCell(clip=0.0), "clip must be > 0"),
    (
        "gru_bias",
        lambda: ops.gru_cell(p(B, IN), p(B, H), p(3 * H, IN), p(3 * H, H), p(12)),
        "GRUCell: b shape [12] does not match [6 * hidden_size] = [24]",
    ),
    (
        "gru_x_rank",
        lambda: ops.gru_cell(p(IN), p(B, H), p(3 * H, IN), p(3 * H, H)),
        "x must be [batch, input_size], got f32[3]",
    ),
    (
        "gru_h_batch",
        lambda: ops.gru_cell(p(B, IN), p(3, H), p(3 * H, IN), p(3 * H, H)),
        "h must be [batch=2, hidden_size], got f32[3,4]",
    ),
    (
        "gru_int",
        lambda: ops.gru_cell(*(pt(og.i32, *s) for s in ((B, IN), (B, H), (3 * H, IN), (3 * H, H)))),
        "x element type i32",
    ),
    (
        "gru_reset_flag",
        lambda: ops.gru_cell(p(B, IN), p(B, H), p(3 * H, IN), p(3 * H, H), linear_before_reset=2),
        "linear_before_reset must be a bool",
    ),
    (
        "rnn_r",
        lambda: ops.rnn_cell(p(B, IN), p(B, H), p(H, IN), p(H, IN)),
        "r shape [4, 3] does not match [1 * hidden_size, hidden_size] = [4, 4]",
    ),
    # resize
    ("resize_no_size", lambda: ops.resize(p(2)), "Resize: needs output_shape or scales"),
    (
        "resize_rank",
        lambda: ops.resize(p(1, 1, 2, 2), (2, 2)),
        "output_shape (2, 2) has 2 entries, x f32[1,1,2,2] has rank 4",
    ),
    ("resize_scale", lambda: ops.resize(p(2), scales=(-1.0,)), "scales[0] must be a finite number"),
    ("resize_zero_scale", lambda: ops.resize(p(2), (3,), (0.0,)), "scale 0 of axis 0 cannot give"),
    (
        "resize_mode",
        lambda: ops.resize(p(2), (3,), mode="cubic"),
        "mode must be one of 'nearest', 'linear' (or a ResizeMode member), got 'cubic'",
    ),
    (
        "resize_linear_int",
        lambda: ops.resize(pt(og.i32, 2), (3,), mode="linear"),
        "x (mode 'linear') element type i32 is not supported",
    ),
    (
        "resize_empty_axis",
        lambda: ops.resize(p(0, 2), (2, 2)),
        "axis 0 of x is empty and cannot grow to 2",
    ),
    (
        "resize_transformation",
        lambda: ops.resize(p(2), (3,), coordinate_transformation_mode="tf_crop_and_resize"),
        "coordinate_transformation_mode must be one of",
    ),
    (
        "resize_nearest_mode",
        lambda: ops.resize(p(2), (3,), nearest_mode="round"),
        "nearest_mode must be one of",
    ),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_errors_name_the_source_line():
    with pytest.raises(og.OpTypeError, match=r"built at test_framework_ops_type_rules\.py:\d+"):
        ops.layer_norm(p(2, 4), p(5))


def test_enum_attributes_accept_members_and_lower_case_strings():
    assert ops.Gelu("tanh") == ops.Gelu(GeluApproximation.TANH)
    assert ops.Gelu().approximate is GeluApproximation.NONE
    resize = ops.Resize((2,), mode="linear", coordinate_transformation_mode="align_corners")
    assert resize.mode is ResizeMode.LINEAR
    assert resize.coordinate_transformation_mode is CoordinateTransformation.ALIGN_CORNERS
    assert ops.RNNCell("relu").activations == (RnnActivation.RELU,)


def test_canonical_attributes_are_stored_on_the_node():
    assert ops.squeeze(p(1, 3, 1)).op.axes == (0, 2)
    assert ops.unsqueeze(p(2), -1).op.axes == (1,)
    assert ops.flatten(p(2, 3), -1).op.axis == 1
    assert ops.layer_norm(p(2, 3), axis=-1).op.axis == 1
    assert ops.prelu(p(2, 3), p(2), axis=-2).op.axis == 0
    resized = ops.resize(p(1, 4), scales=(1, 0.5)).op
    assert resized.output_shape == (1, 2) and resized.scales == (1.0, 0.5)
    sized = ops.resize(p(1, 4), (1, 6)).op
    assert sized.scales == (1.0, 1.5)


def test_rnn_activation_parameters_default_to_onnx():
    cell = ops.LSTMCell(activations=("hard_sigmoid", "leaky_relu", "tanh"))
    assert cell.activation_alpha == (0.2, 0.01, 0.0)
    assert cell.activation_beta == (0.5, 0.0, 0.0)
    unused = ops.RNNCell("tanh", activation_alpha=(3.0,))
    assert unused == ops.RNNCell("tanh")  # parameters a function does not take are dropped


def test_clamp_bounds_round_inward_for_integers():
    x = pt(og.i32, 3)
    fn = og.Function([ops.clamp(x, -1.5, 1.5)], [x])
    (result,) = og.backend("INTERPRETER").compile(fn)(np.array([-3, 0, 3], np.int32))
    assert result.tolist() == [-1, 0, 1]
