"""Type rules of the boolean reductions and the reductions defined by decomposition: accepted
cases and one test per error."""

import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


DECOMPOSED = [
    ops.reduce_mean,
    ops.reduce_l1,
    ops.reduce_l2,
    ops.reduce_log_sum,
    ops.reduce_log_sum_exp,
    ops.reduce_sum_square,
]

ACCEPTED = [
    ("reduce_all", lambda: ops.reduce_all(p((2, 3), og.boolean), 1), "boolean[2]"),
    (
        "reduce_any_keep",
        lambda: ops.reduce_any(p((2, 3), og.boolean), -1, keep_dims=True),
        "boolean[2,1]",
    ),
    ("reduce_all_empty", lambda: ops.reduce_all(p((2, 0), og.boolean), (0, 1)), "boolean[]"),
    ("reduce_any_none", lambda: ops.reduce_any(p((2,), og.boolean), ()), "boolean[2]"),
    *((f"{f.__name__}", lambda f=f: f(p((2, 3, 4)), (0, -1)), "f32[3]") for f in DECOMPOSED),
    *(
        (f"{f.__name__}_keep", lambda f=f: f(p((2, 3), og.f16), 1, keep_dims=True), "f16[2,1]")
        for f in DECOMPOSED
    ),
    *(
        (f"{f.__name__}_empty", lambda f=f: f(p((2, 0), og.f64), (1,)), "f64[2]")
        for f in DECOMPOSED
    ),
    *((f"{f.__name__}_none", lambda f=f: f(p((2,), og.bf16), ()), "bf16[2]") for f in DECOMPOSED),
    ("reduce_l1_int", lambda: ops.reduce_l1(p((2, 3), og.i8), 0), "i8[3]"),
    ("reduce_sum_square_uint", lambda: ops.reduce_sum_square(p((2, 3), og.u32), (0, 1)), "u32[]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    (
        "reduce_all_float",
        lambda: ops.reduce_all(p((2,)), 0),
        "ReduceAll: input element type f32 is not supported",
    ),
    (
        "reduce_any_int",
        lambda: ops.reduce_any(p((2,), og.i32), 0),
        "ReduceAny: input element type i32",
    ),
    (
        "reduce_all_axis",
        lambda: ops.reduce_all(p((2,), og.boolean), 1),
        "ReduceAll: axes 1 is out of range for rank 1",
    ),
    (
        "reduce_any_repeat",
        lambda: ops.reduce_any(p((2, 3), og.boolean), (0, -2)),
        "ReduceAny: axes (0, -2) repeats an axis",
    ),
    (
        "reduce_mean_int",
        lambda: ops.reduce_mean(p((2,), og.i32), 0),
        "ReduceMean: input element type i32 is not supported",
    ),
    (
        "reduce_l1_bool",
        lambda: ops.reduce_l1(p((2,), og.boolean), 0),
        "ReduceL1: input element type boolean",
    ),
    ("reduce_l2_int", lambda: ops.reduce_l2(p((2,), og.u8), 0), "ReduceL2: input element type u8"),
    (
        "reduce_log_sum_int",
        lambda: ops.reduce_log_sum(p((2,), og.i64), 0),
        "ReduceLogSum: input element type i64",
    ),
    (
        "reduce_log_sum_exp_int",
        lambda: ops.reduce_log_sum_exp(p((2,), og.i16), 0),
        "ReduceLogSumExp: input element type i16",
    ),
    (
        "reduce_sum_square_bool",
        lambda: ops.reduce_sum_square(p((2,), og.boolean), 0),
        "ReduceSumSquare: input element type boolean",
    ),
    (
        "reduce_mean_axis",
        lambda: ops.reduce_mean(p((2, 3)), (2,)),
        "ReduceMean: axes 2 is out of range for rank 2",
    ),
    (
        "reduce_l2_repeat",
        lambda: ops.reduce_l2(p((2, 3)), (1, -1)),
        "ReduceL2: axes (1, -1) repeats an axis",
    ),
    (
        "reduce_log_sum_exp_float_axis",
        lambda: ops.reduce_log_sum_exp(p((2,)), (0.5,)),
        "axes[0] must be an integer",
    ),
    (
        "reduce_l1_scalar_axis",
        lambda: ops.reduce_l1(p(()), 0),
        "ReduceL1: axes 0 is out of range for rank 0",
    ),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_decomposed_reductions_build_one_node_with_canonical_axes():
    for builder in DECOMPOSED:
        node = builder(p((2, 3, 4)), [-1, 0]).node
        assert node.op.axes == (0, 2)
        assert node.op.has_decomposition() and not node.op.has_vjp()
        assert len(node.inputs) == 1 and node.inputs[0].node.op.name == "Parameter"


def test_boolean_reductions_are_not_differentiable():
    assert not ops.ReduceAll.differentiable and not ops.ReduceAny.differentiable
    assert ops.reduce_all(p((2, 3), og.boolean), [-1]).node.op.axes == (1,)
