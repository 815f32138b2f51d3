"""Type rules of gather, gather_nd, gather_elements, scatter_elements, scatter_nd and one_hot: one
case per accepted form and per error, matching stable substrings; plus canonical attributes,
the kernels' run-time index errors and the documented scatter/one_hot semantics."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


def i64(shape):
    return og.parameter(og.i64, shape)


ACCEPTED = [
    ("gather", lambda: ops.gather(p((3, 4)), i64((2, 5)), axis=1), "f32[3,2,5]"),
    ("gather_scalar_index", lambda: ops.gather(p((3, 4)), p((), og.i32)), "f32[4]"),
    ("gather_negative_axis", lambda: ops.gather(p((3, 4), og.u8), i64((2,)), -1), "u8[3,2]"),
    (
        "gather_batch_dims",
        lambda: ops.gather(p((2, 3, 4)), i64((2, 5)), axis=2, batch_dims=1),
        "f32[2,3,5]",
    ),
    (
        "gather_batch_dims_negative",
        lambda: ops.gather(p((2, 3, 4)), i64((2, 3, 6)), axis=2, batch_dims=-1),
        "f32[2,3,6]",
    ),
    ("gather_empty_indices", lambda: ops.gather(p((3,)), i64((0,))), "f32[0]"),
    ("gather_nd", lambda: ops.gather_nd(p((3, 4, 2)), i64((5, 2))), "f32[5,2]"),
    ("gather_nd_full", lambda: ops.gather_nd(p((3, 4)), p((2, 1, 2), og.i32)), "f32[2,1]"),
    (
        "gather_nd_batch_dims",
        lambda: ops.gather_nd(p((2, 3, 4)), i64((2, 5, 1)), batch_dims=1),
        "f32[2,5,4]",
    ),
    ("gather_elements", lambda: ops.gather_elements(p((3, 4)), i64((3, 7)), 1), "f32[3,7]"),
    ("gather_elements_smaller", lambda: ops.gather_elements(p((3, 4)), i64((2, 1))), "f32[2,1]"),
    (
        "scatter_elements",
        lambda: ops.scatter_elements(p((3, 4)), i64((2, 4)), p((2, 4))),
        "f32[3,4]",
    ),
    (
        "scatter_elements_bool_none",
        lambda: ops.scatter_elements(p((3,), og.boolean), i64((2,)), p((2,), og.boolean)),
        "boolean[3]",
    ),
    (
        "scatter_elements_reduction_member",
        lambda: ops.scatter_elements(
            p((3,), og.i8), i64((5,)), p((5,), og.i8), 0, ops.ScatterReduction.MUL
        ),
        "i8[3]",
    ),
    ("scatter_nd", lambda: ops.scatter_nd(p((4, 3)), i64((2, 1)), p((2, 3))), "f32[4,3]"),
    (
        "scatter_nd_elements",
        lambda: ops.scatter_nd(p((4, 3)), p((5, 2), og.i32), p((5,)), "max"),
        "f32[4,3]",
    ),
    ("one_hot", lambda: ops.one_hot(i64((2, 3)), 4), "f32[2,3,4]"),
    ("one_hot_axis0", lambda: ops.one_hot(p((2,), og.u8), 5, axis=0), "f32[5,2]"),
    ("one_hot_middle", lambda: ops.one_hot(i64((2, 3)), 4, axis=-2), "f32[2,4,3]"),
    ("one_hot_scalar", lambda: ops.one_hot(p((), og.i32), 3, element_type=og.i32), "i32[3]"),
    (
        "one_hot_boolean",
        lambda: ops.one_hot(i64((2,)), 3, element_type="boolean"),
        "boolean[2,3]",
    ),
    ("one_hot_depth_zero", lambda: ops.one_hot(i64((2,)), 0), "f32[2,0]"),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    (
        "gather_indices_float",
        lambda: ops.gather(p((3,)), p((2,))),
        "Gather: indices element type f32 is not supported; expected one of i32, i64",
    ),
    (
        "gather_indices_i16",
        lambda: ops.gather(p((3,)), p((2,), og.i16)),
        "indices element type i16 is not supported",
    ),
    ("gather_scalar_x", lambda: ops.gather(p(()), i64((1,))), "x must have rank >= 1"),
    ("gather_axis_oob", lambda: ops.gather(p((3, 4)), i64((1,)), 2), "axis 2 is out of range"),
    (
        "gather_batch_dims_past_axis",
        lambda: ops.gather(p((2, 3)), i64((2, 1)), axis=0, batch_dims=1),
        "batch_dims 1 must not exceed axis 0",
    ),
    (
        "gather_batch_dims_oob",
        lambda: ops.gather(p((2, 3, 4)), i64((2, 3)), axis=2, batch_dims=3),
        "batch_dims 3 is out of range for indices of rank 2",
    ),
    (
        "gather_batch_shapes",
        lambda: ops.gather(p((2, 3)), i64((3, 1)), axis=1, batch_dims=1),
        "the 1 batch dimension(s) differ: x f32[2,3] vs indices i64[3,1]",
    ),
    ("gather_nd_scalar_indices", lambda: ops.gather_nd(p((3,)), i64(())), "rank >= 1"),
    (
        "gather_nd_index_too_long",
        lambda: ops.gather_nd(p((3, 4)), i64((2, 3))),
        "GatherND: indices.shape[-1] = 3 must be in [1, 2]",
    ),
    (
        "gather_nd_empty_tuple",
        lambda: ops.gather_nd(p((3, 4)), i64((2, 0))),
        "indices.shape[-1] = 0 must be in [1, 2]",
    ),
    (
        "gather_nd_batch_dims",
        lambda: ops.gather_nd(p((3, 4)), i64((3, 1)), batch_dims=2),
        "batch_dims 2 must be >= 0 and below both ranks (2, 2)",
    ),
    (
        "gather_nd_batch_shapes",
        lambda: ops.gather_nd(p((3, 4)), i64((2, 1)), batch_dims=1),
        "the 1 batch dimension(s) differ",
    ),
    (
        "gather_nd_indices_type",
        lambda: ops.gather_nd(p((3, 4)), p((2, 1), og.u32)),
        "indices element type u32 is not supported",
    ),
    (
        "gather_elements_rank",
        lambda: ops.gather_elements(p((3, 4)), i64((3,))),
        "GatherElements: indices rank 1 differs from x rank 2",
    ),
    (
        "gather_elements_larger",
        lambda: ops.gather_elements(p((3, 4)), i64((2, 5))),
        "indices dimension 5 exceeds x dimension 4 on axis 1 (not the indexed axis)",
    ),
    (
        "gather_elements_axis_oob",
        lambda: ops.gather_elements(p((3, 4)), i64((3, 4)), -3),
        "axis -3 is out of range for rank 2",
    ),
    (
        "gather_elements_indices_type",
        lambda: ops.gather_elements(p((3,)), p((3,), og.boolean)),
        "indices element type boolean is not supported",
    ),
    (
        "scatter_elements_updates_shape",
        lambda: ops.scatter_elements(p((3, 4)), i64((2, 3)), p((2, 2))),
        "ScatterElements: updates shape [2, 2] differs from indices shape [2, 3]",
    ),
    (
        "scatter_elements_updates_type",
        lambda: ops.scatter_elements(p((3,)), i64((2,)), p((2,), og.f64)),
        "element types of x and updates differ: f32 vs f64",
    ),
    (
        "scatter_elements_bool_add",
        lambda: ops.scatter_elements(p((3,), og.boolean), i64((2,)), p((2,), og.boolean), 0, "add"),
        "x (reduction add) element type boolean is not supported",
    ),
    (
        "scatter_elements_reduction_unknown",
        lambda: ops.scatter_elements(p((3,)), i64((2,)), p((2,)), 0, "sum"),
        "ScatterElements: reduction must be one of 'none', 'add', 'mul', 'max', 'min' (or a ScatterReduction member), got 'sum'",
    ),
    (
        "scatter_elements_indices_type",
        lambda: ops.scatter_elements(p((3,)), p((2,)), p((2,))),
        "indices element type f32 is not supported",
    ),
    (
        "scatter_elements_rank",
        lambda: ops.scatter_elements(p((3, 2)), i64((2,)), p((2,))),
        "indices rank 1 differs from x rank 2",
    ),
    (
        "scatter_elements_scalar",
        lambda: ops.scatter_elements(p(()), i64(()), p(())),
        "x must have rank >= 1",
    ),
    (
        "scatter_nd_index_too_long",
        lambda: ops.scatter_nd(p((4, 3)), i64((2, 3)), p((2,))),
        "ScatterND: indices.shape[-1] = 3 must be in [1, 2]",
    ),
    (
        "scatter_nd_updates_shape",
        lambda: ops.scatter_nd(p((4, 3)), i64((2, 1)), p((2,))),
        "updates shape [2] must be indices.shape[:-1] + x.shape[1:] = [2, 3]",
    ),
    ("scatter_nd_scalar_indices", lambda: ops.scatter_nd(p((4,)), i64(()), p(())), "rank >= 1"),
    (
        "scatter_nd_bool_max",
        lambda: ops.scatter_nd(p((3,), og.boolean), i64((1, 1)), p((1,), og.boolean), "max"),
        "x (reduction max) element type boolean is not supported",
    ),
    (
        "one_hot_indices_float",
        lambda: ops.one_hot(p((2,)), 3),
        "OneHot: indices element type f32 is not supported",
    ),
    ("one_hot_negative_depth", lambda: ops.one_hot(i64((2,)), -1), "depth must be >= 0, got -1"),
    ("one_hot_axis_oob", lambda: ops.one_hot(i64((2, 3)), 4, axis=3), "axis 3 is out of range"),
    (
        "one_hot_on_value_range",
        lambda: ops.one_hot(i64((2,)), 3, on_value=300, element_type=og.u8),
        "OneHot: on_value 300 does not fit u8: value 300 is out of range for u8",
    ),
    (
        "one_hot_off_value_fraction",
        lambda: ops.one_hot(i64((2,)), 3, off_value=0.5, element_type=og.i32),
        "off_value 0.5 does not fit i32: i32 needs integral values",
    ),
    (
        "one_hot_on_value_bool",
        lambda: ops.one_hot(i64((2,)), 3, on_value=2, element_type=og.boolean),
        "on_value 2 does not fit boolean",
    ),
    (
        "one_hot_element_type",
        lambda: ops.one_hot(i64((2,)), 3, element_type="float"),
        "unknown element type",
    ),
    ("one_hot_depth_float", lambda: ops.one_hot(i64((2,)), 2.5), "depth must be an integer"),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


def test_canonical_attributes():
    assert ops.gather(p((2, 3, 4)), i64((2, 3)), -1, -1).node.op.batch_dims == 1
    assert ops.gather(p((2, 3, 4)), i64((2, 3)), -1, -1).node.op.axis == 2
    assert ops.gather_elements(p((2, 3)), i64((2, 3)), -1).node.op.axis == 1
    assert ops.one_hot(i64((2, 3)), 4).node.op.axis == 2
    scatter = ops.scatter_elements(p((3,)), i64((2,)), p((2,)), -1, "max").node.op
    assert (scatter.axis, scatter.reduction) == (0, ops.ScatterReduction.MAX)
    hot = ops.one_hot(i64((2,)), 3, on_value=1, off_value=0, element_type=og.boolean).node.op
    assert (hot.on_value, hot.off_value) == (True, False)
    assert type(ops.one_hot(i64((2,)), 3, on_value=2).node.op.on_value) is float


def _run(outputs, params, *args):
    fn = og.Function(list(outputs), list(params))
    return og.backend("INTERPRETER").compile(fn)(*args)


@pytest.mark.parametrize(
    ("build", "indices", "message"),
    [
        (
            lambda x, i: ops.gather(x, i),
            [0, 3],
            r"Gather: index 3 at indices\[1\] is out of range for axis 0 of size 3",
        ),
        (
            lambda x, i: ops.gather(x, i),
            [-4, 0],
            r"Gather: index -4 at indices\[0\] is out of range for axis 0 of size 3 "
            r"\(valid: -3\.\.2\)",
        ),
        (
            lambda x, i: ops.gather_elements(x, i),
            [[1, 0, 7]],
            r"GatherElements: index 7 at indices\[0, 2\] is out of range for axis 0",
        ),
        (
            lambda x, i: ops.gather_nd(x, i),
            [[0, 9]],
            r"GatherND: index 9 at indices\[0, 1\] is out of range for the indexed axes of size 4",
        ),
        (
            lambda x, i: ops.scatter_nd(x, i, ops.slice(x, (0, 0), (1, 4))),
            [[5]],
            r"ScatterND: index 5 at indices\[0, 0\]",
        ),
        (
            lambda x, i: ops.scatter_elements(x, i, ops.slice(x, (0, 0), (1, 3))),
            [[0, -9, 0]],
            r"ScatterElements: index -9 at indices\[0, 1\]",
        ),
    ],
    ids=["gather", "gather_negative", "gather_elements", "gather_nd", "scatter_nd", "scatter"],
)
def test_out_of_range_index_is_an_execution_error_naming_node_and_index(build, indices, message):
    x = p((3, 4))
    array = np.asarray(indices, np.int64)
    i = og.parameter(og.i64, array.shape)
    with pytest.raises(og.ExecutionError, match=message) as info:
        _run([build(x, i)], [x, i], np.zeros((3, 4), np.float32), array)
    assert "while executing %" in str(info.value)
    assert "(built at test_indexing_type_rules.py:" in str(info.value)


def test_scatter_none_last_write_wins():
    x, i, u = p((3,)), i64((4,)), p((4,))
    (got,) = _run(
        [ops.scatter_elements(x, i, u)],
        [x, i, u],
        np.zeros(3, np.float32),
        np.array([1, 1, -2, 0], np.int64),
        np.array([10, 20, 30, 40], np.float32),
    )
    assert got.tolist() == [40.0, 30.0, 0.0]


@pytest.mark.parametrize(
    ("reduction", "expected"),
    [("add", [1, 65, 2]), ("mul", [1, 30000, 2]), ("max", [1, 30, 2]), ("min", [1, 5, 2])],
)
def test_scatter_reductions_include_the_data(reduction, expected):
    x, i, u = p((3,), og.i32), i64((3,)), p((3,), og.i32)
    (got,) = _run(
        [ops.scatter_nd(x, ops.reshape(i, (3, 1)), u, reduction)],
        [x, i, u],
        np.array([1, 5, 2], np.int32),
        np.array([1, -2, 1], np.int64),
        np.array([10, 20, 30], np.int32),
    )
    assert got.tolist() == expected


def test_one_hot_out_of_range_row_is_all_off_and_negatives_wrap():
    i = p((4,), og.i32)
    (got,) = _run(
        [ops.one_hot(i, 3, on_value=7, off_value=-1, element_type=og.i8)],
        [i],
        np.array([3000000, -1, -4, 1], np.int32),
    )
    assert got.tolist() == [[-1, -1, -1], [-1, -1, 7], [-1, -1, -1], [-1, 7, -1]]


def test_one_hot_is_not_differentiable():
    assert not ops.OneHot.differentiable
