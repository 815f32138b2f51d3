"""ONNX models whose shape-like inputs (a Reshape target, Pad pads, Slice starts, TopK k, a
ReduceSum's axes, CumSum's axis…) are graph inputs import as they are, with no
``constant_inputs=``, and one INTERPRETER compile matches onnxruntime at different values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph as og

onnx = pytest.importorskip("onnx", reason="the ONNX bridge needs the onnx package")
from onnx import TensorProto, helper  # noqa: E402

from opgraph.frontends.onnx import import_model  # noqa: E402
from opgraph.frontends.onnx.deferred import RunTimeOnnxNode  # noqa: E402

I64, F32 = TensorProto.INT64, TensorProto.FLOAT


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], opset: int = 18) -> Any:
    graph = helper.make_graph(nodes, "as_is", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _onnxruntime(model: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime", reason="the reference run needs onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, feed))


def _shape_model() -> Any:
    """x -> Reshape(x, shape) -> Pad(., pads) -> Slice(., starts, ends) -> TopK(., k)."""
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Pad", ["r", "pads"], ["p"], mode="constant"),
        helper.make_node("Slice", ["p", "starts", "ends", "axes"], ["s"]),
        helper.make_node("TopK", ["s", "k"], ["values", "indices"], axis=-1),
    ]
    inputs = [
        helper.make_tensor_value_info("x", F32, [2, 3, 4]),
        helper.make_tensor_value_info("shape", I64, [2]),
        helper.make_tensor_value_info("pads", I64, [4]),
        helper.make_tensor_value_info("starts", I64, [1]),
        helper.make_tensor_value_info("ends", I64, [1]),
        helper.make_tensor_value_info("k", I64, [1]),
    ]
    axes = helper.make_tensor("axes", I64, [1], [0])
    graph = helper.make_graph(
        nodes,
        "shapes_as_inputs",
        inputs,
        [
            helper.make_tensor_value_info("values", F32, None),
            helper.make_tensor_value_info("indices", I64, None),
        ],
        [axes],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_shape_inputs_import_without_hints_and_match_onnxruntime_at_two_values() -> None:
    model = _shape_model()
    fn = import_model(model)  # no input_shapes, no constant_inputs
    kinds = {n.op.name for n in fn.nodes}
    assert {"DynamicReshape", "DynamicPad", "DynamicSlice", "DynamicTopK"} <= kinds
    exe = og.backend("INTERPRETER").compile(fn)
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    for shape, pads, start, end, k in (
        ([6, 4], [1, 0, 0, 2], -5, 100, 3),
        ([3, -1], [0, 1, 2, 0], 1, 4, 2),
    ):
        feed = {
            "x": x,
            "shape": np.array(shape, np.int64),
            "pads": np.array(pads, np.int64),
            "starts": np.array([start], np.int64),
            "ends": np.array([end], np.int64),
            "k": np.array([k], np.int64),
        }
        want = _onnxruntime(model, feed)
        got = exe(*(feed[i.name] for i in model.graph.input))
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_axes_as_inputs_run_as_onnx_nodes_converted_at_run_time() -> None:
    nodes = [
        helper.make_node("ReduceSum", ["x", "axes"], ["sum"], keepdims=0),
        helper.make_node("CumSum", ["x", "axis"], ["cum"]),
        helper.make_node("Unsqueeze", ["sum", "where"], ["u"]),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", F32, [3, 4]),
            helper.make_tensor_value_info("axes", I64, [1]),
            helper.make_tensor_value_info("axis", I64, []),
            helper.make_tensor_value_info("where", I64, [1]),
        ],
        [
            helper.make_tensor_value_info("u", F32, None),
            helper.make_tensor_value_info("cum", F32, [3, 4]),
        ],
    )
    fn = import_model(model)
    assert sum(isinstance(n.op, RunTimeOnnxNode) for n in fn.nodes) == 3
    assert str(fn.results[1].type) == "f32[3,4]"  # ONNX types CumSum's output: no fresh symbol
    exe = og.backend("INTERPRETER").compile(fn)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for axes, axis, where in ((0, 1, 0), (1, 0, 1)):
        feed = {
            "x": x,
            "axes": np.array([axes], np.int64),
            "axis": np.array(axis, np.int64),
            "where": np.array([where], np.int64),
        }
        want = _onnxruntime(model, feed)
        got = exe(*(feed[i.name] for i in model.graph.input))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_constant_inputs_still_specialise() -> None:
    model = _shape_model()
    values = {
        "shape": np.array([6, 4], np.int64),
        "pads": np.array([0, 0, 0, 0], np.int64),
        "starts": np.array([0], np.int64),
        "ends": np.array([2], np.int64),
        "k": np.array([1], np.int64),
    }
    fn = import_model(model, constant_inputs=values)
    assert [p.node.name for p in fn.parameters] == ["x"]
    assert str(fn.results[0].type) == "f32[2,1]" and not any(n.op.bound_symbols() for n in fn.nodes)


def test_a_run_time_reshape_target_of_unknown_length_is_a_conversion_error() -> None:
    # The output rank is the target's length: it must be static.
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", F32, [2, 3]),
            helper.make_tensor_value_info("shape", I64, ["n"]),
        ],
        [helper.make_tensor_value_info("y", F32, None)],
    )
    with pytest.raises(og.ConversionError, match="static length"):
        import_model(model)


def test_a_wrong_run_time_value_is_an_execution_error_naming_the_node() -> None:
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1, name="sum")]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", F32, [3, 4]),
            helper.make_tensor_value_info("axes", I64, [1]),
        ],
        [helper.make_tensor_value_info("y", F32, None)],
    )
    exe = og.backend("INTERPRETER").compile(import_model(model))
    with pytest.raises(og.ExecutionError, match="ReduceSum"):
        exe(np.ones((3, 4), np.float32), np.array([5], np.int64))


def test_run_time_onnx_node_survives_the_serializer() -> None:
    from opgraph.serialize import deserialize, serialize

    nodes = [helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", F32, [3, 4]),
            helper.make_tensor_value_info("k", I64, []),
        ],
        [helper.make_tensor_value_info("y", F32, [3, 4])],
    )
    loaded = deserialize(serialize(import_model(model)))
    exe = og.backend("INTERPRETER").compile(loaded)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in (0, -1, 2):
        (y,) = exe(x, np.array(k, np.int64))
        np.testing.assert_array_equal(y, np.tril(x, k))


def test_run_time_sizes_that_must_agree_make_the_whole_model_run_time() -> None:
    # Two Expands to run-time shapes give distinct symbols; adding their results needs them
    # equal, which only the values say: the model is converted whole when it runs.
    nodes = [
        helper.make_node("Expand", ["a", "s"], ["ea"]),
        helper.make_node("Expand", ["b", "s"], ["eb"]),
        helper.make_node("Add", ["ea", "eb"], ["y"]),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("a", F32, [1, 3]),
            helper.make_tensor_value_info("b", F32, [2, 1]),
            helper.make_tensor_value_info("s", I64, [2]),
        ],
        [helper.make_tensor_value_info("y", F32, None)],
    )
    with pytest.raises(og.ConversionError, match="NeedsConstant|needed at import|broadcast"):
        import_model(model, run_time_values=False)
    fn = import_model(model)
    from opgraph.frontends.onnx.deferred import RunTimeOnnxModel

    assert [type(n.op) for n in fn.nodes if n.op.name.startswith("RunTime")] == [RunTimeOnnxModel]
    exe = og.backend("INTERPRETER").compile(fn)
    a = np.arange(3, dtype=np.float32).reshape(1, 3)
    b = np.arange(2, dtype=np.float32).reshape(2, 1)
    for shape in ([2, 3], [1, 1]):
        feed = {"a": a, "b": b, "s": np.array(shape, np.int64)}
        (got,) = exe(a, b, feed["s"])
        np.testing.assert_array_equal(got, _onnxruntime(model, feed)[0])
