"""Symbolic ONNX import: dim_param and unknown dimensions stay symbolic, shape subgraphs
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape) become symbolic reshape targets, one
INTERPRETER compile serves every size, and export writes symbolic dimensions as dim_param."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph as og

onnx = pytest.importorskip("onnx", reason="the ONNX bridge needs the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from opgraph.frontends.onnx import InferenceSession, export_model, import_model  # noqa: E402
from opgraph.passes.specialize_shapes import is_symbolic  # noqa: E402

RNG = np.random.default_rng(0)


def _weight(name: str, shape: tuple[int, ...]) -> Any:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _mlp(batch: str = "N") -> Any:
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        [_weight("w1", (4, 8)), _weight("b1", (8,)), _weight("w2", (8, 3))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ints(name: str, values: list[int]) -> Any:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _attention(batch: Any = "batch", seq: Any = "seq") -> Any:
    """One self-attention head pair whose Reshape targets come from Shape(x)."""
    heads, width = 2, 8
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axis0"], ["n1"]),
        helper.make_node("Unsqueeze", ["s", "axis0"], ["s1"]),
        helper.make_node("Concat", ["n1", "s1", "split"], ["heads_shape"], axis=0),
        helper.make_node("Concat", ["n1", "s1", "full"], ["merged_shape"], axis=0),
    ]
    for part in ("q", "k", "v"):
        nodes += [
            helper.make_node("MatMul", ["x", f"w{part}"], [f"{part}0"]),
            helper.make_node("Reshape", [f"{part}0", "heads_shape"], [f"{part}1"]),
            helper.make_node("Transpose", [f"{part}1"], [part], perm=[0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"]),
        helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "merged_shape"], ["y"]),
    ]
    model_width = heads * width
    initializers = [
        numpy_helper.from_array(np.int64(0), "zero"),
        numpy_helper.from_array(np.int64(1), "one"),
        _ints("axis0", [0]),
        _ints("split", [heads, width]),
        _ints("full", [model_width]),
    ] + [_weight(f"w{p}", (model_width, model_width)) for p in "qkv"]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, model_width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, model_width])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _onnxruntime(model: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime", reason="the reference run needs onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, feed))


def test_dynamic_batch_mlp_imports_symbolic_and_runs_every_batch_from_one_compile() -> None:
    model = _mlp()
    fn = import_model(model)
    assert "f32[N,4]" in str(fn) and "f32[N,3]" in str(fn)
    exe = og.backend("INTERPRETER").compile(fn)
    for batch in (1, 3, 8):
        x = RNG.standard_normal((batch, 4)).astype(np.float32)
        (got,) = exe(x)
        (want,) = _onnxruntime(model, {"x": x})
        assert got.shape == (batch, 3)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_shape_subgraph_becomes_symbolic_reshape() -> None:
    model = _attention()
    fn = import_model(model)
    assert "f32[batch,seq,16]" in str(fn)
    exe = og.backend("INTERPRETER").compile(fn)
    for batch, seq in ((1, 5), (3, 12)):
        x = RNG.standard_normal((batch, seq, 16)).astype(np.float32)
        (got,) = exe(x)
        (want,) = _onnxruntime(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_unnamed_unknown_dims_get_fresh_names() -> None:
    model = _attention(batch=None, seq="sequence length")
    fn = import_model(model)
    (parameter,) = fn.parameters
    assert str(parameter.type) == "f32[x_0,sequence_length,16]"
    (got,) = og.backend("INTERPRETER").compile(fn)(np.ones((2, 3, 16), np.float32))
    assert got.shape == (2, 3, 16)


def test_input_shapes_still_specialises() -> None:
    fn = import_model(_attention(), input_shapes={"x": (2, 7, 16)})
    assert fn.parameters[0].type == og.TensorType(og.f32, (2, 7, 16))
    assert not is_symbolic(fn)


def test_export_writes_symbolic_dims_as_dim_param() -> None:
    batch = og.dim("batch")
    x = og.parameter(og.f32, (batch, 4), name="x")
    w = og.constant(np.ones((4, 2), np.float32))
    fn = og.Function([og.ops.relu(og.ops.matmul(x, w))], [x], name="exported")
    proto = export_model(fn)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == 4
    out = proto.graph.output[0].type.tensor_type.shape.dim
    assert out[0].dim_param == "batch"
    back = import_model(proto)
    assert back.parameters[0].type == x.type
    for size in (1, 5):
        data = RNG.standard_normal((size, 4)).astype(np.float32)
        (want,) = _onnxruntime(proto, {"x": data})
        (got,) = og.backend("INTERPRETER").compile(back)(data)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_unsupported_use_of_symbolic_shape_names_node_and_input_shapes() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Cast", ["shape"], ["f"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("f", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(og.ConversionError, match=r"Cast.*input_shapes"):
        import_model(model)
    fn = import_model(model, input_shapes={"x": (3, 2)})
    (got,) = og.backend("INTERPRETER").compile(fn)(np.zeros((3, 2), np.float32))
    np.testing.assert_array_equal(got, [3.0, 2.0])


def test_shape_value_as_graph_output_is_refused_with_a_hint() -> None:
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["shape"])],
        "shape_out",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(og.ConversionError, match=r"'shape'.*\[N, 2\].*input_shapes"):
        import_model(model)


def test_session_on_interpreter_compiles_a_symbolic_model_once() -> None:
    model = _attention()
    session = InferenceSession(model, backend="INTERPRETER")
    for batch, seq in ((1, 4), (2, 9), (5, 3)):
        x = RNG.standard_normal((batch, seq, 16)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        (want,) = _onnxruntime(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert session.compiles == 1


def test_session_on_cpu_compiles_a_symbolic_model_once() -> None:
    if "CPU" not in og.backends():
        pytest.skip("the CPU backend needs a C compiler")
    model = _mlp()
    session = InferenceSession(model, backend="CPU")
    for batch in (1, 3, 8):
        x = RNG.standard_normal((batch, 4)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        (want,) = _onnxruntime(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert session.compiles == 1 and session.cached_signatures == []
