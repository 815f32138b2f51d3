"""Regression tests from shared/repro/reliability 01, 07 and 10: ONNX import reads external data
only below the model's directory (or ``base_dir=``), bounds Loop/Scan/RNN unrolling, and is as
strict as onnx's checker and onnxruntime."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.onnx import import_model  # noqa: E402

vi = helper.make_tensor_value_info
SECRET = b"-----BEGIN FAKE PRIVATE KEY-----"  # 32 bytes


def _model(nodes, inputs, outputs, initializers=(), sparse=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    graph.sparse_initializer.extend(sparse)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _external(name: str, location: str, shape=(32,), dtype=np.uint8, offset: int = 0):
    """A TensorProto whose data lives in ``location`` (the repro's hostile constant)."""
    tensor = numpy_helper.from_array(np.zeros(shape, dtype), name)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _run(fn, *arguments):
    return og.backend("INTERPRETER").compile(fn)(*arguments)


# Each external-data path of the importer: a model whose one output is the tensor's bytes.
def _constant(location):
    node = helper.make_node("Constant", [], ["y"], value=_external("c", location))
    return _model([node], [], [vi("y", TensorProto.UINT8, [32])])


def _constant_of_shape(location):
    value = _external("v", location, shape=(1,), dtype=np.float32)
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], value=value)
    shape = numpy_helper.from_array(np.array([2], np.int64), "shape")
    return _model([node], [], [vi("y", TensorProto.FLOAT, [2])], [shape])


def _initializer(location):
    node = helper.make_node("Identity", ["w"], ["y"])
    return _model([node], [], [vi("y", TensorProto.UINT8, [32])], [_external("w", location)])


def _sparse_initializer(location):
    values = _external("w", location)
    indices = numpy_helper.from_array(np.arange(32, dtype=np.int64), "w_indices")
    sparse = helper.make_sparse_tensor(values, indices, [32])
    node = helper.make_node("Identity", ["w"], ["y"])
    return _model([node], [], [vi("y", TensorProto.UINT8, [32])], sparse=[sparse])


def _sparse_constant(location):
    values = _external("c", location)
    indices = numpy_helper.from_array(np.arange(32, dtype=np.int64), "c_indices")
    sparse = helper.make_sparse_tensor(values, indices, [32])
    node = helper.make_node("Constant", [], ["y"], sparse_value=sparse)
    return _model([node], [], [vi("y", TensorProto.UINT8, [32])])


def _loop_body_constant(location):
    """The Constant sits inside a Loop body: subgraph tensors go through the same reader."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Constant", [], ["k"], value=_external("c", location)),
            helper.make_node("Identity", ["k"], ["scan"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, [])],
        [vi("c_out", TensorProto.BOOL, []), vi("scan", TensorProto.UINT8, [32])],
    )
    trip = numpy_helper.from_array(np.array(1, np.int64), "M")
    node = helper.make_node("Loop", ["M", ""], ["y"], body=body)
    return _model([node], [], [vi("y", TensorProto.UINT8, [1, 32])], [trip])


PATHS = {
    "constant": _constant,
    "constant_of_shape": _constant_of_shape,
    "initializer": _initializer,
    "sparse_initializer": _sparse_initializer,
    "sparse_constant": _sparse_constant,
    "loop_body_constant": _loop_body_constant,
}


@pytest.fixture
def victim(tmp_path, monkeypatch):
    """The repro's setup: a secret below the working directory, and a model directory."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_bytes(SECRET)
    monkeypatch.chdir(home)
    models = tmp_path / "models"
    models.mkdir()
    return models


@pytest.mark.parametrize("build", PATHS.values(), ids=PATHS.keys())
def test_bytes_and_protos_read_no_file_without_base_dir(victim, build):
    model = build(".ssh/id_rsa")  # resolves against the working directory in the repro
    for source in (model, model.SerializeToString()):
        with pytest.raises(og.ConversionError, match="reads no files unless base_dir="):
            import_model(source)


@pytest.mark.parametrize("build", PATHS.values(), ids=PATHS.keys())
def test_locations_leaving_the_model_directory_are_refused(victim, build):
    home = victim.parent / "home"
    (victim / "link").symlink_to(home / ".ssh" / "id_rsa")
    cases = {
        "../home/.ssh/id_rsa": "contains '..'",
        str(home / ".ssh" / "id_rsa"): "is absolute",
        "link": "is a symbolic link to",
        "missing.bin": "does not exist",
    }
    for location, message in cases.items():
        path = victim / "m.onnx"
        onnx.save(build(location), str(path))
        with pytest.raises(og.ConversionError, match=message):
            import_model(str(path))
        with pytest.raises(og.ConversionError, match=message):
            import_model(build(location), base_dir=victim)


@pytest.mark.parametrize("build", PATHS.values(), ids=PATHS.keys())
def test_external_data_inside_the_model_directory_is_read(victim, build):
    expected = np.frombuffer(SECRET, np.uint8)
    if build is _constant_of_shape:
        (victim / "data.bin").write_bytes(np.array([2.5], np.float32).tobytes())
        expected = np.full(2, 2.5, np.float32)
    else:
        (victim / "data.bin").write_bytes(SECRET)
    path = victim / "m.onnx"
    onnx.save(build("data.bin"), str(path))
    (from_path,) = _run(import_model(str(path)))
    (from_bytes,) = _run(import_model(path.read_bytes(), base_dir=victim))
    np.testing.assert_array_equal(from_path.reshape(expected.shape), expected)
    np.testing.assert_array_equal(from_bytes.reshape(expected.shape), expected)


def test_external_data_saved_by_onnx_round_trips(tmp_path):
    """A model written by ``onnx.save_model(save_as_external_data=True)`` imports by path."""
    weights = np.arange(4096, dtype=np.float32).reshape(64, 64)
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [vi("x", TensorProto.FLOAT, [1, 64])],
        [vi("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(weights, "w")],
    )
    path = tmp_path / "m.onnx"
    onnx.save_model(
        model, str(path), save_as_external_data=True, location="w.bin", size_threshold=0
    )
    assert (tmp_path / "w.bin").exists()
    x = np.ones((1, 64), np.float32)
    (y,) = _run(import_model(path), x)
    np.testing.assert_allclose(y, x @ weights)


def test_external_data_of_the_wrong_size_is_refused(victim):
    (victim / "data.bin").write_bytes(SECRET[:10])
    with pytest.raises(og.ConversionError, match="holds 10 bytes at offset 0, expected 32"):
        import_model(_constant("data.bin"), base_dir=victim)
    tensor = _external("c", "data.bin")
    tensor.external_data.add(key="length", value="1000000")
    node = helper.make_node("Constant", [], ["y"], value=tensor)
    model = _model([node], [], [vi("y", TensorProto.UINT8, [32])])
    with pytest.raises(og.ConversionError, match="length 1000000 does not match the 32 bytes"):
        import_model(model, base_dir=victim)


def test_repro_01_reads_nothing_from_the_working_directory(victim):
    """The repro, verbatim: hostile bytes in a service started in $HOME."""
    data = _constant(".ssh/id_rsa").SerializeToString()
    assert Path(os.getcwd(), ".ssh", "id_rsa").read_bytes() == SECRET
    with pytest.raises(og.ConversionError, match="external file '.ssh/id_rsa'"):
        import_model(data)


# ------------------------------------------------------------------------------ unrolling


def _loop(trip: int, cond: bool = True):
    """Repro 07: a 277-byte Loop(M=trip, cond) that adds one each iteration."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Add", ["a_in", "one"], ["a_out"]),
        ],
        "body",
        [
            vi("i", TensorProto.INT64, []),
            vi("c_in", TensorProto.BOOL, []),
            vi("a_in", TensorProto.FLOAT, [1]),
        ],
        [vi("c_out", TensorProto.BOOL, []), vi("a_out", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    inits = [numpy_helper.from_array(np.array(trip, np.int64), "M")]
    inits.append(numpy_helper.from_array(np.array(cond), "cond"))
    node = helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body, name="loop")
    return _model(
        [node], [vi("x", TensorProto.FLOAT, [1])], [vi("y", TensorProto.FLOAT, [1])], inits
    )


def test_repro_07_loop_trip_count_is_bounded():
    data = _loop(10**9).SerializeToString()
    assert len(data) < 300
    with pytest.raises(og.ConversionError, match=r"'loop' \(Loop\): .*max_unroll=20"):
        import_model(data, max_unroll=20)


def test_default_unroll_limit_stops_the_repro_model():
    from opgraph.frontends.onnx.importer import MAX_UNROLL

    with pytest.raises(og.ConversionError, match=f"max_unroll={MAX_UNROLL}"):
        import_model(_loop(10**9).SerializeToString())


def test_loops_within_the_limit_unroll():
    fn = import_model(_loop(5), max_unroll=5)
    (y,) = _run(fn, np.zeros(1, np.float32))
    assert y.tolist() == [5.0]


def test_scan_length_counts_against_the_limit():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"])],
        "body",
        [vi("s_in", TensorProto.FLOAT, [2]), vi("x_t", TensorProto.FLOAT, [2])],
        [vi("s_out", TensorProto.FLOAT, [2])],
    )
    node = helper.make_node("Scan", ["s", "xs"], ["y"], body=body, num_scan_inputs=1, name="scan")
    model = _model(
        [node],
        [vi("s", TensorProto.FLOAT, [2]), vi("xs", TensorProto.FLOAT, [50, 2])],
        [vi("y", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(og.ConversionError, match=r"'scan' \(Scan\): unrolling 50 more"):
        import_model(model, max_unroll=49)
    fn = import_model(model, max_unroll=50)
    (y,) = _run(fn, np.zeros(2, np.float32), np.ones((50, 2), np.float32))
    assert y.tolist() == [50.0, 50.0]


def test_recurrent_steps_count_against_the_limit():
    hidden, width, steps = 2, 3, 40
    w = numpy_helper.from_array(np.ones((1, hidden, width), np.float32), "w")
    r = numpy_helper.from_array(np.ones((1, hidden, hidden), np.float32), "r")
    node = helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=hidden, name="rnn")
    model = _model(
        [node],
        [vi("x", TensorProto.FLOAT, [steps, 1, width])],
        [vi("y", TensorProto.FLOAT, [steps, 1, 1, hidden])],
        [w, r],
    )
    with pytest.raises(og.ConversionError, match=r"'rnn' \(RNN\): unrolling 40 more"):
        import_model(model, max_unroll=39)
    assert import_model(model, max_unroll=40).flat_result_types[0].shape == (steps, 1, 1, hidden)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_max_unroll_must_be_a_count(bad):
    with pytest.raises(og.ConversionError, match="max_unroll must be a non-negative integer"):
        import_model(_loop(1), max_unroll=bad)


# ------------------------------------------------------------------------- strict import


def _relu(inputs=("x",), outputs=("y",), x_shape=(3,), y_shape=(3,), opset=17, **attributes):
    node = helper.make_node("Relu", list(inputs), list(outputs), name="act", **attributes)
    return _model(
        [node],
        [vi("x", TensorProto.FLOAT, list(x_shape))],
        [vi(o, TensorProto.FLOAT, list(y_shape)) for o in outputs],
        opset=opset,
    )


def _reduce_sum(**attributes):
    node = helper.make_node("ReduceSum", ["x"], ["y"], name="sum", **attributes)
    return _model([node], [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [])])


def _no_graph():
    model = _relu()
    model.ClearField("graph")
    return model


def _twice_defined():
    nodes = [
        helper.make_node("Neg", ["x"], ["a"], name="neg"),
        helper.make_node("Relu", ["x"], ["a"], name="act"),
        helper.make_node("Identity", ["a"], ["y"]),
    ]
    return _model(nodes, [vi("x", TensorProto.FLOAT, [3])], [vi("y", TensorProto.FLOAT, [3])])


def _duplicate_output():
    model = _relu()
    model.graph.output.append(model.graph.output[0])
    return model


def _string_axis():
    node = helper.make_node("Softmax", ["x"], ["y"], axis="0", name="softmax")
    return _model(
        [node], [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])]
    )


def _bool_relu():
    node = helper.make_node("Relu", ["x"], ["y"], name="act")
    return _model([node], [vi("x", TensorProto.BOOL, [3])], [vi("y", TensorProto.BOOL, [3])])


def _wrong_declared_type():
    model = _relu()
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    return model


def _mistyped_initializer_input():
    model = _reduce_sum(keepdims=0)
    init = numpy_helper.from_array(np.ones((2, 3), np.float32), "x")
    model.graph.initializer.append(init)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 5
    return model


STRICT = {
    "no graph": (_no_graph, "the model has no graph"),
    "misspelt attribute": (_reduce_sum(keEpdims=0), r"'sum' \(ReduceSum\): Unrecognized attribute: keEpdims"),
    "extra input": (_relu(inputs=("x", "x")), r"'act' \(Relu\): .*input size 2 not in range"),
    "missing input": (_relu(inputs=()), r"'act' \(Relu\): .*input size 0 not in range"),
    "extra output": (_relu(outputs=("y", "z")), r"'act' \(Relu\): .*output size 2 not in range"),
    "name defined twice": (_twice_defined, "'a' has been used as output names multiple times"),
    "duplicate graph output": (_duplicate_output, "graph output 'y' is declared twice"),
    "string attribute for an int": (_string_axis, r"'softmax' \(Softmax\): Mismatched attribute type"),
    "opset 99": (_relu(opset=99), "imports opset 99 of domain 'ai.onnx'; the installed onnx defines"),
    "input type outside the schema": (_bool_relu, r"'act' \(Relu\): input 0 .'x'. is tensor.bool."),
    "declared output shape": (_relu(y_shape=(4,)), r"graph output 'y' is declared with shape \[4\] but the model computes \[3\]"),
    "declared output type": (_wrong_declared_type, "graph output 'y' is declared int64 but the model computes float"),
    "declared initializer input": (_mistyped_initializer_input, r"graph input \(an initializer\) 'x' is declared with shape \[5, 3\]"),
    "negative input dimension": (_relu(x_shape=(-5,), y_shape=(-5,)), r"graph input 'x' is declared with a negative dimension: \[-5\]"),
}  # fmt: skip


@pytest.mark.parametrize(("build", "message"), STRICT.values(), ids=STRICT.keys())
def test_invalid_models_are_refused_naming_the_problem(build, message):
    model = build() if callable(build) else build
    with pytest.raises(og.ConversionError, match=message):
        import_model(model.SerializeToString())


@pytest.mark.parametrize(("build", "message"), STRICT.values(), ids=STRICT.keys())
def test_onnxruntime_refuses_the_same_models(build, message):
    """The strict cases are models onnxruntime refuses too, except the ones where opgraph is
    stricter on purpose (docs/onnx.md, "Strict import")."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    stricter = ("declared output shape", "negative input dimension", "duplicate graph output")
    model = build() if callable(build) else build
    name = next(k for k, v in STRICT.items() if v[0] is build)
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime's own exception classes
        assert name not in stricter, f"onnxruntime now refuses {name!r}: update docs/onnx.md"
        return
    assert name in stricter, f"onnxruntime accepts {name!r}"


def test_declared_symbolic_and_missing_dims_match_anything():
    model = _relu()
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "n"
    assert import_model(model).flat_result_types[0].shape == (3,)
    model.graph.output[0].type.tensor_type.ClearField("shape")
    assert import_model(model).flat_result_types[0].shape == (3,)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ({"x": 4}, r"input_shapes\['x'\] must be a sequence of dimensions .* got 4 \(int\)"),
        ({"x": "3"}, r"input_shapes\['x'\] must be a sequence"),
        ({"x": (-1,)}, r"input_shapes\['x'\] dimension must be a non-negative integer, got -1"),
        ({"x": (2.5,)}, r"dimension must be a non-negative integer, got 2.5"),
        ([("x", (3,))], "input_shapes must map input names to shapes, got list"),
    ],
)
def test_input_shapes_are_checked(shapes, message):
    """issue 14: ``input_shapes={"input": 4}`` gave "'int' object is not iterable"."""
    model = _relu(x_shape=("n",), y_shape=("n",))
    with pytest.raises(og.ConversionError, match=message):
        import_model(model, input_shapes=shapes)
    assert import_model(model, input_shapes={"x": np.array([3])}).parameters[0].shape == (3,)


def test_load_for_sessions_inlines_a_paths_external_data_through_the_reader(victim):
    """``importer._load`` (used by InferenceSession) reads a path's external data into the
    proto, from the model's directory only."""
    from opgraph.frontends.onnx.importer import _load

    (victim / "data.bin").write_bytes(SECRET)
    path = victim / "m.onnx"
    onnx.save(_constant("data.bin"), str(path))
    (y,) = _run(import_model(_load(str(path))))
    assert y.tobytes() == SECRET
    onnx.save(_constant("../home/.ssh/id_rsa"), str(path))
    with pytest.raises(og.ConversionError, match="contains '..'"):
        _load(str(path))


def test_the_checker_never_sees_more_than_protobufs_limit(monkeypatch):
    """A model over 2 GiB cannot be serialized for onnx.checker: its large tensors are
    emptied in the checker's copy (the limit is lowered here to test it)."""
    from opgraph.frontends.onnx import validate

    monkeypatch.setattr(validate, "_MAXIMUM_PROTOBUF", 1 << 20)
    weights = np.ones((1024, 512), np.float32)  # 2 MiB
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [vi("x", TensorProto.FLOAT, [1, 1024])],
        [vi("y", TensorProto.FLOAT, [1, 512])],
        [numpy_helper.from_array(weights, "w")],
    )
    assert validate._for_checker(model).ByteSize() < 1 << 20
    (y,) = _run(import_model(model), np.ones((1, 1024), np.float32))
    assert y.shape == (1, 512) and float(y[0, 0]) == 1024.0


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"constant_inputs": 5}, "constant_inputs must map input names to arrays, got int"),
        ({"constant_inputs": {"x": np.ones(4, np.float32)}}, r"'x' is declared with shape \[3\]"),
        ({"progress": 5}, "progress must be callable"),
        ({"base_dir": 5}, "base_dir must be a directory path, got 5"),
    ],
)
def test_keyword_misuse_is_a_conversion_error(keywords, message):
    with pytest.raises(og.ConversionError, match=message):
        import_model(_relu(), **keywords)
