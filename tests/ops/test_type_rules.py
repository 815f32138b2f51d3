"""Type rules: one case per accepted form and per error, matching stable substrings."""

import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


ACCEPTED = [
    ("unary", lambda: ops.exp(p((2, 3))), "f32[2,3]"),
    ("abs_int", lambda: ops.abs(p((2,), og.i8)), "i8[2]"),
    ("relu_uint", lambda: ops.relu(p((2,), og.u8)), "u8[2]"),
    ("add", lambda: ops.add(p((2, 3)), p((2, 3))), "f32[2,3]"),
    ("add_empty", lambda: ops.add(p((0, 3)), p((0, 3))), "f32[0,3]"),
    ("add_scalar", lambda: ops.add(p(()), p(())), "f32[]"),
    ("less", lambda: ops.less(p((2,), og.i32), p((2,), og.i32)), "boolean[2]"),
    ("equal_bool", lambda: ops.equal(p((2,), og.boolean), p((2,), og.boolean)), "boolean[2]"),
    ("and", lambda: ops.logical_and(p((2,), og.boolean), p((2,), og.boolean)), "boolean[2]"),
    ("select", lambda: ops.select(p((2,), og.boolean), p((2,), og.i64), p((2,), og.i64)), "i64[2]"),
    ("convert", lambda: ops.convert(p((2, 2)), og.i8), "i8[2,2]"),
    ("convert_by_name", lambda: ops.convert(p((2,)), "f64"), "f64[2]"),
    ("broadcast", lambda: ops.broadcast(p((3,)), (2, 3), (0,)), "f32[2,3]"),
    ("broadcast_default_axes", lambda: ops.broadcast(p((3,)), (4, 2, 3)), "f32[4,2,3]"),
    ("broadcast_negative_axis", lambda: ops.broadcast(p((2,)), (2, 5), (-1,)), "f32[2,5]"),
    ("reshape", lambda: ops.reshape(p((2, 3)), (3, 2)), "f32[3,2]"),
    ("reshape_wildcard", lambda: ops.reshape(p((2, 3, 4)), (-1, 4)), "f32[6,4]"),
    ("reshape_order", lambda: ops.reshape(p((2, 3)), (6,), (1, 0)), "f32[6]"),
    ("transpose", lambda: ops.transpose(p((2, 3, 4)), (2, 0, 1)), "f32[4,2,3]"),
    ("transpose_default", lambda: ops.transpose(p((2, 3))), "f32[3,2]"),
    ("slice", lambda: ops.slice(p((8, 5)), (1, 0), (7, 5), (2, 3)), "f32[3,2]"),
    ("slice_empty", lambda: ops.slice(p((4,)), (2,), (2,)), "f32[0]"),
    ("concat", lambda: ops.concat([p((2, 1)), p((2, 3))], -1), "f32[2,4]"),
    ("dot_default", lambda: ops.dot(p((2, 3)), p((3, 4))), "f32[2,4]"),
    ("dot_scalar", lambda: ops.dot(p(()), p((3, 4))), "f32[3,4]"),
    ("dot_count", lambda: ops.dot(p((2, 3, 4)), p((3, 4, 5)), 2), "f32[2,5]"),
    ("dot_outer", lambda: ops.dot(p((2,)), p((3,)), 0), "f32[2,3]"),
    ("reduce", lambda: ops.reduce_sum(p((2, 3, 4)), (-1, 0)), "f32[3]"),
    ("reduce_keep", lambda: ops.reduce_max(p((2, 3)), 1, keep_dims=True), "f32[2,1]"),
    ("reduce_none", lambda: ops.reduce_prod(p((2, 3)), ()), "f32[2,3]"),
    ("tuple", lambda: ops.tuple_(p((2,)), p((3,), og.i8)), "(f32[2], i8[3])"),
    (
        "get_tuple_element",
        lambda: ops.get_tuple_element(ops.tuple_(p((2,)), p((3,), og.i8)), 1),
        "i8[3]",
    ),
    ("sugar_scalar", lambda: p((2,)) * 0.5 + 1, "f32[2]"),
    ("sugar_int", lambda: 2 - p((2,), og.i32), "i32[2]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    (
        "add_shapes",
        lambda: ops.add(p((2, 3)), p((3,))),
        "Add: shapes of inputs differ: [2, 3] vs [3]",
    ),
    (
        "add_types",
        lambda: ops.add(p((2,)), p((2,), og.f64)),
        "element types of inputs differ: f32 vs f64",
    ),
    (
        "add_bool",
        lambda: ops.add(p((2,), og.boolean), p((2,), og.boolean)),
        "input element type boolean is not supported",
    ),
    ("add_arity", lambda: ops.Add()(p((2,))), "Add: expected 2 input(s), got 1"),
    ("add_literal", lambda: ops.add(p((2,)), 1.0), "input 1 must be an opgraph value"),
    ("exp_int", lambda: ops.exp(p((2,), og.i32)), "Exp: input element type i32 is not supported"),
    ("neg_unsigned", lambda: ops.negative(p((2,), og.u8)), "Neg: input element type u8"),
    (
        "less_types",
        lambda: ops.less(p((2,), og.i32), p((2,), og.i64)),
        "element types of inputs differ",
    ),
    ("and_float", lambda: ops.logical_and(p((2,)), p((2,))), "And: input element type f32"),
    ("not_float", lambda: ops.logical_not(p((2,))), "Not: input element type f32"),
    (
        "select_condition",
        lambda: ops.select(p((2,)), p((2,)), p((2,))),
        "condition element type f32",
    ),
    (
        "select_types",
        lambda: ops.select(p((2,), og.boolean), p((2,)), p((2,), og.f64)),
        "element types of x and y differ",
    ),
    (
        "select_shapes",
        lambda: ops.select(p((3,), og.boolean), p((2,)), p((2,))),
        "shapes of inputs differ",
    ),
    ("convert_type", lambda: ops.convert(p((2,)), "float"), "unknown element type"),
    (
        "broadcast_axes_oob",
        lambda: ops.broadcast(p((3,)), (2, 3), (2,)),
        "broadcast axis 2 is out of range",
    ),
    (
        "broadcast_mismatch",
        lambda: ops.broadcast(p((3,)), (2, 3), (1,)),
        "input shape [3] does not match output shape [2, 3]",
    ),
    ("broadcast_repeat", lambda: ops.broadcast(p(()), (2, 3), (0, 0, 1)), "repeats an axis"),
    ("broadcast_negative_dim", lambda: ops.broadcast(p(()), (-2,), (0,)), "shape[0] must be >= 0"),
    (
        "reshape_size",
        lambda: ops.reshape(p((2, 3)), (4,)),
        "output_shape [4] has 4 elements, input f32[2,3] has 6",
    ),
    (
        "reshape_order",
        lambda: ops.reshape(p((2, 3)), (6,), (0, 0)),
        "input_order (0, 0) is not a permutation",
    ),
    ("reshape_two_wildcards", lambda: ops.reshape(p((2, 3)), (-1, -1)), "more than one -1"),
    ("reshape_bool_dim", lambda: ops.reshape(p((2, 3)), (True, 6)), "must be an integer"),
    (
        "transpose_perm",
        lambda: ops.transpose(p((2, 3, 4)), (0, 2, 2)),
        "Transpose: perm (0, 2, 2) is not a permutation of 0..2",
    ),
    ("transpose_rank", lambda: ops.transpose(p((2, 3)), (0, 1, 2)), "has 3 axes, input rank is 2"),
    ("slice_rank", lambda: ops.slice(p((2, 3)), (0,), (1,)), "lower_bounds (0,) has 1 entries"),
    ("slice_bounds", lambda: ops.slice(p((2, 3)), (0, 2), (2, 1)), "axis 1: bounds [2, 1)"),
    ("slice_upper", lambda: ops.slice(p((2, 3)), (0, 0), (3, 3)), "axis 0: bounds [0, 3)"),
    ("slice_stride", lambda: ops.slice(p((2, 3)), (0, 0), (2, 3), (1, 0)), "stride 0 must be >= 1"),
    ("concat_empty", lambda: ops.concat([], 0), "needs at least one input"),
    ("concat_scalar", lambda: ops.concat([p(())], 0), "cannot concatenate scalars"),
    (
        "concat_shapes",
        lambda: ops.concat([p((2, 3)), p((3, 3))], 1),
        "outside the concatenation axis 1",
    ),
    ("concat_rank", lambda: ops.concat([p((2, 3)), p((2,))], 0), "input 1 has rank 1"),
    (
        "concat_types",
        lambda: ops.concat([p((2,)), p((2,), og.i32)], 0),
        "element types of inputs differ",
    ),
    ("concat_axis", lambda: ops.concat([p((2,))], 1), "axis 1 is out of range for rank 1"),
    ("dot_dims", lambda: ops.dot(p((2, 3)), p((4, 2))), "contracted dimensions differ: [3]"),
    ("dot_count", lambda: ops.dot(p((2,)), p((2,)), 2), "reduction_axes_count 2 exceeds"),
    (
        "dot_bool",
        lambda: ops.dot(p((2,), og.boolean), p((2,), og.boolean)),
        "input element type boolean",
    ),
    (
        "reduce_axis",
        lambda: ops.reduce_sum(p((2, 3)), (2,)),
        "ReduceSum: axes 2 is out of range for rank 2",
    ),
    ("reduce_repeat", lambda: ops.reduce_min(p((2, 3)), (1, -1)), "repeats an axis"),
    (
        "reduce_bool",
        lambda: ops.reduce_max(p((2,), og.boolean), (0,)),
        "input element type boolean",
    ),
    ("reduce_float_axis", lambda: ops.reduce_sum(p((2,)), (0.5,)), "must be an integer"),
    ("gte_tensor", lambda: ops.get_tuple_element(p((2,)), 0), "input must be a tuple"),
    ("gte_index", lambda: ops.get_tuple_element(ops.tuple_(p((2,))), 1), "index 1 is out of range"),
    ("tuple_into_add", lambda: ops.add(ops.tuple_(p((2,))), p((2,))), "input 0 is a tuple"),
    ("sugar_fraction_int", lambda: p((2,), og.i32) * 0.5, "i32 needs integral values"),
    ("sugar_types", lambda: p((2,)) + p((2,), og.f64), "element types of inputs differ"),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_error_names_source_line():
    with pytest.raises(og.OpTypeError, match=r"built at test_type_rules\.py:\d+"):
        ops.add(p((2,)), p((3,)))


def test_op_type_error_is_a_type_error():
    with pytest.raises(TypeError):
        ops.add(p((2,)), p((3,)))


def test_call_checks_argument_types():
    x = p((2,))
    fn = og.Function([ops.exp(x)], [x], name="g")
    with pytest.raises(
        og.OpTypeError, match="argument 0 has type f64.2., function g expects f32.2."
    ):
        ops.call(fn, p((2,), og.f64))
    with pytest.raises(og.OpTypeError, match="takes 1 argument"):
        ops.call(fn, p((2,)), p((2,)))


def test_canonical_attributes():
    assert ops.reduce_sum(p((2, 3)), [-1]).node.op.axes == (1,)
    assert ops.concat([p((2,))], -1).node.op.axis == 0
    assert ops.dot(p((2,)), p((2,))).node.op.reduction_axes_count == 1
    assert ops.reshape(p((2, 3)), (6,)).node.op.input_order == (0, 1)
    assert ops.slice(p((2, 3)), (0, 0), (1, 1)).node.op.strides == (1, 1)


def test_ops_are_immutable():
    op = ops.reduce_sum(p((2, 3)), 1).node.op
    with pytest.raises(AttributeError):
        op.axes = (0,)
    node = op and ops.exp(p((2,))).node
    with pytest.raises(AttributeError):
        node.inputs = ()


def test_bitcast_rules():
    assert str(ops.bitcast(p((2, 3)), og.i32).type) == "i32[2,3]"
    assert str(ops.bitcast(p((2,), og.bf16), "u16").type) == "u16[2]"
    with pytest.raises(
        og.OpTypeError,
        match=r"Bitcast: cannot bitcast f32 \(32 bits\) to f64 \(64 bits\): the widths differ",
    ):
        ops.bitcast(p((2,)), og.f64)
    with pytest.raises(og.OpTypeError, match="booleans have no bit pattern"):
        ops.bitcast(p((2,), og.boolean), og.u8)


def test_bitcast_values():
    x = og.parameter(og.f32, (2,))
    exe = og.backend("INTERPRETER").compile(og.Function([ops.bitcast(x, og.i32)], [x]))
    import numpy as np

    assert exe(np.array([1.0, -0.0], np.float32))[0].tolist() == [1065353216, -2147483648]
