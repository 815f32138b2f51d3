"""``og.onnx.InferenceSession`` against onnxruntime: same interface, same results."""

from __future__ import annotations

import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the onnx extra) is not installed")
from onnx import TensorProto, helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.onnx.session import default_backend, numpy_dtype  # noqa: E402

BACKENDS = og.backends()


def _dynamic_model() -> onnx.ModelProto:
    """y = relu(x @ w + b) and s = shape(x): a symbolic batch axis, two outputs."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["a"]),
            helper.make_node("Relu", ["a"], ["y"]),
            helper.make_node("Shape", ["x"], ["s"]),
        ],
        "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [
            helper.make_tensor("w", TensorProto.FLOAT, [3, 2], w.ravel().tolist()),
            helper.make_tensor("b", TensorProto.FLOAT, [2], b.tolist()),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _two_input_model() -> onnx.ModelProto:
    """z = a * b + c with a shared symbolic axis 'n' and an int64 sequence axis."""
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["a", "b"], ["ab"]),
            helper.make_node("Cast", ["c"], ["cf"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["ab", "cf"], ["z"]),
        ],
        "two",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", "seq"]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", "seq"]),
            helper.make_tensor_value_info("c", TensorProto.INT64, ["n", "seq"]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", "seq"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reshape_model() -> onnx.ModelProto:
    """y = reshape(x, shape): the target shape is a graph input, needed at import time."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "reshape",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference(model: onnx.ModelProto):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _describe(args) -> list[tuple]:
    return [(a.name, a.shape, a.type) for a in args]


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_bundled_model_matches_onnxruntime(demo_onnx_path, backend_name):
    path = str(demo_onnx_path)
    sess = og.onnx.InferenceSession(path, backend=backend_name)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert _describe(sess.get_inputs()) == _describe(ref.get_inputs())
    assert _describe(sess.get_outputs()) == _describe(ref.get_outputs())
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    (want,) = ref.run(None, {"x": x})
    (got,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(sess(x)[0], got)
    np.testing.assert_array_equal(sess(x=x)[0], got)
    np.testing.assert_array_equal(sess({"x": x})[0], got)


def test_path_bytes_and_proto_give_one_model(demo_onnx_path):
    path = demo_onnx_path
    x = np.ones((4, 16), np.float32)
    results = [
        og.onnx.InferenceSession(model, backend="INTERPRETER").run(None, {"x": x})[0]
        for model in (str(path), path, path.read_bytes(), onnx.load(str(path)))
    ]
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_dynamic_batch_matches_onnxruntime_at_every_size(backend_name):
    model = _dynamic_model()
    sess = og.onnx.InferenceSession(model, backend=backend_name, cache_size=2)
    ref = _reference(model)
    assert _describe(sess.get_inputs()) == _describe(ref.get_inputs())
    assert _describe(sess.get_outputs()) == _describe(ref.get_outputs())
    for batch in (1, 5, 2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)
        got = sess.run(["s", "y"], {"x": x})
        want = ref.run(["s", "y"], {"x": x})
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    # one compile per distinct signature, the least recently used evicted beyond cache_size
    assert sess.cached_signatures == [{"x": (2, 3)}, {"x": (5, 3)}]


def test_one_compile_per_signature(monkeypatch):
    sess = og.onnx.InferenceSession(_dynamic_model(), backend="INTERPRETER")
    compiles = []
    backend = og.backend("INTERPRETER")
    original = type(backend).compile

    def counting(self, function, profile=False):
        compiles.append(function.parameters[0].shape)
        return original(self, function, profile)

    monkeypatch.setattr(type(backend), "compile", counting)
    for batch in (3, 3, 4, 3, 4):
        sess.run(None, {"x": np.zeros((batch, 3), np.float32)})
    assert compiles == [(3, 3), (4, 3)]


def test_shared_symbolic_axes_and_several_inputs_match_onnxruntime():
    model = _two_input_model()
    sess = og.onnx.InferenceSession(model, backend="INTERPRETER")
    ref = _reference(model)
    assert _describe(sess.get_inputs()) == _describe(ref.get_inputs())
    rng = np.random.default_rng(3)
    for n, seq in ((1, 4), (3, 7)):
        feed = {
            "a": rng.standard_normal((n, seq)).astype(np.float32),
            "b": rng.standard_normal((n, seq)).astype(np.float32),
            "c": rng.integers(-5, 5, (n, seq)),
        }
        np.testing.assert_allclose(sess.run(None, feed)[0], ref.run(None, feed)[0], rtol=1e-6)
        np.testing.assert_array_equal(
            sess(feed["a"], feed["b"], feed["c"])[0], sess(feed["a"], feed["b"], c=feed["c"])[0]
        )
    with pytest.raises(og.GraphError, match=r"symbolic dimension 'seq' is 2 in input 'a'"):
        sess.run(None, {"a": np.zeros((1, 2), np.float32), "b": np.zeros((1, 3), np.float32),
                        "c": np.zeros((1, 2), np.int64)})  # fmt: skip


def test_shape_valued_input_is_a_run_time_tensor_on_the_interpreter():
    model = _reshape_model()
    sess = og.onnx.InferenceSession(model, backend="INTERPRETER")
    ref = _reference(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for target in ([3, 4], [4, 3], [3, 4]):
        feed = {"x": x, "shape": np.array(target, np.int64)}
        np.testing.assert_array_equal(sess.run(None, feed)[0], ref.run(None, feed)[0])
    assert sess.compiles == 1 and sess.value_inputs == []  # one compile serves every value


@pytest.mark.skipif("CPU" not in og.backends(), reason="the CPU backend is not registered")
def test_shape_valued_input_is_a_run_time_tensor_on_cpu():
    model = _reshape_model()
    sess = og.onnx.InferenceSession(model, backend="CPU")
    ref = _reference(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for target in ([3, 4], [4, 3], [3, 4], [12, 1]):
        feed = {"x": x, "shape": np.array(target, np.int64)}
        np.testing.assert_array_equal(sess.run(None, feed)[0], ref.run(None, feed)[0])
    # CPU runs the data-dependent reshape between compiled stages: one compile, every value
    assert sess.compiles == 1 and sess.value_inputs == [] and sess.cached_signatures == []


@pytest.mark.skipif("CPU" not in og.backends(), reason="the CPU backend is not registered")
def test_non_zero_model_compiles_once_on_cpu():
    """NonZero -> Transpose -> GatherND -> Relu: the count is decided by the data."""
    graph = helper.make_graph(
        [
            helper.make_node("NonZero", ["x"], ["nz"]),
            helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
            helper.make_node("GatherND", ["x", "idx"], ["picked"]),
            helper.make_node("Relu", ["picked"], ["y"]),
        ],
        "picked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = og.onnx.InferenceSession(model, backend="CPU")
    ref = _reference(model)
    rng = np.random.default_rng(41)
    for n in (2, 5, 5, 1):
        x = np.where(rng.random((n, 3)) < 0.5, 0, rng.standard_normal((n, 3))).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    assert sess.compiles == 1 and sess.cached_signatures == []


def test_errors_name_the_fix():
    sess = og.onnx.InferenceSession(_dynamic_model(), backend="INTERPRETER")
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(og.GraphError, match=r"unknown input name\(s\) 'X'.* inputs: 'x' tensor"):
        sess.run(None, {"X": x})
    with pytest.raises(og.GraphError, match=r"initializers are constants here"):
        sess.run(None, {"x": x, "w": x})
    with pytest.raises(og.GraphError, match=r"missing input\(s\) 'x'"):
        sess.run(None, {})
    with pytest.raises(
        og.CallTypeError, match=r"expects tensor\(float\) \(numpy float32\), got a float64"
    ):
        sess.run(None, {"x": x.astype(np.float64)})
    with pytest.raises(og.GraphError, match=r"expects shape \['batch', 3\], got \[3\]"):
        sess.run(None, {"x": x[0]})
    with pytest.raises(og.GraphError, match=r"expects shape \['batch', 3\], got \[2, 4\]"):
        sess.run(None, {"x": np.zeros((2, 4), np.float32)})
    with pytest.raises(
        og.GraphError, match=r"unknown output name\(s\) 'z'; the model's outputs: 'y', 's'"
    ):
        sess.run(["z"], {"x": x})
    with pytest.raises(og.GraphError, match=r"output_names must be a list"):
        sess.run("y", {"x": x})
    with pytest.raises(og.GraphError, match=r"input_feed must be a dict"):
        sess.run(None, [x])  # type: ignore[arg-type]
    with pytest.raises(og.GraphError, match=r"expected 1 input\(s\) \(x\), got 2"):
        sess(x, x)
    with pytest.raises(og.GraphError, match=r"given twice"):
        sess(x, x=x)


def test_construction_errors():
    model = _dynamic_model()
    with pytest.raises(og.RegistryError, match="unknown backend 'FOO'"):
        og.onnx.InferenceSession(model, backend="FOO")
    with pytest.raises(og.GraphError, match="unsupported provider 'TensorrtExecutionProvider'"):
        og.onnx.InferenceSession(model, providers=["TensorrtExecutionProvider"])
    with pytest.raises(og.GraphError, match="not both"):
        og.onnx.InferenceSession(model, backend="CPU", providers=["CPUExecutionProvider"])
    with pytest.raises(og.GraphError, match="sess_options"):
        og.onnx.InferenceSession(model, object())
    with pytest.raises(og.GraphError, match="backend must be a name"):
        og.onnx.InferenceSession(model, backend=og.backend("CPU"))
    with pytest.raises(og.GraphError, match="cache_size must be an int >= 1"):
        og.onnx.InferenceSession(model, cache_size=0)
    with pytest.raises(og.ConversionError, match="does not exist"):
        og.onnx.InferenceSession("/nonexistent/model.onnx")
    unsupported = _dynamic_model()
    unsupported.graph.node[2].op_type = "FancyRelu"
    with pytest.raises(og.ConversionError, match=r"unsupported op\(s\): FancyRelu"):
        og.onnx.InferenceSession(unsupported)


def test_providers_choose_the_default_cpu_backend():
    sess = og.onnx.InferenceSession(_dynamic_model(), providers=["CPUExecutionProvider"])
    assert sess.backend == default_backend()
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert og.onnx.InferenceSession(_dynamic_model()).backend == default_backend()


def test_prepare_compiles_ahead_and_run_reuses_it():
    sess = og.onnx.InferenceSession(_dynamic_model(), backend="INTERPRETER")
    compiled = sess.prepare({"x": np.zeros((6, 3), np.float32)})
    assert compiled.function.parameters[0].shape == (6, 3)
    assert compiled.import_seconds >= 0 and compiled.compile_seconds >= 0
    sess.run(None, {"x": np.ones((6, 3), np.float32)})
    assert sess.cached_signatures == [{"x": (6, 3)}]
    with pytest.raises(og.GraphError, match=r"missing input\(s\) 'x'"):
        sess.prepare({})


def test_undeclared_output_shapes_are_inferred_as_onnxruntime_does():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = og.onnx.InferenceSession(model, backend="INTERPRETER")
    ref = _reference(model)
    assert (
        _describe(sess.get_inputs())
        == _describe(ref.get_inputs())
        == [("x", [None, 3], "tensor(float)")]
    )
    assert _describe(sess.get_outputs()) == _describe(ref.get_outputs())
    x = np.array([[-1.0, 0.0, 2.0]], np.float32)
    np.testing.assert_array_equal(sess(x)[0], [[0.0, 0.0, 2.0]])


def test_numpy_dtype_of_node_arg_types():
    assert numpy_dtype("tensor(float)") == np.float32
    assert numpy_dtype("tensor(double)") == np.float64
    assert numpy_dtype("tensor(int64)") == np.int64
    assert numpy_dtype("tensor(bool)") == np.bool_
    with pytest.raises(og.ConversionError, match="ONNX data type STRING is not supported"):
        numpy_dtype("tensor(string)")
    with pytest.raises(og.ConversionError, match="'seq' is not a tensor type"):
        numpy_dtype("seq")


def test_concurrent_runs_share_one_session():
    sess = og.onnx.InferenceSession(_dynamic_model(), backend="INTERPRETER")
    ref = _reference(_dynamic_model())
    failures: list[BaseException] = []

    def work(batch: int) -> None:
        try:
            x = np.full((batch, 3), float(batch), np.float32)
            np.testing.assert_allclose(
                sess.run(["y"], {"x": x})[0], ref.run(["y"], {"x": x})[0], rtol=1e-5
            )
        except BaseException as error:  # collected and re-raised in the main thread
            failures.append(error)

    threads = [threading.Thread(target=work, args=(1 + i % 3,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert len(sess.cached_signatures) == 3
