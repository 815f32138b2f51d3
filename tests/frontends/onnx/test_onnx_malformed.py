"""Malformed models raise ConversionError with a clear message, never anything else."""

import contextlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.onnx import import_model  # noqa: E402


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["z"]),
        helper.make_node("Softmax", ["z"], ["y"], axis=-1),
    ]
    return model(nodes, [tensor("x", [2, 4])], [tensor("y", [2, 3])], [w1, b1, w2])


def test_valid_mlp_imports_and_runs():
    fn = import_model(mlp())
    (y,) = og.backend("INTERPRETER").compile(fn)(np.ones((2, 4), np.float32))
    np.testing.assert_allclose(y.sum(axis=1), [1.0, 1.0], rtol=1e-6)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"", "the model has no graph|imports no opset"),
        (b"\x08\x07\x12", "cannot read the ONNX model"),
        (12, "needs a path, bytes or onnx.ModelProto, got int"),
    ],
)
def test_unreadable_sources(source, message):
    with pytest.raises(og.ConversionError, match=message):
        import_model(source)


def test_truncated_model_bytes():
    data = mlp().SerializeToString()
    with pytest.raises(og.ConversionError):
        import_model(data[: len(data) // 2])


def test_graph_output_never_produced():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])], [tensor("z", [2])])
    with pytest.raises(og.ConversionError, match="Graph output 'z' is not an output of any node"):
        import_model(m)


def test_missing_required_input():
    m = model(
        [helper.make_node("Add", ["x"], ["y"], name="add")], [tensor("x", [2])], [tensor("y", [2])]
    )
    with pytest.raises(
        og.ConversionError, match=r"'add' .Add.: .*input size 1 not in range \[min=2, max=2\]"
    ):
        import_model(m)


def test_missing_required_attribute():
    m = model(
        [helper.make_node("Concat", ["x", "x"], ["y"], name="cat")],
        [tensor("x", [2])],
        [tensor("y", [4])],
    )
    with pytest.raises(og.ConversionError, match="'cat' .Concat."):
        import_model(m)


def test_bad_attribute_value():
    m = model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0], name="t")],
        [tensor("x", [2, 3])],
        [tensor("y", [3, 2])],
    )
    with pytest.raises(og.ConversionError, match="'t' .Transpose.: Transpose"):
        import_model(m)


def test_unsupported_element_type():
    m = model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [tensor("x", [2], TensorProto.STRING)],
        [tensor("y", [2], TensorProto.STRING)],
    )
    with pytest.raises(og.ConversionError, match="graph input 'x': ONNX data type STRING"):
        import_model(m)


def test_non_tensor_input():
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])
    m = model([helper.make_node("Identity", ["s"], ["y"])], [seq], [tensor("y", [2])])
    with pytest.raises(og.ConversionError, match="only tensor inputs are supported"):
        import_model(m)


def test_loop_with_a_runtime_trip_count():
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c"], ["c_out"]),
            helper.make_node("Add", ["v", "v"], ["v_out"]),
        ],
        "body",
        [tensor("i", [], TensorProto.INT64), tensor("c", [], TensorProto.BOOL), tensor("v", [2])],
        [tensor("c_out", [], TensorProto.BOOL), tensor("v_out", [2])],
    )
    m = model(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")],
        [tensor("n", [], TensorProto.INT64), tensor("x", [2])],
        [tensor("y", [2])],
    )
    # As is, the Loop is converted (unrolled) when the Function runs, with the trip count.
    exe = og.backend("INTERPRETER").compile(import_model(m))
    for n, expected in ((3, 8.0), (1, 2.0)):
        (y,) = exe(np.array(n, np.int64), np.ones(2, np.float32))
        assert y.tolist() == [expected, expected]
    fn = import_model(m, constant_inputs={"n": np.array(3, np.int64)})
    (y,) = og.backend("INTERPRETER").compile(fn)(np.ones(2, np.float32))
    assert y.tolist() == [8.0, 8.0]


def test_initializer_of_the_wrong_type_for_its_declaration():
    init = numpy_helper.from_array(np.arange(3, dtype=np.int32), "w")
    m = model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [3])], [tensor("y", [3])], [init]
    )
    with pytest.raises(
        og.ConversionError,
        match=r"input 1 .'w'. is tensor.int32., but type T is already tensor.float.",
    ):
        import_model(m)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4))
def test_fuzzed_bytes_only_raise_conversion_errors(flips):
    data = bytearray(mlp().SerializeToString())
    for position, value in flips:
        data[position % len(data)] = value
    try:
        fn = import_model(bytes(data))
    except og.ConversionError:
        return
    arguments = [np.ones(p.shape, p.element_type.dtype) for p in fn.parameters]
    # A model that imports may still fail at run time, but only with a graph-context error.
    with contextlib.suppress(og.OpgraphError):
        og.backend("INTERPRETER").compile(fn)(*arguments)
