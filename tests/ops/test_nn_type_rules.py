"""Type rules of the nn family: accepted cases and one test per error."""

import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


def bn_inference(x_shape=(2, 3, 4), c=3, t=og.f32, **shapes):
    params = [p(shapes.get(n, (c,)), t) for n in ("scale", "bias", "mean", "variance")]
    return ops.batch_norm_inference(p(x_shape, t), *params)


ACCEPTED = [
    ("softmax", lambda: ops.softmax(p((2, 3))), "f32[2,3]"),
    ("softmax_axis", lambda: ops.softmax(p((2, 3, 4), og.f16), 1), "f16[2,3,4]"),
    ("softmax_negative_axis", lambda: ops.softmax(p((5,), og.bf16), -1), "bf16[5]"),
    ("softmax_empty", lambda: ops.softmax(p((0, 3))), "f32[0,3]"),
    ("log_softmax", lambda: ops.log_softmax(p((2, 3), og.f64), 0), "f64[2,3]"),
    ("batch_norm_inference", lambda: bn_inference(), "f32[2,3,4]"),
    ("batch_norm_inference_rank_2", lambda: bn_inference((5, 3)), "f32[5,3]"),
    ("batch_norm_inference_f16", lambda: bn_inference((1, 2, 2, 2), 2, og.f16), "f16[1,2,2,2]"),
    (
        "batch_norm_training",
        lambda: ops.tuple_(*ops.batch_norm_training(p((4, 3, 2)), p((3,)), p((3,)))),
        "(f32[4,3,2], f32[3], f32[3])",
    ),
    (
        "batch_norm_training_epsilon_int",
        lambda: ops.batch_norm_training(p((4, 3), og.f64), p((3,), og.f64), p((3,), og.f64), 0)[0],
        "f64[4,3]",
    ),
    ("lrn", lambda: ops.lrn(p((1, 5, 2, 2)), 1e-4, 0.75, 1.0, 3), "f32[1,5,2,2]"),
    ("lrn_even_size", lambda: ops.lrn(p((1, 3, 4), og.f16), 1e-4, 0.75, 1, 8), "f16[1,3,4]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    ("softmax_scalar", lambda: ops.softmax(p(())), "Softmax: input must have rank >= 1"),
    (
        "softmax_integer",
        lambda: ops.softmax(p((2,), og.i32)),
        "input element type i32 is not supported",
    ),
    ("softmax_axis_range", lambda: ops.softmax(p((2, 3)), 2), "axis 2 is out of range for rank 2"),
    ("softmax_axis_type", lambda: ops.softmax(p((2, 3)), 1.0), "axis must be an integer"),
    (
        "log_softmax_integer",
        lambda: ops.log_softmax(p((2,), og.u8)),
        "LogSoftmax: input element type u8",
    ),
    (
        "log_softmax_axis_range",
        lambda: ops.log_softmax(p((2,)), -2),
        "axis -2 is out of range for rank 1",
    ),
    ("batch_norm_rank", lambda: bn_inference((3,)), "data must have rank >= 2"),
    (
        "batch_norm_integer",
        lambda: bn_inference(t=og.i32),
        "data element type i32 is not supported",
    ),
    (
        "batch_norm_scale_shape",
        lambda: bn_inference(scale=(4,)),
        "scale must have shape [3] (the data's channel count)",
    ),
    (
        "batch_norm_variance_shape",
        lambda: bn_inference(variance=(3, 1)),
        "variance must have shape [3]",
    ),
    (
        "batch_norm_types",
        lambda: ops.batch_norm_inference(p((2, 3)), p((3,)), p((3,), og.f64), p((3,)), p((3,))),
        "element types of inputs differ: f32 vs f64 at input 2",
    ),
    (
        "batch_norm_arity",
        lambda: ops.BatchNormInference()(p((2, 3)), p((3,))),
        "BatchNormInference: expected 5 input(s), got 2",
    ),
    (
        "batch_norm_epsilon_negative",
        lambda: ops.batch_norm_training(p((2, 3)), p((3,)), p((3,)), -1e-5),
        "BatchNormTraining: epsilon must be finite and >= 0",
    ),
    (
        "batch_norm_epsilon_type",
        lambda: ops.batch_norm_training(p((2, 3)), p((3,)), p((3,)), "small"),
        "epsilon must be a number",
    ),
    (
        "batch_norm_training_bias_shape",
        lambda: ops.batch_norm_training(p((2, 3)), p((3,)), p(())),
        "bias must have shape [3]",
    ),
    ("lrn_rank", lambda: ops.lrn(p((2, 3)), 1e-4, 0.75, 1.0, 3), "LRN: data must have rank >= 3"),
    ("lrn_size", lambda: ops.lrn(p((1, 3, 2)), 1e-4, 0.75, 1.0, 0), "size must be >= 1, got 0"),
    (
        "lrn_size_type",
        lambda: ops.lrn(p((1, 3, 2)), 1e-4, 0.75, 1.0, 2.5),
        "size must be an integer",
    ),
    ("lrn_alpha_type", lambda: ops.lrn(p((1, 3, 2)), None, 0.75, 1.0, 3), "alpha must be a number"),
    (
        "lrn_integer",
        lambda: ops.lrn(p((1, 3, 2), og.i16), 1e-4, 0.75, 1.0, 3),
        "input element type i16",
    ),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_canonical_attributes():
    assert ops.softmax(p((2, 3))).node.op.axis == 1
    assert ops.log_softmax(p((2, 3, 4)), -3).node.op.axis == 0
    op = ops.batch_norm_training(p((2, 3)), p((3,)), p((3,)), 1)[0].node.op
    assert isinstance(op.epsilon, float) and op.epsilon == 1.0
    assert ops.lrn(p((1, 3, 2)), 1, 1, 2, 4).node.op.window() == (1, 2)
