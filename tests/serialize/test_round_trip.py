"""Round trips of what records do not cover: names, provenance, calls, tuples, constants of every
kind, every attribute kind, multi-output ops, huge graphs, files and determinism."""

import math
import os

import ml_dtypes
import numpy as np
import pytest
from serialize_ops import Kitchen, Level, Rounding, Split2, members

import opgraph as og
from opgraph import ops
from opgraph.core.literals import Constant
from opgraph.serialize import deserialize, load, save, serialize
from opgraph.serialize.encode import little_endian_bytes


def round_trip(fn: og.Function) -> og.Function:
    loaded = deserialize(serialize(fn))
    assert str(loaded) == str(fn)
    return loaded


def run(fn: og.Function, *args: np.ndarray) -> list[np.ndarray]:
    return og.backend("INTERPRETER").compile(fn)(*args)


def test_names_and_provenance_survive():
    a = og.parameter(og.f32, (2,), name="a")
    b = og.parameter(og.f32, (2,), name="bé ☃")  # non-ASCII names are stored as UTF-8
    total = ops.Add().build(a, b, name="total", provenance="model.py:41").outputs[0]
    loaded = round_trip(og.Function([total], [a, b], name="my fn"))
    assert loaded.name == "my fn"
    assert [p.node.name for p in loaded.parameters] == ["a", "bé ☃"]
    node = loaded.results[0].node
    assert (node.name, node.provenance) == ("total", "model.py:41")
    assert loaded.parameters[0].node.provenance == a.node.provenance


def test_unused_and_reordered_parameters_survive():
    a, b, c = (og.parameter(og.f32, (3,), name=n) for n in "abc")
    fn = og.Function([ops.negative(c)], [c, b, a])
    loaded = round_trip(fn)
    assert [p.node.name for p in loaded.parameters] == ["c", "b", "a"]
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(run(loaded, x, x, x)[0], -x)


def test_nested_calls_store_each_function_once():
    x = og.parameter(og.f32, (2,))
    inner = og.Function([ops.relu(x)], [x], name="inner")
    y = og.parameter(og.f32, (2,))
    (first,) = ops.call(inner, y)
    (second,) = ops.call(inner, first)
    middle = og.Function([ops.tuple_(first, second)], [y], name="middle")
    z = og.parameter(og.f32, (2,))
    (pair,) = ops.call(middle, z)
    (again,) = ops.call(inner, z)
    outer = og.Function([ops.get_tuple_element(pair, 1), again], [z], name="outer")
    data = serialize(outer)
    names = [f["name"] for f in __import__("json").loads(members(data)["graph.json"])["functions"]]
    assert names == ["inner", "middle", "outer"]
    loaded = round_trip(outer)
    arg = np.array([-1.0, 2.0], dtype=np.float32)
    for got, want in zip(run(loaded, arg), run(outer, arg), strict=True):
        np.testing.assert_array_equal(got, want)
    # the callee is one Function object after loading, shared by both functions that call it
    middle_loaded = loaded.results[0].node.inputs[0].node.op.function
    callees = {id(n.op.function) for n in middle_loaded.nodes if isinstance(n.op, ops.Call)}
    assert callees == {id(loaded.results[1].node.op.function)}


def test_tuple_values_and_tuple_results_survive():
    a = og.parameter(og.i32, (2,))
    nested = ops.tuple_(a, ops.tuple_(ops.negative(a), a))
    inner = ops.get_tuple_element(ops.get_tuple_element(nested, 1), 0)
    loaded = round_trip(og.Function([nested, inner], [a]))
    assert isinstance(loaded.results[0].type, og.TupleType)


@pytest.mark.parametrize(
    "element_type", [og.bf16, og.f16, og.f32, og.f64, og.boolean, og.i8, og.u16, og.i64, og.u64]
)
def test_constants_are_bit_exact(element_type):
    rng = np.random.default_rng(0)
    if element_type is og.boolean:
        value = rng.random((3, 4)) < 0.5
    elif element_type.is_real:
        value = np.array([[0.0, -0.0, np.inf, -np.inf], [np.nan, 1e-3, 65504.0, -2.5]])
        value = np.concatenate([value, rng.standard_normal((1, 4))]).astype(element_type.dtype)
    else:
        info = np.iinfo(element_type.dtype)
        value = np.array([[info.min, info.max, 0, 1]] * 3, dtype=element_type.dtype)
    fn = og.Function([og.constant(value, element_type)], [])
    loaded = round_trip(fn)
    got = loaded.results[0].node.op.value
    assert got.dtype == value.dtype
    assert got.tobytes() == value.astype(element_type.dtype).tobytes()
    assert not got.flags.writeable


def test_constant_data_is_raw_little_endian():
    value = np.array([1.0, -2.0], dtype=np.float32)
    data = serialize(og.Function([og.constant(value)], []))
    (blob,) = [b for name, b in members(data).items() if name.startswith("data/")]
    assert blob == value.astype("<f4").tobytes()
    bf16 = np.array([1.5], dtype=ml_dtypes.bfloat16)
    assert little_endian_bytes(bf16).tobytes() == bf16.view("<u2").tobytes()


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 2, 5)])
def test_empty_constants_survive(shape):
    fn = og.Function([og.constant(np.zeros(shape, dtype=np.float32))], [])
    loaded = round_trip(fn)
    assert loaded.results[0].shape == shape


def test_scalar_constants_survive():
    loaded = round_trip(og.Function([og.constant(np.float64(2.5))], []))
    assert loaded.results[0].node.op.value.shape == ()


def test_identical_constants_are_stored_once():
    a = og.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = og.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    c = og.constant(np.arange(6, dtype=np.int32).reshape(2, 3))  # same bytes as nothing above
    same_bytes = og.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    fn = og.Function([ops.add(a, b), c, same_bytes], [])
    data = serialize(fn)
    blobs = [name for name in members(data) if name.startswith("data/")]
    assert len(blobs) == 2  # the f32 values share one member whatever their shape
    loaded = round_trip(fn)
    assert loaded.results[2].shape == (3, 2)


def test_every_attribute_kind_survives(test_ops):
    op = Kitchen(
        scale=math.nan,
        rounding=Rounding.HALF_UP,
        windows=((1, 2), (3, 4)),
        level=Level.HIGH,
        limit=None,
        label="ünïcode",
        exact=True,
        accumulate=og.bf16,
        mixed=(1, None, -3),
        pads=(math.inf, -math.inf, -0.0, 1e-300, 2.5),
    )
    x = og.parameter(og.f32, (2,))
    fn = og.Function([op(x)], [x])
    loaded_op = round_trip(fn).results[0].node.op
    assert type(loaded_op) is Kitchen
    assert math.isnan(loaded_op.scale)
    assert loaded_op.rounding is Rounding.HALF_UP and loaded_op.level is Level.HIGH
    assert loaded_op.windows == ((1, 2), (3, 4)) and type(loaded_op.windows[0]) is tuple
    assert loaded_op.limit is None and loaded_op.exact is True
    assert loaded_op.accumulate is og.bf16
    assert loaded_op.mixed == (1, None, -3)
    assert loaded_op.pads[:2] == (math.inf, -math.inf)
    assert math.copysign(1, loaded_op.pads[2]) == -1
    assert loaded_op.pads[3:] == (1e-300, 2.5)
    assert loaded_op.label == "ünïcode"


def test_int_given_for_a_float_attribute_stays_an_int(test_ops):
    x = og.parameter(og.f32, (2,))
    fn = og.Function([Kitchen(scale=2, rounding=Rounding.HALF_EVEN, windows=())(x)], [x])
    scale = round_trip(fn).results[0].node.op.scale
    assert scale == 2 and type(scale) is int


def test_multi_output_ops_survive(test_ops):
    x = og.parameter(og.f32, (2,))
    same, converted = Split2(og.i32)(x)
    fn = og.Function([converted, same], [x])
    loaded = round_trip(fn)
    assert loaded.results[0].node is loaded.results[1].node
    assert [r.index for r in loaded.results] == [1, 0]


def test_a_100k_node_chain_round_trips_without_recursion():
    x = og.parameter(og.f32, (2,))
    value = x
    for _ in range(100_000):
        value = ops.negative(value)
    fn = og.Function([value], [x])
    loaded = deserialize(serialize(fn))
    assert len(loaded.nodes) == len(fn.nodes)
    assert str(loaded) == str(fn)


def test_save_and_load_a_file(tmp_path):
    a = og.parameter(og.f32, (2, 2), name="a")
    fn = og.Function([ops.add(a, og.constant(np.eye(2, dtype=np.float32)))], [a], name="f")
    path = tmp_path / "model.opgraph"
    save(fn, path)
    assert str(load(path)) == str(fn)
    assert str(load(str(path))) == str(fn)
    assert path.read_bytes() == serialize(fn)
    assert os.listdir(tmp_path) == ["model.opgraph"]  # no temporary file left behind


def test_save_replaces_an_existing_file(tmp_path):
    path = tmp_path / "model.opgraph"
    path.write_bytes(b"old")
    a = og.parameter(og.f32, (2,))
    fn = og.Function([ops.relu(a)], [a])
    save(fn, path)
    assert str(load(path)) == str(fn)


def test_serialize_is_deterministic():
    def build() -> og.Function:
        a = ops.Parameter(og.f32, (2,)).build(name="a", provenance="m.py:1").outputs[0]
        c = ops.Constant(og.f32, (2,), np.ones(2, np.float32)).build(provenance="m.py:2")
        total = ops.Add().build(a, c.outputs[0], provenance="m.py:3").outputs[0]
        return og.Function([total], [a], name="f")

    assert serialize(build()) == serialize(build())


def test_missing_provenance_gets_a_marker():
    from serialize_ops import document, with_document

    a = og.parameter(og.f32, (2,))
    data = serialize(og.Function([ops.relu(a)], [a]))
    doc = document(data)
    for node in doc["functions"][0]["nodes"]:
        del node["provenance"]
    loaded = deserialize(with_document(data, doc))
    assert loaded.results[0].node.provenance == "<deserialized>"


def test_loaded_constants_are_constants():
    fn = og.Function([og.constant([1, 2, 3], og.i16)], [])
    node = round_trip(fn).results[0].node
    assert isinstance(node.op, Constant) and node.op == fn.results[0].node.op


def test_accepts_bytearray_and_memoryview():
    a = og.parameter(og.f32, (2,))
    data = serialize(og.Function([ops.relu(a)], [a]))
    assert str(deserialize(bytearray(data))) == str(deserialize(memoryview(data)))


def test_deserialize_rejects_non_bytes():
    with pytest.raises(TypeError, match="deserialize expects bytes, got str"):
        deserialize("graph.json")  # type: ignore[arg-type]


def test_serialize_rejects_non_functions():
    with pytest.raises(TypeError, match="serialize expects a Function"):
        serialize([1])  # type: ignore[arg-type]


@pytest.mark.parametrize("setting", [Rounding.HALF_UP, (1, (2.5, None)), "text", og.i16])
def test_attributes_with_unresolvable_annotations_decode_by_tag(test_ops, setting):
    from serialize_ops import Loose

    x = og.parameter(og.f32, (2,))
    loaded = round_trip(og.Function([Loose(setting)(x)], [x]))
    assert loaded.results[0].node.op.setting == setting
