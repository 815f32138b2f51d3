"""Type rules of reverse, reverse_sequence, tile, split and range_: one case per accepted form
and per error, matching stable substrings; plus canonical attributes, range_ values and the
run-time errors of these ops' kernels."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


def types(outputs):
    return ", ".join(str(o.type) for o in outputs)


ACCEPTED = [
    ("reverse", lambda: ops.reverse(p((2, 3)), (0, -1)), "f32[2,3]"),
    ("reverse_int_axis", lambda: ops.reverse(p((2, 3), og.boolean), 1), "boolean[2,3]"),
    ("reverse_no_axes", lambda: ops.reverse(p(()), ()), "f32[]"),
    (
        "reverse_sequence",
        lambda: ops.reverse_sequence(p((3, 5)), p((3,), og.i64)),
        "f32[3,5]",
    ),
    (
        "reverse_sequence_axes",
        lambda: ops.reverse_sequence(p((5, 2, 3)), p((3,), og.i32), batch_axis=-1, seq_axis=0),
        "f32[5,2,3]",
    ),
    ("tile", lambda: ops.tile(p((2, 3)), (2, 3)), "f32[4,9]"),
    ("tile_zero", lambda: ops.tile(p((2, 3)), (0, 1)), "f32[0,3]"),
    ("tile_scalar", lambda: ops.tile(p(()), ()), "f32[]"),
    ("range_int", lambda: ops.range_(0, 10, 3), "i64[4]"),
    ("range_float_default", lambda: ops.range_(0, 1, 0.25), "f32[4]"),
    ("range_typed", lambda: ops.range_(5, 0, -2, og.u8), "u8[3]"),
    ("range_empty", lambda: ops.range_(3, 3, 1, "f64"), "f64[0]"),
    ("range_wrong_direction", lambda: ops.range_(0, 5, -1), "i64[0]"),
    ("range_bf16", lambda: ops.range_(0.5, 2, 0.5, og.bf16), "bf16[3]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


SPLITS = [
    ("split_equal", lambda: ops.split(p((6, 2)), 0, 3), "f32[2,2], f32[2,2], f32[2,2]"),
    ("split_sizes", lambda: ops.split(p((2, 5)), -1, (1, 0, 4)), "f32[2,1], f32[2,0], f32[2,4]"),
    ("split_one", lambda: ops.split(p((3,)), 0, 1), "f32[3]"),
    ("split_list", lambda: ops.split(p((0, 3)), 0, [0, 0]), "f32[0,3], f32[0,3]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), SPLITS, ids=[c[0] for c in SPLITS])
def test_split_accepted(case, build, expected):
    pieces = build()
    assert isinstance(pieces, tuple)
    assert types(pieces) == expected


ERRORS = [
    (
        "reverse_axis_oob",
        lambda: ops.reverse(p((2, 3)), (2,)),
        "Reverse: axes 2 is out of range for rank 2",
    ),
    ("reverse_repeat", lambda: ops.reverse(p((2, 3)), (0, -2)), "repeats an axis"),
    (
        "reverse_sequence_rank",
        lambda: ops.reverse_sequence(p((3,)), p((3,), og.i64)),
        "ReverseSequence: x must have rank >= 2",
    ),
    (
        "reverse_sequence_same_axes",
        lambda: ops.reverse_sequence(p((3, 3)), p((3,), og.i64), 1, -1),
        "batch_axis and seq_axis are both 1",
    ),
    (
        "reverse_sequence_axis_oob",
        lambda: ops.reverse_sequence(p((3, 3)), p((3,), og.i64), 0, 2),
        "seq_axis 2 is out of range for rank 2",
    ),
    (
        "reverse_sequence_length_type",
        lambda: ops.reverse_sequence(p((3, 4)), p((3,))),
        "seq_lengths element type f32 is not supported; expected one of i32, i64",
    ),
    (
        "reverse_sequence_length_shape",
        lambda: ops.reverse_sequence(p((3, 4)), p((4,), og.i32)),
        "seq_lengths must have shape [3] (x's batch axis 0), got i32[4]",
    ),
    (
        "tile_length",
        lambda: ops.tile(p((2, 3)), (2,)),
        "Tile: repeats (2,) has 1 entries, input f32[2,3] has rank 2",
    ),
    ("tile_negative", lambda: ops.tile(p((2,)), (-1,)), "repeats[0] must be >= 0"),
    (
        "split_indivisible",
        lambda: ops.split(p((5,)), 0, 2),
        "Split: dimension 5 of axis 0 does not divide into 2 equal pieces",
    ),
    (
        "split_sizes_sum",
        lambda: ops.split(p((4, 2)), 0, (1, 2)),
        "sizes (1, 2) sum to 3, axis 0 has dimension 4",
    ),
    ("split_scalar", lambda: ops.split(p(()), 0, 1), "cannot split a scalar (f32[])"),
    ("split_zero_pieces", lambda: ops.split(p((2,)), 0, 0), "num_splits must be >= 1, got 0"),
    ("split_negative_size", lambda: ops.split(p((2,)), 0, (3, -1)), "sizes[1] must be >= 0"),
    ("split_no_sizes", lambda: ops.split(p((2,)), 0, ()), "sizes must name at least one piece"),
    ("split_neither", lambda: ops.Split(0)(p((2,))), "give exactly one of num_splits and sizes"),
    (
        "split_both",
        lambda: ops.Split(0, (1, 1), 2)(p((2,))),
        "give exactly one of num_splits and sizes",
    ),
    ("split_axis_oob", lambda: ops.split(p((2, 2)), 2, 1), "axis 2 is out of range for rank 2"),
    ("range_zero_step", lambda: ops.range_(0, 5, 0), "range_: step must be nonzero"),
    ("range_boolean", lambda: ops.range_(0, 2, 1, og.boolean), "boolean is not a numeric"),
    (
        "range_fraction_int",
        lambda: ops.range_(0, 5, 0.5, og.i32),
        "i32 needs integral start, stop and step, got (0, 5, 0.5)",
    ),
    ("range_out_of_range", lambda: ops.range_(250, 260, 1, og.u8), "out of range for u8"),
    ("range_tensor_bound", lambda: ops.range_(0, p(()), 1), "stop must be a Python number"),
    ("range_bool_bound", lambda: ops.range_(0, True, 1), "stop must be a Python number"),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ops.range_(0, 5, 0),
        lambda: ops.split(p((5,)), 0, 2),
    ],
    ids=["range_", "split"],
)
def test_builder_errors_name_the_source_line(build):
    with pytest.raises(og.OpTypeError, match=r"built at test_movement_type_rules\.py:\d+"):
        build()


def test_canonical_attributes():
    x = p((2, 3, 4))
    assert ops.reverse(x, (-1, 0)).node.op.axes == (0, 2)
    sequence = ops.reverse_sequence(x, p((4,), og.i64), batch_axis=-1, seq_axis=-3).node.op
    assert (sequence.batch_axis, sequence.seq_axis) == (2, 0)
    split = ops.split(x, -1, 2)[0].node.op
    assert (split.axis, split.sizes, split.num_splits) == (2, (2, 2), None)


@pytest.mark.parametrize(
    ("build", "values"),
    [
        (lambda: ops.range_(0, 10, 3), [0, 3, 6, 9]),
        (lambda: ops.range_(5, 0, -2, og.i8), [5, 3, 1]),
        (lambda: ops.range_(1.0, 2.0, 0.25, og.f64), [1.0, 1.25, 1.5, 1.75]),
        (lambda: ops.range_(0, 1, 0.3), np.float32([0, 0.3, 0.6, 0.9]).tolist()),
        (lambda: ops.range_(2, 2, 1), []),
        (lambda: ops.range_(2**62, 2**62 + 2, 1), [2**62, 2**62 + 1]),
    ],
    ids=["int", "negative_step", "float", "rounded_f32", "empty", "large_int"],
)
def test_range_values(build, values):
    value = build()
    assert isinstance(value.node.op, og.ops.Constant)
    assert value.node.op.value.tolist() == values


def test_reverse_sequence_length_out_of_range_is_an_execution_error():
    x, lengths = p((2, 3)), p((2,), og.i32)
    fn = og.Function([ops.reverse_sequence(x, lengths)], [x, lengths])
    exe = og.backend("INTERPRETER").compile(fn)
    with pytest.raises(og.ExecutionError, match=r"while executing %\d+ = ReverseSequence") as info:
        exe(np.zeros((2, 3), np.float32), np.array([3, 4], np.int32))
    assert "seq_lengths[1] = 4 is outside [0, 3]" in str(info.value)
