"""unique, non_max_suppression, compress and boolean_mask: type rules (fresh bounded symbols,
one test per error), runs at several data-decided sizes of one compile and at two bindings of
symbolic inputs, the compress gradient against central differences on INTERPRETER,
serializer round trips (format 2), printing and the visualizer showing the fresh symbols. The
numerics of every record against the oracle are in tests/numerics/test_op_records.py
(DATA_DEPENDENT_RECORDS)."""

import io
import json
import zipfile

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.dim import free_symbols
from opgraph.passes import specialize_shapes
from opgraph.serialize import deserialize, serialize
from opgraph.testing.compare import assert_close
from opgraph.testing.gradcheck import check_gradients
from opgraph.testing.oracle import evaluate
from opgraph.testing.records import DATA_DEPENDENT_RECORDS
from opgraph.testing.symbolic import symbolic_case
from opgraph.visualize import to_dot

NEW = ("unique", "nms", "compress", "boolean_mask")
RECORDS = [r for r in DATA_DEPENDENT_RECORDS if r.name.startswith(NEW)]
INTERPRETER = og.backend("INTERPRETER")


def p(shape, t=og.f32):
    return og.parameter(t, shape)


def symbol_of(value):
    (symbol,) = free_symbols(value.type.shape)
    return symbol


# ----------------------------------------------------------------------------- type rules
def test_unique_types_flattened():
    values, first, inverse, counts = ops.unique(p((3, 4), og.i32))
    n = symbol_of(values)
    assert (n.min, n.max) == (0, 12) and n.name.startswith("_unique")
    assert str(values.type) == f"i32[{n.name}]"
    assert str(first.type) == str(counts.type) == f"i64[{n.name}]"
    assert str(inverse.type) == "i64[12]"
    assert values.node.op.bound_symbols() == (n,)


def test_unique_types_negative_axis():
    values, _, inverse, _ = ops.unique(p((2, 5, 3)), axis=-2)
    n = symbol_of(values)
    assert values.node.op.axis == 1 and n.max == 5
    assert str(values.type) == f"f32[2,{n.name},3]" and str(inverse.type) == "i64[5]"


def test_unique_symbolic_input_bound():
    values = ops.unique(p((og.dim("b", max=4), 3)), axis=0)[0]
    assert symbol_of(values).max == 4
    assert symbol_of(ops.unique(p((og.dim("u"),)))[0]).max is None


def test_unique_each_node_has_its_own_symbol():
    x = p((4,))
    assert symbol_of(ops.unique(x)[0]) != symbol_of(ops.unique(x)[0])


def test_unique_rejects_axis_out_of_range():
    with pytest.raises(og.OpTypeError, match="axis 2 is out of range for rank 2"):
        ops.unique(p((2, 3)), axis=2)


def test_unique_rejects_count_above_element_count():
    with pytest.raises(og.OpTypeError, match="count 7 exceeds the 6 elements"):
        ops.Unique(7)(p((2, 3)))


def test_unique_rejects_bad_sorted_flag():
    with pytest.raises(og.OpTypeError, match="sorted must be a bool"):
        ops.unique(p((3,)), sorted="yes")


def _boxes(b=1, n=6, c=2, t=og.f32):
    return p((b, n, 4), t), p((b, c, n), t)


def test_nms_type_and_bound_from_constant_limit():
    boxes, scores = _boxes(b=2, n=6, c=3)
    selected = ops.non_max_suppression(boxes, scores, 4, 0.5, 0.1)
    n = symbol_of(selected)
    assert str(selected.type) == f"i64[{n.name},3]" and n.name.startswith("_nms")
    assert n.max == 2 * 3 * 4  # batch * classes * min(limit, boxes)


def test_nms_bound_without_constant_limit():
    boxes, scores = _boxes(b=2, n=6, c=3)
    limit = p((1,), og.i64)
    assert symbol_of(ops.non_max_suppression(boxes, scores, limit)).max == 2 * 3 * 6


def test_nms_absent_inputs_are_empty_vectors():
    selected = ops.non_max_suppression(*_boxes())
    limit, iou, score = selected.node.inputs[2:]
    assert [str(v.type) for v in (limit, iou, score)] == ["i64[0]", "f32[0]", "f32[0]"]
    assert symbol_of(selected).max == 0  # ONNX: an absent limit selects nothing


def test_nms_symbolic_boxes_unify():
    batch, count = og.dim("batch"), og.dim("count")
    boxes, scores = p((batch, count, 4)), p((batch, 3, count))
    assert symbol_of(ops.non_max_suppression(boxes, scores, 2)).max is None


@pytest.mark.parametrize(
    ("boxes", "scores", "message"),
    [
        ((1, 6, 3), (1, 2, 6), "boxes must be \\[batch, boxes, 4\\]"),
        ((6, 4), (1, 2, 6), "boxes must be \\[batch, boxes, 4\\]"),
        ((1, 6, 4), (1, 2, 5), "do not match boxes"),
        ((2, 6, 4), (1, 2, 6), "do not match boxes"),
        ((1, 6, 4), (2, 6), "scores must be \\[batch, classes, boxes\\]"),
    ],
)
def test_nms_rejects_bad_shapes(boxes, scores, message):
    with pytest.raises(og.OpTypeError, match=message):
        ops.non_max_suppression(p(boxes), p(scores), 2)


def test_nms_rejects_integer_boxes_and_mixed_types():
    with pytest.raises(og.OpTypeError, match="boxes element type i32 is not supported"):
        ops.non_max_suppression(p((1, 2, 4), og.i32), p((1, 1, 2), og.i32), 1)
    with pytest.raises(og.OpTypeError, match="of the boxes' element type f32"):
        ops.non_max_suppression(p((1, 2, 4)), p((1, 1, 2), og.f64), 1)


@pytest.mark.parametrize(
    ("limit", "iou", "message"),
    [
        (p((2,), og.i64), 0.5, "max_output_boxes_per_class must be a scalar"),
        (p((), og.f32), 0.5, "max_output_boxes_per_class element type f32"),
        (1, p((1, 1)), "iou_threshold must be a scalar"),
        (1, p((), og.i64), "iou_threshold element type i64"),
    ],
)
def test_nms_rejects_bad_scalar_inputs(limit, iou, message):
    with pytest.raises(og.OpTypeError, match=message):
        ops.non_max_suppression(*_boxes(), limit, iou)


def test_nms_rejects_non_number_argument():
    with pytest.raises(og.OpTypeError, match="expected an Output, a number or None, got 'x'"):
        ops.non_max_suppression(*_boxes(), "x")


def test_nms_rejects_bad_center_point_box():
    with pytest.raises(og.OpTypeError, match="center_point_box must be a bool, got 2"):
        ops.non_max_suppression(*_boxes(), 1, center_point_box=2)


def test_compress_types():
    x, keep = p((2, 5, 3)), p((4,), og.boolean)
    y = ops.compress(x, keep, axis=-2)
    n = symbol_of(y)
    assert y.node.op.axis == 1 and n.max == 4 and n.name.startswith("_compress")
    assert str(y.type) == f"f32[2,{n.name},3]"
    flat = ops.compress(x, p((30,), og.boolean))
    assert str(flat.type) == f"f32[{symbol_of(flat).name}]"


@pytest.mark.parametrize(
    ("condition", "axis", "message"),
    [
        (p((3,), og.i64), 0, "condition must be a boolean vector, got i64\\[3\\]"),
        (p((3, 1), og.boolean), 0, "condition must be a boolean vector"),
        (p((4,), og.boolean), 0, "condition boolean\\[4\\] is longer than f32\\[3,2\\] along"),
        (p((7,), og.boolean), None, "is longer than f32\\[3,2\\] flattened \\(6\\)"),
        (p((2,), og.boolean), 2, "axis 2 is out of range for rank 2"),
    ],
)
def test_compress_rejects(condition, axis, message):
    with pytest.raises(og.OpTypeError, match=message):
        ops.compress(p((3, 2)), condition, axis=axis)


def test_boolean_mask_types():
    x = p((2, 3, 4))
    y = ops.boolean_mask(x, p((2, 3), og.boolean))
    n = symbol_of(y)
    assert str(y.type) == f"f32[{n.name},4]" and n.max == 6


@pytest.mark.parametrize(
    ("mask", "message"),
    [((2, 3), "got boolean\\[2,3\\]"), ((3,), "got boolean\\[3\\]"), ((), "got boolean\\[\\]")],
)
def test_boolean_mask_rejects_mask_not_a_prefix(mask, message):
    with pytest.raises(og.OpTypeError, match=f"boolean_mask: mask must be .*{message}"):
        ops.boolean_mask(p((2, 4)), p(mask, og.boolean))


def test_boolean_mask_rejects_non_boolean_mask():
    with pytest.raises(og.OpTypeError, match="boolean_mask: mask must be a boolean"):
        ops.boolean_mask(p((2, 4)), p((2,), og.i32))


def test_marks():
    assert ops.Unique.differentiable is False and ops.NonMaxSuppression.differentiable is False
    assert ops.Compress.has_vjp()


# ------------------------------------------------------------------- runs at several sizes
def test_unique_one_compile_many_counts():
    x = p((6,), og.i64)
    fn = og.Function(list(ops.unique(x, sorted=False)), [x])
    exe = INTERPRETER.compile(fn)
    for data in ([3, 1, 3, 2, 1, 3], [5] * 6, [0, 1, 2, 3, 4, 5]):
        values, first, inverse, counts = exe(np.array(data, np.int64))
        want = list(dict.fromkeys(data))
        assert values.tolist() == want
        assert [data[i] for i in first] == want
        assert [want[i] for i in inverse] == data
        assert counts.tolist() == [data.count(v) for v in want]


def test_nms_with_computed_limit_and_thresholds():
    boxes, scores = _boxes(n=3, c=1)
    limit, iou = p((), og.i64), p((), og.f32)
    fn = og.Function(
        [ops.non_max_suppression(boxes, scores, limit, iou)], [boxes, scores, limit, iou]
    )
    exe = INTERPRETER.compile(fn)
    b = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6]]], np.float32)
    s = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    (kept,) = exe(b, s, np.array(3), np.array(0.5, np.float32))
    assert kept[:, 2].tolist() == [0, 2]  # box 1 overlaps box 0 (IoU 0.82)
    (kept,) = exe(b, s, np.array(3), np.array(0.9, np.float32))
    assert kept[:, 2].tolist() == [0, 1, 2]
    (kept,) = exe(b, s, np.array(-1), np.array(0.5, np.float32))
    assert kept.shape == (0, 3)  # a negative limit selects nothing, as in ONNX


def test_nms_over_many_boxes_works_row_by_row():
    """The kernel compares each kept box with all boxes (memory O(N)), never all pairs: 20000
    boxes would need 400 million pairwise IoUs."""
    boxes, scores = _boxes(n=20000, c=2)
    exe = INTERPRETER.compile(
        og.Function([ops.non_max_suppression(boxes, scores, 50, 0.5, 0.05)], [boxes, scores])
    )
    rng = np.random.default_rng(0)
    corner = rng.uniform(0, 100, (1, 20000, 2))
    b = np.concatenate([corner, corner + 5], axis=-1).astype(np.float32)
    s = rng.uniform(0, 1, (1, 2, 20000)).astype(np.float32)
    (kept,) = exe(b, s)
    assert kept.shape == (100, 3)
    for c in range(2):
        picked = kept[kept[:, 1] == c, 2]
        assert np.all(np.diff(s[0, c, picked]) <= 0)  # best first


def test_compress_followed_by_elementwise_and_result_shape():
    x, keep = p((4, 2)), p((4,), og.boolean)
    y = ops.compress(x, keep, axis=0)
    fn = og.Function([y * 2.0, ops.shape_of(y)], [x, keep])
    exe = INTERPRETER.compile(fn)
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    for mask in ([1, 0, 1, 1], [0, 0, 0, 0]):
        doubled, shape = exe(data, np.array(mask, bool))
        np.testing.assert_array_equal(doubled, 2 * data[np.array(mask, bool)])
        assert shape.tolist() == [sum(mask), 2]


def test_compress_symbolic_condition_longer_than_axis_fails_at_run_time():
    x, keep = p((3,)), p((og.dim("k"),), og.boolean)
    exe = INTERPRETER.compile(og.Function([ops.compress(x, keep, axis=0)], [x, keep]))
    with pytest.raises(og.OpgraphError, match="condition has 4 entries, more than the 3"):
        exe(np.zeros(3, np.float32), np.ones(4, bool))


#: Records without a symbolic form: a scalar input, and NMS records whose boxes hold fixed
#: values (the last axis must stay 4, and fixed values give no other scheme to try).
STATIC_ONLY = frozenset(
    {"unique_scalar", "nms_thresholds_as_values"}
    | {r.name for r in RECORDS if r.name.startswith("nms_") and r.inputs[0].values is not None}
)


@pytest.mark.parametrize("record", [pytest.param(r, id=r.name) for r in RECORDS])
def test_record_at_two_bindings_of_symbolic_inputs(record):
    element_type = record.element_types[0]
    case = symbolic_case(record, element_type)
    if case is None:
        assert record.name in STATIC_ONLY, f"{record.name} no longer builds symbolically"
        return
    assert record.name not in STATIC_ONLY
    exe = INTERPRETER.compile(case.function)
    for binding in case.bindings:
        args = case.arguments(element_type, binding)
        want = evaluate(specialize_shapes(case.function, binding), args)
        for i, (g, w) in enumerate(zip(exe(*args), want, strict=True)):
            assert_close(g, w, 0.0, 0.0, f"{record.name} with {binding}: result {i}")


# ---------------------------------------------------------------------------- gradients
GRADIENT_RECORDS = [pytest.param(r, id=r.name) for r in RECORDS if r.differentiable]


def _objective(record):
    """``Σ sin(y)·(1 + y)`` of the record's f64 result: a static scalar for central
    differences, nonlinear so the cotangent differs per kept position."""
    fn = record.function(et.f64)
    (y,) = fn.results
    loss = ops.reduce_sum(ops.sin(y) * (y + 1.0), list(range(y.type.rank)))
    return og.Function([loss], fn.parameters)


@pytest.mark.parametrize("record", GRADIENT_RECORDS)
def test_compress_gradient_matches_central_differences(record):
    assert len(GRADIENT_RECORDS) >= 8
    check_gradients(_objective(record), record.arguments(et.f64))


def test_compress_gradient_one_compile_two_conditions():
    x, keep = p((5, 2), og.f64), p((5,), og.boolean)
    y = ops.compress(x, keep, axis=0)
    loss = ops.reduce_sum(y * y, [0, 1])
    grad = og.autodiff.backprop(og.Function([loss], [x, keep]), wrt=[x])
    exe = INTERPRETER.compile(grad)
    data = np.arange(10, dtype=np.float64).reshape(5, 2)
    for mask in ([1, 0, 0, 1, 1], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]):
        kept = np.array(mask, bool)
        _, dx = exe(data, kept)
        np.testing.assert_array_equal(dx, np.where(kept[:, None], 2 * data, 0.0))


# -------------------------------------------------------------- serializer, printing, dot
@pytest.mark.parametrize("record", [pytest.param(r, id=r.name) for r in RECORDS])
def test_round_trip_keeps_fresh_symbols(record):
    element_type = record.element_types[0]
    fn = record.function(element_type)
    data = serialize(fn)
    document = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("graph.json"))
    assert document["format_version"] == 2
    assert any(entry["name"].startswith("_") for entry in document["symbols"])
    loaded = deserialize(data)
    assert str(loaded) == str(fn)
    assert serialize(loaded) == data
    args = record.arguments(element_type)
    for got, want in zip(INTERPRETER.compile(loaded)(*args), evaluate(fn, args), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_printing_and_dot_show_the_fresh_symbols():
    x = p((4,))
    values = ops.unique(x)[0]
    kept = ops.compress(x, p((4,), og.boolean))
    fn = og.Function([values, kept], [x, *kept.node.inputs[1:]])
    names = [symbol_of(values).name, symbol_of(kept).name]
    text, dot = str(fn), to_dot(fn)
    for name in names:
        assert f"f32[{name}]" in text and name in dot
    assert f"Unique[count={names[0]}," in text


def test_compress_gradient_with_symbolic_data_and_condition_lengths():
    x, keep = p((og.dim("d"), 2), og.f64), p((og.dim("k"),), og.boolean)
    y = ops.compress(x, keep, axis=0)
    loss = ops.reduce_sum(y * y, [0, 1])
    exe = INTERPRETER.compile(og.autodiff.backprop(og.Function([loss], [x, keep]), wrt=[x]))
    data = np.arange(10, dtype=np.float64).reshape(5, 2)
    for rows, mask in ((5, [1, 0, 1]), (3, [0, 1, 1])):  # a short condition drops the rest
        kept = np.zeros(rows, bool)
        kept[: len(mask)] = mask
        _, dx = exe(data[:rows], np.array(mask, bool))
        np.testing.assert_array_equal(dx, np.where(kept[:, None], 2 * data[:rows], 0.0))
