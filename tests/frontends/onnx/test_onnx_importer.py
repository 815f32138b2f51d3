"""The ONNX importer: models in, Functions out, and clear errors for bad models."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.onnx import import_model  # noqa: E402


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def run(fn, *args):
    return og.backend("INTERPRETER").compile(fn)(*args)


def test_broadcasting_add_and_names():
    m = model(
        [helper.make_node("Add", ["x", "b"], ["y"])],
        [tensor("x", [2, 3])],
        [tensor("y", [2, 3])],
        [numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "b")],
    )
    fn = import_model(m)
    assert [p.node.name for p in fn.parameters] == ["x"]
    assert fn.results[0].node.name == "y"
    (y,) = run(fn, np.zeros((2, 3), np.float32))
    assert y.tolist() == [[1, 2, 3], [1, 2, 3]]


def test_path_bytes_and_proto(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    for source in (m, m.SerializeToString(), str(path), path):
        assert str(import_model(source).results[0].type) == "f32[2]"


def test_shape_subgraph_folds():
    m = model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node(
                "ConstantOfShape",
                ["s"],
                ["z"],
                value=numpy_helper.from_array(np.array([2.0], np.float32)),
            ),
            helper.make_node("Add", ["x", "z"], ["y"]),
        ],
        [tensor("x", [2, 3])],
        [tensor("y", [2, 3])],
    )
    fn = import_model(m)
    assert "Shape" not in str(fn)
    assert {n.op.name for n in fn.ops} <= {"Constant", "Broadcast", "Add"}


def test_symbolic_dims_stay_symbolic_unless_input_shapes_given():
    m = model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor("x", ["batch", 3])],
        [tensor("y", ["batch", 3])],
    )
    assert fn_type(import_model(m)) == "f32[batch,3]"
    fn = import_model(m, input_shapes={"x": (4, 3)})
    assert fn.parameters[0].shape == (4, 3)
    with pytest.raises(og.ConversionError, match=r"conflicts with the model's shape \['\?', 3\]"):
        import_model(m, input_shapes={"x": (4, 5)})
    with pytest.raises(og.ConversionError, match="unknown input"):
        import_model(m, input_shapes={"nope": (1,)})


def fn_type(fn):
    return str(fn.parameters[0].type)


def test_all_unsupported_ops_listed_at_once():
    m = model(
        [
            helper.make_node("FancyOp", ["x"], ["a"], name="n1"),
            helper.make_node("OtherOp", ["a"], ["y"], name="n2", domain="com.x"),
        ],
        [tensor("x", [2])],
        [tensor("y", [2])],
    )
    m.opset_import.append(helper.make_opsetid("com.x", 1))
    with pytest.raises(
        og.ConversionError,
        match="2 unsupported op.*FancyOp .domain ai.onnx, opset 17, node 'n1'.*OtherOp .domain com.x",
    ):
        import_model(m)


def test_malformed_models():
    with pytest.raises(og.ConversionError, match="cannot read the ONNX model"):
        import_model(b"not a protobuf at all \xff\xfe")
    with pytest.raises(og.ConversionError, match="does not exist"):
        import_model("/nonexistent/model.onnx")
    dangling = model(
        [helper.make_node("Relu", ["missing"], ["y"])], [tensor("x", [2])], [tensor("y", [2])]
    )
    with pytest.raises(
        og.ConversionError,
        match="input 'missing' of node: .*OpType: Relu is not output of any previous",
    ):
        import_model(dangling)
    bad_init = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    bad_init.dims[0] = 4
    wrong_size = model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [tensor("x", [4])],
        [tensor("y", [4])],
        [bad_init],
    )
    with pytest.raises(og.ConversionError, match="initializer 'w'"):
        import_model(wrong_size)
    mismatch = model(
        [helper.make_node("Add", ["x", "i"], ["y"], name="adder")],
        [tensor("x", [2]), tensor("i", [2], TensorProto.INT32)],
        [tensor("y", [2])],
    )
    with pytest.raises(
        og.ConversionError,
        match=r"ONNX node 'adder' .Add.: input 1 .'i'. is tensor.int32., but type T is already "
        r"tensor.float. for an earlier input",
    ):
        import_model(mismatch)
    with pytest.raises(og.ConversionError, match="older than the oldest supported opset"):
        import_model(
            model(
                [helper.make_node("Relu", ["x"], ["y"])],
                [tensor("x", [2])],
                [tensor("y", [2])],
                opset=0,
            )
        )


def test_errors_name_the_onnx_node_as_provenance():
    m = model(
        [helper.make_node("Relu", ["x"], ["y"], name="act")], [tensor("x", [2])], [tensor("y", [2])]
    )
    fn = import_model(m)
    assert fn.results[0].node.provenance == "onnx node 'act' (Relu)"


def test_initializer_as_input():
    init = numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "w")
    m = model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [tensor("x", [2]), tensor("w", [2])],
        [tensor("y", [2])],
        [init],
    )
    assert len(import_model(m).parameters) == 1
    fn = import_model(m, initializers_as_parameters=True)
    assert [p.node.name for p in fn.parameters] == ["x", "w"]


def test_constant_inputs_specialise_shapes():
    m = model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [tensor("x", [2, 3]), tensor("shape", [2], TensorProto.INT64)],
        [tensor("y", [3, 2])],
    )
    # As is, the target is a run-time tensor (a DynamicReshape with fresh output sizes)...
    exe = og.backend("INTERPRETER").compile(import_model(m))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = exe(x, np.array([3, -1]))
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    # ...and constant_inputs= specialises it into a static reshape.
    fn = import_model(m, constant_inputs={"shape": np.array([3, -1])})
    assert str(fn.results[0].type) == "f32[3,2]" and len(fn.parameters) == 1
