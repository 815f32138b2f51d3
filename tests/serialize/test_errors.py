"""Every way a file can be wrong raises SerializationError saying what and where."""

import copy
import io
import json
import zipfile

import numpy as np
import pytest
from serialize_ops import (
    Kitchen,
    Listy,
    Rounding,
    data_members,
    document,
    members,
    node,
    patch_directory,
    rezip,
    with_document,
)

import opgraph as og
from opgraph import ops
from opgraph.core.errors import OpTypeError, SerializationError
from opgraph.serialize import Limits, deserialize, load, save, serialize


# ----------------------------------------------------------------------------- the subject
def base_function() -> og.Function:
    """main(a, b) = relu-call(reduce_sum(concat(((a + b) // c), a))) with an inner function."""
    x = og.parameter(og.f32, (4,), name="x")
    inner = og.Function([ops.relu(x)], [x], name="inner")
    a = og.parameter(og.f32, (2, 3), name="a")
    b = og.parameter(og.f32, (2, 3), name="b")
    total = ops.Add().build(a, b, name="sum").outputs[0]
    c = og.constant(np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    joined = ops.concat([ops.divide(total, c), a], 0)
    (called,) = ops.call(inner, ops.reduce_sum(joined, (1,)))
    return og.Function([called], [a, b], name="main")


BASE = serialize(base_function())


def base_doc() -> dict:
    return copy.deepcopy(document(BASE))


def index(doc: dict, op: str, function: int = -1) -> int:
    return next(i for i, n in enumerate(doc["functions"][function]["nodes"]) if n["op"] == op)


def fails(data: bytes, *fragments: str, limits: Limits | None = None) -> SerializationError:
    with pytest.raises(SerializationError) as info:
        deserialize(data, limits=limits) if limits else deserialize(data)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return info.value


def fails_doc(doc: dict, *fragments: str) -> SerializationError:
    return fails(with_document(BASE, doc), *fragments)


def test_the_base_file_loads():
    assert str(deserialize(BASE)) == str(base_function())


# ------------------------------------------------------------------------------ container
@pytest.mark.parametrize(
    "data", [b"", b"hello world", b"\x89PNG\r\n\x1a\n", b"PK\x05\x06" + bytes(18), b"{}"]
)
def test_not_a_zip(data):
    fails(data, "<bytes>", "not an opgraph file: expected a zip archive")


@pytest.mark.parametrize("keep", [4, 30, 100, len(BASE) // 2, len(BASE) - 1])
def test_truncated(keep):
    fails(BASE[:keep], "<bytes>")


def test_truncated_says_so():
    fails(BASE[: len(BASE) // 2], "not a readable zip archive (truncated or corrupt)")


def test_no_graph_member():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("data/" + "0" * 64 + ".bin", b"")
    fails(buffer.getvalue(), "the archive has no graph.json")


def test_unexpected_member():
    extra = {**data_members(BASE), "notes.txt": b"hi"}
    fails(rezip(base_doc(), extra), "'notes.txt'", "unexpected member")


def test_duplicate_member():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive, pytest.warns(UserWarning):
        archive.writestr("graph.json", b"{}")
        archive.writestr("graph.json", b"{}")
    fails(buffer.getvalue(), "'graph.json'", "appears twice")


def test_encrypted_member():
    fails(patch_directory(BASE, "graph.json", flags=1), "'graph.json'", "is encrypted")


def test_unsupported_compression():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_BZIP2) as archive:
        archive.writestr("graph.json", json.dumps(base_doc()))
    fails(buffer.getvalue(), "compression method 12", "only stored and deflated")


def test_member_past_the_end_of_the_file():
    blob = next(n for n in members(BASE) if n.startswith("data/"))
    huge = 1 << 31
    data = patch_directory(BASE, blob, compressed_size=huge, file_size=huge)
    fails(data, "past the end", "truncated?")


def test_stored_member_sizes_disagree():
    blob = next(n for n in members(BASE) if n.startswith("data/"))
    fails(patch_directory(BASE, blob, file_size=1 << 30), "is stored with size 24 but declares")


def test_graph_json_declaring_a_huge_size_is_refused_before_reading():
    data = patch_directory(BASE, "graph.json", file_size=0xFFFFFFF0)
    fails(data, "declares 4294967280 bytes", "Limits.max_graph_bytes")


def test_total_constant_data_is_capped():
    fails(BASE, "constant data", "Limits.max_data_bytes", limits=Limits(max_data_bytes=10))


def test_member_count_is_capped():
    fails(BASE, "zip members, more than 1", limits=Limits(max_members=1))


def test_corrupt_member_data_fails_its_crc():
    blob = next(n for n in members(BASE) if n.startswith("data/"))
    data = bytearray(BASE)
    position = data.index(members(BASE)[blob])
    data[position] ^= 0xFF
    fails(bytes(data), f"zip member {blob}", "cannot be read (corrupt archive)")


def test_deflate_bomb_is_bounded_by_the_declared_size():
    bomb = rezip(b"[" * 1000 + b"]" * 1000, compression=zipfile.ZIP_DEFLATED)
    fails(bomb, "graph.json: is nested too deeply")
    fails(bomb, "Limits.max_graph_bytes", limits=Limits(max_graph_bytes=100))


# ----------------------------------------------------------------------------------- JSON
def test_not_utf8():
    fails(rezip(b'{"format": "\xff"}'), "graph.json: is not valid UTF-8")


def test_utf16_is_not_accepted():
    fails(rezip(json.dumps(base_doc()).encode("utf-16")), "is not valid UTF-8")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "is not valid JSON"),
        ('{"a": NaN}', "NaN is not JSON"),
        ('{"a": -Infinity}', "-Infinity is not JSON"),
        ('{"a": 1e999}', "overflows a float"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"a": ' + "9" * 5000 + "}", "is not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply"),
    ],
)
def test_bad_json(text, fragment):
    fails(rezip(text), "graph.json", fragment)


# ------------------------------------------------------------------------------ top level
def test_top_level_must_be_an_object():
    fails(rezip("[1]"), "graph.json: must be an object, got an array")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (None, "format_version: must be an integer, got null"),
        ("1", "format_version: must be an integer, got a string"),
        (True, "format_version: must be an integer, got a boolean"),
        (0, "format_version: must be >= 1, got 0"),
        (3, "the file has format version 3, newer than this opgraph reads (up to 2)"),
    ],
)
def test_format_version(value, fragment):
    doc = base_doc()
    doc["format_version"] = value
    fails_doc(doc, fragment)


def test_missing_format_version():
    doc = base_doc()
    del doc["format_version"]
    fails_doc(doc, "format_version: must be an integer, got null")


def test_a_future_file_is_refused_before_its_contents_are_read():
    fails(rezip({"format_version": 99, "anything": "new"}), "format version 99", "upgrade opgraph")


def test_wrong_format_name():
    doc = base_doc()
    doc["format"] = "onnx"
    fails_doc(doc, "format: must be 'opgraph', got 'onnx'")


def test_unknown_top_level_key():
    doc = base_doc()
    doc["extra"] = 1
    fails_doc(doc, "graph.json: unknown key(s) 'extra'")


def test_producer_must_be_a_string():
    doc = base_doc()
    doc["producer"] = 7
    fails_doc(doc, "producer: must be a string")


@pytest.mark.parametrize("value", [[], {}, None])
def test_functions_must_be_a_non_empty_array(value):
    doc = base_doc()
    doc["functions"] = value
    fails_doc(doc, "functions: must be a non-empty array")


# ------------------------------------------------------------------------------- functions
def test_function_must_be_an_object():
    doc = base_doc()
    doc["functions"][0] = "inner"
    fails_doc(doc, "functions[0]: must be an object, got a string")


def test_function_keys():
    doc = base_doc()
    del doc["functions"][1]["results"]
    fails_doc(doc, "functions[1]: missing key(s) results")


def test_function_name_must_be_a_string():
    doc = base_doc()
    doc["functions"][1]["name"] = 3
    fails_doc(doc, "functions[1].name: must be a string")


def test_nodes_must_be_an_array():
    doc = base_doc()
    doc["functions"][1]["nodes"] = {}
    fails_doc(doc, "function 1 'main': nodes must be an array, got an object")


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        ([0, 99], "parameter 1: 99 is not a node index"),
        ([0, "b"], "parameter 1: 'b' is not a node index"),
        ("ab", "parameters: must be an array"),
    ],
)
def test_bad_parameter_references(parameters, fragment):
    doc = base_doc()
    doc["functions"][1]["parameters"] = parameters
    fails_doc(doc, "function 1 'main'", fragment)


def test_parameter_that_is_a_multi_output_node(test_ops):
    from serialize_ops import Split2

    x = og.parameter(og.f32, (2,))
    data = serialize(og.Function(list(Split2(og.i8)(x)), [x], name="f"))
    doc = document(data)
    doc["functions"][0]["parameters"] = [1]
    fails(with_document(data, doc), "function 0 'f', parameter 0: node 1 is not a Parameter")


def test_deflated_member_shorter_than_declared():
    graph = members(BASE)["graph.json"]
    data = patch_directory(BASE, "graph.json", file_size=len(graph) + 10)
    fails(data, "zip member graph.json", f"has {len(graph)} bytes, the directory says")


def test_parameter_that_is_not_a_parameter():
    doc = base_doc()
    doc["functions"][1]["parameters"] = [0, index(doc, "Add")]
    error = fails_doc(doc, "is not a valid Function", "parameter 1 is Add")
    assert isinstance(error.__cause__, og.GraphError)


def test_parameter_listed_twice():
    doc = base_doc()
    doc["functions"][1]["parameters"] = [0, 1, 0]
    fails_doc(doc, "is not a valid Function", "is listed twice")


def test_parameter_missing_from_the_list():
    doc = base_doc()
    doc["functions"][1]["parameters"] = [0]
    fails_doc(doc, "depend on parameter(s) not in the parameter list")


@pytest.mark.parametrize(
    ("results", "fragment"),
    [
        ([[99, 0]], "result 0: refers to node 99"),
        ([[0, 1]], "result 0: refers to output 1 of node 0, which has 1 output(s)"),
        ([[0]], "result 0: must be [node index, output index]"),
        ([["0", 0]], "result 0: must be [node index, output index]"),
    ],
)
def test_bad_results(results, fragment):
    doc = base_doc()
    doc["functions"][1]["results"] = results
    fails_doc(doc, fragment)


def test_function_reference_forward_or_unknown():
    doc = base_doc()
    node(doc, "Call")["attributes"]["function"] = {"function": 1}  # itself: a cycle
    fails_doc(doc, "(Call)", "function reference 1 does not name an earlier function (0..0")


# ----------------------------------------------------------------------------------- nodes
def test_node_must_be_an_object():
    doc = base_doc()
    doc["functions"][1]["nodes"][2] = [1]
    fails_doc(doc, "function 1 'main', node 2: must be an object, got an array")


def test_node_op_must_be_a_string():
    doc = base_doc()
    node(doc, "Add")["op"] = None
    fails_doc(doc, "op must be a string, got null")


def test_unknown_op_suggests_close_names():
    doc = base_doc()
    node(doc, "Add")["op"] = "Ad"
    fails_doc(
        doc, "node 2 (Ad 'sum')", "unknown op 'Ad'; did you mean", "Add", "ops are registered"
    )


def test_unknown_node_key():
    doc = base_doc()
    node(doc, "Add")["id"] = 2  # node ids are positions: there is no id to duplicate
    fails_doc(doc, "(Add 'sum'): unknown key(s) 'id'")


def test_missing_node_key():
    doc = base_doc()
    del node(doc, "Add")["types"]
    fails_doc(doc, "(Add 'sum'): missing key(s) types")


@pytest.mark.parametrize(
    ("version", "fragment"),
    [
        (2, "op version 2 is newer than this opgraph's Add (version 1); upgrade opgraph"),
        (0, "version must be an integer >= 1, got int 0"),
        (True, "version must be an integer >= 1, got a boolean"),
        ("1", "version must be an integer >= 1, got a string"),
    ],
)
def test_op_version(version, fragment):
    doc = base_doc()
    node(doc, "Add")["version"] = version
    fails_doc(doc, "(Add 'sum')", fragment)


def test_node_name_must_be_a_string():
    doc = base_doc()
    node(doc, "Add")["name"] = 5
    fails_doc(doc, "node 2: name must be a string, got int 5")


def test_node_name_must_be_valid_unicode():
    text = json.dumps(base_doc()).replace('"sum"', '"\\ud800"')
    fails(with_document(BASE, json.loads(text)), "node 2: name must be a string")


def test_provenance_must_be_a_string():
    doc = base_doc()
    node(doc, "Add")["provenance"] = ["x"]
    fails_doc(doc, "(Add 'sum'): provenance must be a string, got an array")


@pytest.mark.parametrize(
    ("inputs", "fragment"),
    [
        ([[0, 0], [5, 0]], "input 1: refers to node 5, which is not an earlier node (0..1)"),
        ([[0, 0], [2, 0]], "input 1: refers to node 2, which is not an earlier node"),
        ([[0, 0], [1, 3]], "input 1: refers to output 3 of node 1, which has 1 output(s)"),
        ([[0, 0], [-1, 0]], "input 1: refers to node -1"),
        ([[0, 0], 1], "input 1: must be [node index, output index], got 1"),
        ([[0, 0], [1, 0, 0]], "input 1: must be [node index, output index]"),
        ([[0, 0], [1, True]], "input 1: must be [node index, output index]"),
        ({"0": 0}, "inputs: must be an array, got an object"),
    ],
)
def test_bad_inputs(inputs, fragment):
    doc = base_doc()
    node(doc, "Add")["inputs"] = inputs
    fails_doc(doc, "(Add 'sum')", fragment)


def test_forward_reference_message_explains_cycles():
    doc = base_doc()
    node(doc, "Add")["inputs"] = [[0, 0], [2, 0]]
    fails_doc(doc, "forward references and cycles are not allowed")


# ------------------------------------------------------------------------------- attributes
def test_attributes_must_be_an_object():
    doc = base_doc()
    node(doc, "Concat")["attributes"] = [0]
    fails_doc(doc, "(Concat): attributes must be an object, got an array")


def test_unknown_attribute():
    doc = base_doc()
    node(doc, "Concat")["attributes"]["axes"] = [0]
    fails_doc(doc, "unknown attribute(s) 'axes' for Concat (its attributes: axis)")


def test_missing_attribute_without_default():
    doc = base_doc()
    del node(doc, "Concat")["attributes"]["axis"]
    fails_doc(doc, "(Concat): missing attribute 'axis' (it has no default)")


def test_missing_attribute_with_default_takes_the_default():
    doc = base_doc()
    del node(doc, "Div")["attributes"]["floor_division"]
    loaded = deserialize(with_document(BASE, doc))
    assert str(loaded) == str(base_function())


@pytest.mark.parametrize(
    ("op", "attribute", "value", "fragment"),
    [
        ("Concat", "axis", True, "attribute 'axis': expected int, got bool True"),
        ("Concat", "axis", 0.0, "attribute 'axis': expected int, got float 0.0"),
        ("Concat", "axis", "0", "attribute 'axis': expected int, got str '0'"),
        ("Concat", "axis", [0], "attribute 'axis': expected int, got tuple (0,)"),
        ("Div", "floor_division", 1, "expected bool, got int 1"),
        ("ReduceSum", "axes", 1, "expected tuple[int, ...], got int 1"),
        ("ReduceSum", "axes", [1.5], "expected tuple[int, ...], got tuple (1.5,)"),
        ("ReduceSum", "axes", None, "expected tuple[int, ...], got None"),
        ("Parameter", "element_type", "f32", "expected ElementType, got str 'f32'"),
        ("Parameter", "element_type", {"element_type": "f33"}, "unknown element type 'f33'"),
        ("Parameter", "element_type", {"element_type": 3}, "an element type is a name"),
        ("Call", "function", 0, "expected Function, got int 0"),
        ("Call", "function", {"function": "inner"}, "function reference 'inner' does not name"),
        ("Concat", "axis", {"float": "nan"}, "expected int, got float nan"),
        ("Concat", "axis", {"float": "NaN"}, '"float" must be "nan", "inf" or "-inf"'),
        ("Concat", "axis", {"int": 0}, "unknown value tag 'int'"),
        ("Concat", "axis", {"float": "nan", "x": 1}, "a tagged value is an object with one key"),
        ("Concat", "axis", {"enum": "Mode.A"}, '"enum" must be [class name, member name]'),
        ("Concat", "axis", {"enum": ["Mode", "A"]}, "expected int, got enum Mode.A"),
        ("Concat", "axis", "\ud800", "is not valid Unicode"),
    ],
)
def test_wrong_attribute_kinds(op, attribute, value, fragment):
    doc = base_doc()
    node(doc, op)["attributes"][attribute] = value
    fails_doc(doc, f"({op}", fragment)


def test_deeply_nested_attribute():
    doc = base_doc()
    deep: list = []
    for _ in range(100):
        deep = [deep]
    node(doc, "ReduceSum")["attributes"]["axes"] = deep
    fails_doc(doc, "(ReduceSum): attribute 'axes': value is nested deeper than 64 levels")


def test_attribute_values_the_op_rejects():
    doc = base_doc()
    node(doc, "Concat")["attributes"]["axis"] = 7
    error = fails_doc(doc, "(Concat): the graph is ill-typed", "axis 7 is out of range")
    assert isinstance(error.__cause__, OpTypeError)


def test_enum_attributes(test_ops):
    x = og.parameter(og.f32, (2,))
    fn = og.Function([Kitchen(1.0, Rounding.HALF_UP, ())(x)], [x])
    data = serialize(fn)
    for value, fragment in [
        (["Rounding", "UP"], "enum Rounding has no member 'UP' (members: HALF_EVEN, HALF_UP)"),
        (["Mode", "HALF_UP"], "expected Rounding, got enum Mode.HALF_UP"),
    ]:
        doc = document(data)
        node(doc, "Kitchen")["attributes"]["rounding"] = {"enum": value}
        fails(with_document(data, doc), "(Kitchen)", fragment)


def test_enum_in_a_union_resolves_by_class(test_ops):
    x = og.parameter(og.f32, (2,))
    fn = og.Function([Kitchen(1.0, Rounding.HALF_UP, ())(x)], [x])
    doc = document(serialize(fn))
    node(doc, "Kitchen")["attributes"]["mixed"] = [1, {"enum": ["Rounding", "HALF_UP"]}]
    fails(with_document(serialize(fn), doc), "expected tuple[int | None, ...]")


def test_enum_with_an_unresolvable_annotation_must_name_an_enum_of_the_module(test_ops):
    from serialize_ops import Loose

    x = og.parameter(og.f32, (2,))
    data = serialize(og.Function([Loose(Rounding.HALF_EVEN)(x)], [x]))
    for value, fragment in [
        (["Nope", "X"], "enum class 'Nope' is not defined in the op's module"),
        (["Loose", "X"], "enum class 'Loose' is not defined in the op's module"),
        (["Rounding", "X"], "enum Rounding has no member 'X'"),
    ]:
        doc = document(data)
        node(doc, "Loose")["attributes"]["setting"] = {"enum": value}
        fails(with_document(data, doc), "(Loose): attribute 'setting'", fragment)


# ----------------------------------------------------------------------------------- arrays
def constant_array(doc: dict) -> dict:
    return node(doc, "Constant")["attributes"]["value"]["array"]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"shape": [1 << 40]}, "f32[1099511627776] needs 4398046511104 bytes"),
        ({"shape": [1 << 20, 1 << 20, 1 << 20, 1 << 20]}, "more elements than an array can index"),
        ({"shape": [3, 3]}, "f32[3, 3] needs 36 bytes, data member"),
        ({"shape": [-6]}, "a shape is an array of non-negative integers"),
        ({"shape": [6.0]}, "a shape is an array of non-negative integers"),
        ({"element_type": "f64"}, "f64[2, 3] needs 48 bytes"),
        ({"element_type": "float"}, "unknown element type 'float'"),
        ({"data": "0" * 64}, "is missing from the archive"),
        ({"data": "../../etc/passwd"}, "array data must be a sha256 hex digest"),
        ({"extra": 1}, "an array is {data, element_type, shape}"),
    ],
)
def test_bad_array_references(change, fragment):
    doc = base_doc()
    constant_array(doc).update(change)
    fails_doc(doc, "(Constant): attribute 'value'", fragment)


def test_array_must_be_an_object():
    doc = base_doc()
    node(doc, "Constant")["attributes"]["value"] = {"array": "abc"}
    fails_doc(doc, "an array is {data, element_type, shape}")


def test_constant_claiming_a_terabyte_shape_is_refused():
    """A 1-element value with a huge ``shape`` attribute would make Constant allocate."""
    doc = base_doc()
    node(doc, "Constant")["attributes"]["shape"] = [1 << 20, 1 << 20, 1 << 20]
    constant_array(doc)["shape"] = [1]
    kept = data_members(BASE)
    digest = constant_array(doc)["data"]
    kept[f"data/{digest}.bin"] = b"\x00\x00\x80\x3f"
    # today Constant tries np.full and fails; with a strict Constant it is a type error
    fails(rezip(doc, kept), "node 3 (Constant): ")


def test_boolean_data_must_be_zeros_and_ones():
    fn = og.Function([og.constant([True, False])], [])
    data = serialize(fn)
    (name,) = [n for n in members(data) if n.startswith("data/")]
    digest = name[5:-4]
    doc = document(data)
    fails(rezip(doc, {name: b"\x01\x02"}), f"boolean array data/{digest}.bin holds bytes other")


def test_constant_attributes_must_agree_with_the_data():
    doc = base_doc()
    node(doc, "Constant")["attributes"]["shape"] = [3, 2]
    error = fails_doc(doc, "(Constant): the graph is ill-typed", "expected (3, 2)")
    assert isinstance(error.__cause__, OpTypeError)


# ------------------------------------------------------------------------------------ types
@pytest.mark.parametrize(
    ("types", "fragment"),
    [
        ([["f32", [3, 2]]], "records output type(s) (f32[3,2]) but the op infers (f32[2,3])"),
        ([["f32", [2, 3]], ["f32", [2, 3]]], "records output type(s) (f32[2,3], f32[2,3])"),
        ([], "records output type(s) ()"),
        (
            [["f32", [2, True]]],
            'types: a dimension is a non-negative integer or {"dim": expression}, got True',
        ),
        ([["f32"]], 'a type is ["f32", [2, 3]] or {"tuple": [...]}'),
        ([{"tuple": "x"}], 'a type is ["f32", [2, 3]]'),
        ("f32[2,3]", "types: must be an array, got a string"),
    ],
)
def test_bad_recorded_types(types, fragment):
    doc = base_doc()
    node(doc, "Add")["types"] = types
    fails_doc(doc, "(Add 'sum')", fragment)


def test_deeply_nested_tuple_type():
    doc = base_doc()
    deep: object = ["f32", [2]]
    for _ in range(100):
        deep = {"tuple": [deep]}
    node(doc, "Add")["types"] = [deep]
    fails_doc(doc, "type is nested deeper than 64 levels")


# ------------------------------------------------------------------------- ill-typed graphs
def test_ill_typed_graph_names_the_node_and_chains_the_type_error():
    doc = base_doc()
    parameter = doc["functions"][1]["nodes"][1]
    parameter["attributes"]["shape"] = [3, 2]
    parameter["types"] = [["f32", [3, 2]]]
    error = fails_doc(
        doc,
        "function 1 'main', node 2 (Add 'sum'): the graph is ill-typed",
        "shapes of inputs differ",
    )
    assert isinstance(error.__cause__, OpTypeError)
    assert "Add:" in str(error.__cause__)


def test_ill_typed_call():
    doc = base_doc()
    inner_parameter = doc["functions"][0]["nodes"][0]
    inner_parameter["attributes"]["shape"] = [5]
    for n in doc["functions"][0]["nodes"]:
        n["types"] = [["f32", [5]]]
    error = fails_doc(doc, "(Call): the graph is ill-typed", "argument 0 has type f32[4]")
    assert isinstance(error.__cause__, OpTypeError)


def test_op_constructor_failing_with_another_error(test_ops):
    x = og.parameter(og.f32, (2,))
    from serialize_ops import Picky

    data = serialize(og.Function([Picky(1)(x)], [x]))
    doc = document(data)
    node(doc, "Picky")["attributes"]["n"] = 13
    error = fails(
        with_document(data, doc), "(Picky): cannot build the op: ZeroDivisionError: unlucky"
    )
    assert isinstance(error.__cause__, ZeroDivisionError)
    node(doc, "Picky")["attributes"]["n"] = 0
    error = fails(with_document(data, doc), "(Picky): the graph is ill-typed", "n must not be 0")
    assert isinstance(error.__cause__, OpTypeError)


# ------------------------------------------------------------------------------ save errors
def test_unsupported_attribute_kind_is_refused_at_save(test_ops):
    x = og.parameter(og.f32, (2,))
    fn = og.Function([Listy([1, 2])(x)], [x], name="f")
    with pytest.raises(
        SerializationError,
        match=r"cannot serialize function 'f', node 1 \(Listy\): "
        r"attribute 'values': a value of type builtins.list",
    ):
        serialize(fn)


def test_numpy_scalars_are_refused_at_save(test_ops):
    x = og.parameter(og.f32, (2,))
    fn = og.Function([Listy(np.float32(1.5))(x)], [x])
    with pytest.raises(SerializationError, match="numpy.float32 .* cannot be serialized"):
        serialize(fn)


def test_values_too_deep_for_readers_are_refused_at_save(test_ops):
    deep: tuple = ()
    for _ in range(100):
        deep = (deep,)
    x = og.parameter(og.f32, (2,))
    with pytest.raises(SerializationError, match="'values': value is nested deeper than 64"):
        serialize(og.Function([Listy(deep)(x)], [x]))


def test_unregistered_op_class_is_refused_at_save():
    x = og.parameter(og.f32, (2,))
    fn = og.Function([Listy(1)(x)], [x])
    with pytest.raises(SerializationError, match="is not the op registered as 'Listy'"):
        serialize(fn)


def test_invalid_unicode_names_are_refused_at_save():
    x = og.parameter(og.f32, (2,), name="\udc80")
    with pytest.raises(SerializationError, match="the node name: string .* is not valid Unicode"):
        serialize(og.Function([x], [x]))
    y = og.parameter(og.f32, (2,))
    with pytest.raises(SerializationError, match="the function name: string"):
        serialize(og.Function([y], [y], name="\ud800"))


def test_failed_save_keeps_the_old_file(tmp_path, test_ops):
    path = tmp_path / "model.opgraph"
    path.write_bytes(b"precious")
    x = og.parameter(og.f32, (2,))
    with pytest.raises(SerializationError):
        save(og.Function([Listy([1])(x)], [x]), path)
    assert path.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.opgraph"]


def test_save_interrupted_while_writing_keeps_the_old_file(tmp_path, monkeypatch):
    from opgraph.serialize import api

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(api, "write_archive", explode)
    path = tmp_path / "model.opgraph"
    path.write_bytes(b"precious")
    with pytest.raises(OSError, match="disk full"):
        save(base_function(), path)
    assert path.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.opgraph"]


def test_load_names_the_file(tmp_path):
    path = tmp_path / "broken.opgraph"
    path.write_bytes(BASE[:50])
    with pytest.raises(SerializationError, match=r"broken\.opgraph: not a readable zip archive"):
        load(path)


def test_load_of_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nothing.opgraph")
