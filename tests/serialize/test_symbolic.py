"""Format version 2: symbolic dimensions saved and loaded exactly; malformed symbol data refused.

* symbolic Functions round-trip to equal printed Functions whose dimensions are equal and
  hash-equal, and compute the same on INTERPRETER at two bindings;
* static Functions are still written as format version 1; version-1 files load through the
  registered format upgrade;
* a bad symbol table or expression raises SerializationError saying where.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from serialize_ops import document, node, with_document

import opgraph as og
from opgraph import ops
from opgraph.core.dim import ceil_div, dim_max, dim_min, floor_div
from opgraph.core.errors import SerializationError
from opgraph.core.registry import Registry
from opgraph.serialize import deserialize, serialize, upgrades
from opgraph.serialize.dims import MAX_EXPRESSION_NODES, DimReader, SymbolWriter, read_symbols

BATCH = og.dim("batch")
SEQ = og.dim("seq", min=1, max=512)
rng = np.random.default_rng(7)


def dense() -> tuple[og.Function, dict[str, int]]:
    x = og.parameter(og.f32, (BATCH, 768), name="x")
    w = og.constant(rng.standard_normal((768, 16)).astype(np.float32))
    return og.Function([ops.relu(ops.matmul(x, w))], [x], name="dense"), {"batch": 3}


def concat_and_slice() -> tuple[og.Function, dict[str, int]]:
    a = og.parameter(og.f32, (BATCH, SEQ), name="a")
    b = og.parameter(og.f32, (BATCH, 4), name="b")
    joined = ops.concat([a, b, a], 1)  # 2*seq+4
    tail = ops.slice(joined, (0, 1), (BATCH, 2 * SEQ + 4), (1, 2))  # a slice giving (…)//2
    return og.Function([joined, tail], [a, b], name="cat"), {"batch": 2, "seq": 5}


def conv() -> tuple[og.Function, dict[str, int]]:
    h, w_ = og.dim("h", min=3), og.dim("w", min=3, max=64)
    x = og.parameter(og.f32, (BATCH, 2, h, w_), name="image")
    k = og.constant(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    y = ops.convolution(x, k, strides=(2, 1), padding_below=(1, 0), padding_above=(0, 1))
    pooled = ops.max_pool(y, (2, 2), strides=(2, 2))
    return og.Function([pooled], [x], name="conv"), {"batch": 2, "h": 9, "w": 7}


def reshaped() -> tuple[og.Function, dict[str, int]]:
    x = og.parameter(og.f32, (BATCH, SEQ, 4), name="x")
    flat = ops.reshape(x, (BATCH, SEQ * 4))  # a shape-valued attribute holding symbols
    return og.Function([ops.pad(flat, (0, 1), (0, 2))], [x], name="reshaped"), {
        "batch": 2,
        "seq": 3,
    }


BUILDERS = [dense, concat_and_slice, conv, reshaped]


def _arguments(fn: og.Function, binding: dict[str, int]) -> list[np.ndarray]:
    arrays = []
    for p in fn.parameters:
        shape = tuple(og.core.dim.evaluate(d, binding) for d in p.type.shape)
        arrays.append(rng.standard_normal(shape).astype(np.float32))
    return arrays


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_symbolic_functions_round_trip(build):
    fn, binding = build()
    data = serialize(fn)
    assert document(data)["format_version"] == 2
    loaded = deserialize(data)
    assert str(loaded) == str(fn)
    for a, b in zip(loaded.nodes, fn.nodes, strict=True):
        assert a.output_types == b.output_types
        assert hash(a.output_types) == hash(b.output_types)
        assert a.op == b.op
    assert serialize(loaded) == data  # deterministic, and nothing lost


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_loaded_symbolic_functions_compute_the_same_at_two_bindings(build):
    fn, binding = build()
    loaded = deserialize(serialize(fn))
    backend = og.backend("INTERPRETER")
    original, again = backend.compile(fn), backend.compile(loaded)
    for scale in (1, 2):
        values = {name: value * scale for name, value in binding.items()}
        arguments = _arguments(fn, values)
        want, got = original(*arguments), again(*arguments)
        for w, g in zip(want, got, strict=True):
            assert w.shape == g.shape and w.tobytes() == g.tobytes()


def test_static_functions_are_still_written_as_format_version_1():
    x = og.parameter(og.f32, (2, 3), name="x")
    doc = document(serialize(og.Function([ops.relu(x)], [x])))
    assert doc["format_version"] == 1 and "symbols" not in doc


def test_format_version_1_is_upgraded_by_a_registered_step():
    assert 1 in upgrades.FORMAT_UPGRADES
    assert upgrades.upgrade_document({"format_version": 1}, 1, 2) == {"format_version": 2}


def test_a_version_1_file_with_symbols_is_refused():
    fn, _ = dense()
    data = serialize(fn)
    doc = document(data)
    doc["format_version"] = 1
    with pytest.raises(SerializationError, match="format-version-1 file has no 'symbols'"):
        deserialize(with_document(data, doc))


def test_a_missing_format_upgrade_is_reported(monkeypatch):
    monkeypatch.setattr(upgrades, "FORMAT_UPGRADES", Registry("format upgrade"))
    x = og.parameter(og.f32, (2,))
    with pytest.raises(SerializationError, match="no upgrade from format version 1"):
        deserialize(serialize(og.Function([x], [x])))


# ------------------------------------------------------------------------ expressions
N, M = og.dim("n"), og.dim("m", min=1, max=9)
EXPRESSIONS = [
    N,
    2 * N + 1,
    N * N * M - 3 * M + 7,
    floor_div(N + 1, 2),
    ceil_div(N, M),
    floor_div(N, M) * 3 + N,
    dim_max(N, M),
    dim_min(N - 1, 2 * M),
    floor_div(dim_max(N, M) + 5, 4) * M,
    (N + 1) * (N - 1) * M * M,
    -N + 2 * M,
    floor_div(N, M) * floor_div(N, M) * N,
]


@pytest.mark.parametrize("expression", EXPRESSIONS, ids=str)
def test_expressions_rebuild_equal_and_hash_equal(expression):
    writer = SymbolWriter()
    encoded = writer.encode(expression)
    reader = DimReader(read_symbols(writer.table), max_depth=64)
    rebuilt = reader.decode(encoded)
    assert rebuilt == expression and hash(rebuilt) == hash(expression)
    assert str(rebuilt) == str(expression)


# --------------------------------------------------------------------------- malformed
def _symbolic_file() -> tuple[bytes, dict[str, Any]]:
    x = og.parameter(og.f32, (og.dim("batch", max=8), 3), name="x")
    data = serialize(og.Function([ops.relu(x)], [x], name="f"))
    return data, document(data)


def _fails(doc: dict[str, Any], data: bytes, *fragments: str) -> None:
    with pytest.raises(SerializationError) as info:
        deserialize(with_document(data, doc))
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"name": "batch", "min": 5, "max": 2}, "max must be null or an integer 5..2**63-1"),
        ({"name": "batch", "min": -1, "max": None}, "min must be an integer 0..2**63-1"),
        ({"name": "batch", "min": True, "max": None}, "min must be an integer"),
        ({"name": "batch", "min": 0, "max": 1 << 63}, "max must be null or an integer"),
        ({"name": "no such", "min": 0, "max": None}, "the name must be an identifier"),
        ({"name": "batch", "min": 0}, "must be an object {name, min, max}"),
        ([1], "must be an object {name, min, max}"),
    ],
)
def test_bad_symbol_table_entries(entry, fragment):
    data, doc = _symbolic_file()
    doc["symbols"] = [entry]
    _fails(doc, data, "symbols: symbol 0", fragment)


def test_a_repeated_symbol_is_refused():
    data, doc = _symbolic_file()
    doc["symbols"] = doc["symbols"] * 2
    _fails(doc, data, "symbols: symbol 1 repeats symbol 0 (batch)")


def test_a_symbol_table_that_is_not_an_array_is_refused():
    data, doc = _symbolic_file()
    doc["symbols"] = {"batch": 1}
    _fails(doc, data, "symbols: must be an array of symbols")


def _deep(depth: int) -> Any:
    expression: Any = {"sym": 0}
    for _ in range(depth):
        expression = {"max": [expression, 1]}
    return expression


def _wide() -> Any:
    return {"+": [{"sym": 0}] * (MAX_EXPRESSION_NODES + 1)}


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ({"sym": 1}, "unknown symbol 1: the file's symbol table has 1 entry"),
        ({"sym": "batch"}, "unknown symbol 'batch'"),
        ({"sym": -1}, "unknown symbol -1"),
        (_deep(80), "nested deeper than 64"),
        (_wide(), f"more than {MAX_EXPRESSION_NODES} entries"),
        ({"*": [1 << 63, {"sym": 0}]}, "is beyond 2**63-1"),
        ({"*": [(1 << 62), (1 << 62), {"sym": 0}]}, "coefficient is beyond 2**63-1"),
        ({"^": [{"sym": 0}, 65]}, "a power must be an integer 2..64"),
        ({"^": [{"sym": 0}, 1]}, "a power must be an integer 2..64"),
        ({"*": [{"+": [{"sym": 0}, 1]}, {"+": [{"sym": 0}, 2]}]}, "a sum inside a product"),
        ({"*": [{"max": [{"+": [{"sym": 0}, 1]}, {"sym": 0}]}, 2]}, "a factor of a product"),
        ({"//": [{"sym": 0}, 0]}, "the divisor 0 is never positive"),
        ({"//": [{"sym": 0}]}, "takes 2 operands, got 1"),
        ({"eval": ["__import__('os')"]}, "unknown dimension operation 'eval'"),
        ({"+": {"sym": 0}}, "operands of '+' must be an array"),
        ("batch", "an integer or a one-key object"),
        ({"sym": 0, "x": 1}, "an integer or a one-key object"),
    ],
)
def test_malformed_expressions_name_the_node(expression, fragment):
    data, doc = _symbolic_file()
    node(doc, "Parameter")["attributes"]["shape"][0] = {"dim": expression}
    _fails(doc, data, "node 0 (Parameter 'x')", "attribute 'shape'", fragment)
    data, doc = _symbolic_file()
    node(doc, "Relu")["types"][0][1][0] = {"dim": expression}
    _fails(doc, data, "node 1 (Relu)", "types", fragment)


def test_a_dimension_in_a_type_is_an_int_or_a_dim_tag():
    data, doc = _symbolic_file()
    node(doc, "Relu")["types"][0][1][1] = -3
    _fails(doc, data, "node 1 (Relu)", "a dimension must be >= 0, got -3")
    node(doc, "Relu")["types"][0][1][1] = {"sym": 0}
    _fails(doc, data, "node 1 (Relu)", 'a dimension is a non-negative integer or {"dim"')


def test_a_recorded_symbolic_type_must_match_the_inferred_one():
    data, doc = _symbolic_file()
    node(doc, "Relu")["types"][0][1][0] = {"dim": {"+": [{"sym": 0}, 1]}}
    _fails(doc, data, "node 1 (Relu)", "records output type(s) (f32[batch+1,3])")


def test_a_symbol_in_a_non_shape_attribute_is_refused_by_the_op():
    x = og.parameter(og.f32, (og.dim("n"), 3), name="x")
    data = serialize(og.Function([ops.concat([x, x], 0)], [x]))
    doc = document(data)
    node(doc, "Concat")["attributes"]["axis"] = {"dim": {"sym": 0}}
    _fails(doc, data, "(Concat)", "the graph is ill-typed")
