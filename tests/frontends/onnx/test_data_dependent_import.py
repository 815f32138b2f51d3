"""ONNX NonZero, Unique, NonMaxSuppression and Compress with data known only at run time:
the shipped node tests imported as is (only the input shapes given, no constant_inputs=) and
run on INTERPRETER, one import run at several data-decided sizes against onnxruntime,
constant data folded at import, declared output shapes, and export (the fresh symbols as
dim_param) checked against onnxruntime and a re-import."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")

import onnx_conformance as conformance  # noqa: E402  (tools/, on the path through conftest.py)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.onnx import export_model, import_model  # noqa: E402
from opgraph.testing.records import DATA_DEPENDENT_RECORDS  # noqa: E402

OPS = ("nonzero", "unique", "nonmaxsuppression", "compress")
NODE_TESTS = [n for n in conformance.test_names() if n.removeprefix("test_").startswith(OPS)]
DATA_OPS = (og.ops.NonZero, og.ops.Unique, og.ops.NonMaxSuppression, og.ops.Compress)
INTERPRETER = og.backend("INTERPRETER")


def _arrays(folder, prefix):
    paths = sorted(folder.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[-1]))
    arrays = []
    for path in paths:
        tensor = TensorProto()
        tensor.ParseFromString(path.read_bytes())
        arrays.append(numpy_helper.to_array(tensor))
    return arrays


@pytest.mark.skipif(not NODE_TESTS, reason="this onnx wheel ships no node test data")
@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_as_is_on_interpreter(name):
    folder = conformance.data_dir() / name
    model = onnx.load(str(folder / "model.onnx"))
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    for data_set in sorted(folder.glob("test_data_set_*")):
        inputs, expected = _arrays(data_set, "input"), _arrays(data_set, "output")
        fn = import_model(
            model, input_shapes={n: a.shape for n, a in zip(names, inputs, strict=True)}
        )
        assert any(isinstance(n.op, DATA_OPS) for n in fn.nodes)  # nothing specialised
        got = INTERPRETER.compile(fn)(*inputs)
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=0)


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _nonzero_gather_model():
    """x[NonZero(x)]: the values of the non-zero elements of a vector."""
    nodes = [
        helper.make_node("NonZero", ["x"], ["idx"]),
        helper.make_node("Squeeze", ["idx", "zero"], ["flat"]),
        helper.make_node("Gather", ["x", "flat"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    return _model(nodes, [x], [y], [zero])


def test_one_import_runs_at_several_data_sizes_like_onnxruntime():
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    model = _nonzero_gather_model()
    exe = INTERPRETER.compile(import_model(model))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for values in ([0, 1, 0, 2, 3, 0], [0] * 6, [4, 5, 6, 7, 8, 9]):
        x = np.array(values, np.float32)
        (got,) = exe(x)
        (want,) = session.run(None, {"x": x})
        np.testing.assert_array_equal(got, want)


def test_nms_with_run_time_thresholds_like_onnxruntime():
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    names = ["boxes", "scores", "limit", "iou", "score"]
    node = helper.make_node("NonMaxSuppression", names, ["selected"])
    inputs = [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 6, 4]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2, 6]),
        helper.make_tensor_value_info("limit", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("iou", TensorProto.FLOAT, [1]),
        helper.make_tensor_value_info("score", TensorProto.FLOAT, [1]),
    ]
    out = helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3])
    model = _model([node], inputs, [out], opset=11)
    exe = INTERPRETER.compile(import_model(model))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    boxes = rng.uniform(0, 2, (1, 6, 4)).astype(np.float32)
    scores = rng.uniform(0, 1, (1, 2, 6)).astype(np.float32)
    for limit, iou, score in ((3, 0.5, 0.0), (1, 0.2, 0.5), (6, 0.9, 0.0), (0, 0.5, 0.0)):
        args = [
            boxes,
            scores,
            np.array([limit], np.int64),
            np.array([iou], np.float32),
            np.array([score], np.float32),
        ]
        (got,) = exe(*args)
        (want,) = session.run(None, dict(zip(names, args, strict=True)))
        np.testing.assert_array_equal(got, want)


def test_constant_data_folds_at_import():
    data = numpy_helper.from_array(np.array([3, 1, 3, 2], np.int64), "data")
    node = helper.make_node("Unique", ["data"], ["y", "first", "inverse", "counts"], sorted=0)
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [2])
    outputs = [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ("y", "s")]
    add = helper.make_node("Add", ["x", "x"], ["s"])
    fn = import_model(_model([node, add], [x], outputs, [data]))
    assert str(fn.results[0].type) == "i64[3]"
    assert not any(isinstance(n.op, DATA_OPS) for n in fn.nodes)
    assert fn.results[0].node.op.value.tolist() == [3, 1, 2]


def test_declared_output_size_may_stand_for_a_data_decided_size():
    node = helper.make_node("NonZero", ["x"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    fits = helper.make_tensor_value_info("y", TensorProto.INT64, [1, 2])  # one example run's
    fn = import_model(_model([node], [x], [fits]))
    (y,) = INTERPRETER.compile(fn)(np.array([1, 0, 0, 0], np.float32))
    assert y.tolist() == [[0]]  # the declared 2 is not enforced at run time


@pytest.mark.parametrize(
    ("declared", "message"),
    [([1, 5], r"declared with shape \[1, 5\]"), ([2, 2], r"declared with shape \[2, 2\]")],
)
def test_declared_output_shape_that_cannot_hold_is_rejected(declared, message):
    node = helper.make_node("NonZero", ["x"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, declared)  # 5 > 4 elements; rank
    with pytest.raises(og.ConversionError, match=message):
        import_model(_model([node], [x], [y]))


# ------------------------------------------------------------------------------------- export
#: onnxruntime disagrees with ONNX's reference (numpy.unique) on these records.
ORT_DIFFERS = {
    "unique_nan": "onnxruntime drops NaNs from Unique's values; ONNX's reference keeps one"
}
NEW = ("unique", "nms", "compress", "boolean_mask", "non_zero")
EXPORTED = [r for r in DATA_DEPENDENT_RECORDS if r.name.startswith(NEW)]


def _exported(record):
    element_type = og.f32 if og.f32 in record.element_types else record.element_types[0]
    fn = record.function(element_type)
    return fn, record.arguments(element_type), export_model(fn, opset=17)


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(
            r,
            id=r.name,
            marks=[pytest.mark.xfail(strict=True, reason=ORT_DIFFERS[r.name])]
            if r.name in ORT_DIFFERS
            else [],
        )
        for r in EXPORTED
    ],
)
def test_export_matches_onnxruntime(record):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    fn, arguments, model = _exported(record)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    _same(
        session.run(None, dict(zip(names, arguments, strict=True))),
        INTERPRETER.compile(fn)(*arguments),
    )


@pytest.mark.parametrize("record", [pytest.param(r, id=r.name) for r in EXPORTED])
def test_export_import_round_trip(record):
    fn, arguments, model = _exported(record)
    back = import_model(model.SerializeToString())
    _same(INTERPRETER.compile(back)(*arguments), INTERPRETER.compile(fn)(*arguments))


def test_export_writes_fresh_symbols_as_dim_param():
    x = og.parameter(og.f32, (5,), name="x")
    values = og.ops.unique(x)[0]
    model = export_model(og.Function([values], [x]), opset=17)
    (dim,) = model.graph.output[0].type.tensor_type.shape.dim
    assert dim.dim_param == values.type.shape[0].terms[0][0][0][0].name
