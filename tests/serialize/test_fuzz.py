"""Fuzzing the reader: whatever the bytes, only SerializationError may come out (or a Function).

Three mutators: raw bytes of the archive (mostly caught by the zip layer), bytes of graph.json
in a valid archive (reaches the JSON parser and the schema), and structured edits of the parsed
document (reaches attribute decoding, references, upgrades and op construction). The tests run
derandomized, so the suite is reproducible; for a longer campaign raise ``max_examples`` and drop
``derandomize`` locally.
"""

import functools
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serialize_ops import Kitchen, Level, Rounding, Split2, data_members, document, members, rezip

import opgraph as og
from opgraph import ops
from opgraph.core.errors import SerializationError
from opgraph.serialize import Limits, deserialize, serialize
from opgraph.testing.json_edits import apply_edit, paths

FUZZ = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@functools.cache
def subjects() -> list[bytes]:
    """Small valid files covering every node and value kind (test ops registered by caller)."""
    x = og.parameter(og.f32, (4,), name="x")
    inner = og.Function([ops.tuple_(ops.relu(x), x)], [x], name="inner")
    a = og.parameter(og.f32, (2, 2), name="a")
    c = og.constant(np.array([[1, -2], [np.nan, np.inf]], dtype=np.float32))
    flat = ops.reshape(ops.divide(a, c), (4,), (1, 0))
    (pair,) = ops.call(inner, flat)
    kitchen = Kitchen(math.inf, Rounding.HALF_UP, ((1, 2),), Level.HIGH, None, "k", True, og.i8)
    same, converted = Split2(og.i32)(kitchen(ops.get_tuple_element(pair, 0)))
    flags = og.constant([True, False, True, True])
    main = og.Function([converted, ops.select(flags, same, same)], [a], name="main")
    empty = og.Function([og.constant(np.zeros((0, 3), np.int8))], [], name="empty")
    return [serialize(main), serialize(empty)]


def must_only_raise_serialization_error(data: bytes) -> None:
    try:
        fn = deserialize(data, limits=Limits(max_data_bytes=1 << 20, max_graph_bytes=1 << 20))
    except SerializationError:
        return
    assert isinstance(fn, og.Function)


# --------------------------------------------------------------------------- raw bytes
byte_edits = st.lists(
    st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8
)


@FUZZ
@given(which=st.integers(0, 1), edits=byte_edits, keep=st.floats(0.0, 1.0))
def test_mutated_archive_bytes(test_ops, which, edits, keep):
    data = bytearray(subjects()[which])
    for where, value in edits:
        data[int(where * len(data))] = value
    must_only_raise_serialization_error(bytes(data[: max(1, int(keep * len(data)) + 1)]))


@FUZZ
@given(which=st.integers(0, 1), keep=st.integers(0, 10_000))
def test_truncated_archive(test_ops, which, keep):
    data = subjects()[which]
    must_only_raise_serialization_error(data[: keep % len(data)])


# ------------------------------------------------------------------------ graph.json bytes
@FUZZ
@given(
    which=st.integers(0, 1),
    edits=st.lists(
        st.tuples(
            st.floats(0, 1, exclude_max=True), st.sampled_from(b'{}[]",:0123456789-.eE \\ntfu')
        ),
        min_size=1,
        max_size=6,
    ),
    cut=st.one_of(st.none(), st.floats(0, 1)),
)
def test_mutated_graph_json_text(test_ops, which, edits, cut):
    data = subjects()[which]
    text = bytearray(members(data)["graph.json"])
    for where, value in edits:
        text[int(where * len(text))] = value
    if cut is not None:
        text = text[: int(cut * len(text))]
    must_only_raise_serialization_error(rezip(bytes(text), data_members(data)))


# ----------------------------------------------------------------- structured JSON edits
SPECIAL = [
    -1, 0, 1, 2, 3, 7, 1 << 40, -(1 << 63), True, False, None, "", "f32", 0.5, -0.0,
    [], {}, [0, 0], [[0, 0]], [1, 0], [[1, 0]], ["f32", [2, 2]], ["f32", [4]], {"tuple": []},
    {"float": "nan"}, {"float": "inf"}, {"element_type": "i32"}, {"element_type": "bogus"},
    {"enum": ["Rounding", "HALF_EVEN"]}, {"enum": ["Level", "LOW"]}, {"enum": ["X", "Y"]},
    {"function": 0}, {"function": 1}, {"function": -1},
    {"array": {"data": "0" * 64, "element_type": "f32", "shape": [1]}},
    "Add", "Relu", "Call", "Constant", "Parameter", "Kitchen", "Split2", "Tuple",
]  # fmt: skip

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(SPECIAL),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@FUZZ
@given(
    which=st.integers(0, 1),
    edits=st.lists(
        st.tuples(
            st.floats(0, 1, exclude_max=True),
            st.sampled_from(["replace", "replace", "delete", "insert", "duplicate"]),
            json_values,
            st.sampled_from(["op", "version", "attributes", "inputs", "types", "name", "x"]),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_structured_document_edits(test_ops, which, edits):
    data = subjects()[which]
    doc = document(data)
    for where, action, value, key in edits:
        candidates = paths(doc)
        doc = apply_edit(doc, candidates[int(where * len(candidates))], action, value, key)
    must_only_raise_serialization_error(rezip(json.dumps(doc).encode(), data_members(data)))


@pytest.mark.parametrize("which", [0, 1])
def test_subjects_are_valid(test_ops, which):
    assert isinstance(deserialize(subjects()[which]), og.Function)
