"""Budgets on what a file may make the loader do (repros 05 and 09 in shared/repro/reliability).

A small file must never make ``og.load`` allocate much more than its own size, every problem
is a ``SerializationError``, and a graph loaded from a file compiles whatever its call depth.
"""

import hashlib
import io
import json
import zipfile
from typing import Any

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.errors import GraphError, SerializationError
from opgraph.passes import inline_calls
from opgraph.serialize import Limits

pytestmark = pytest.mark.timeout(300)


def constant_node(digest: str, shape: list[int], element_type: str = "f32") -> dict[str, Any]:
    array = {"data": digest, "element_type": element_type, "shape": shape}
    return {
        "op": "Constant",
        "version": 1,
        "attributes": {
            "element_type": {"element_type": element_type},
            "shape": shape,
            "value": {"array": array},
        },
        "inputs": [],
        "types": [[element_type, shape]],
    }


def archive(
    nodes: list[dict[str, Any]],
    results: list[list[int]],
    data: dict[str, bytes],
    data_compression: int = zipfile.ZIP_STORED,
    graph: bytes | None = None,
) -> bytes:
    function = {"name": "f", "parameters": [], "results": results, "nodes": nodes}
    document = {"format": "opgraph", "format_version": 1, "functions": [function]}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        text = graph if graph is not None else json.dumps(document).encode()
        z.writestr("graph.json", text, compress_type=zipfile.ZIP_DEFLATED)
        for digest, blob in data.items():
            z.writestr(f"data/{digest}.bin", blob, compress_type=data_compression)
    return buffer.getvalue()


def refused(data: bytes, *fragments: str, limits: Limits | None = None) -> str:
    with pytest.raises(SerializationError) as info:
        og.deserialize(data, limits=limits or Limits())
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


# --------------------------------------------------------------------------- repro 05
def test_deflated_constant_data_is_refused_before_it_is_read():
    zeros = bytes(1 << 22)  # 4 MiB of zeros deflate to about 4 KiB
    digest = hashlib.sha256(zeros).hexdigest()
    nodes = [constant_node(digest, [len(zeros) // 4])]
    bomb = archive(nodes, [[0, 0]], {digest: zeros}, data_compression=zipfile.ZIP_DEFLATED)
    assert len(bomb) < len(zeros) // 100
    refused(bomb, f"data/{digest}.bin", "is deflated", "must be stored uncompressed")
    # The same file with the data stored loads: only the compression was wrong.
    stored = archive(nodes, [[0, 0]], {digest: zeros})
    assert og.deserialize(stored).results[0].type == og.TensorType(og.f32, (len(zeros) // 4,))


def test_graph_json_deflate_bomb_is_refused_by_ratio():
    padding = b" " * (4 << 20)  # JSON allows whitespace: 4 MiB of it deflates about 1000-fold
    text = b'{"format": "opgraph", "format_version": 1, "functions": []' + padding + b"}"
    refused(archive([], [], {}, graph=text), "graph.json", "Limits.max_graph_compression")
    # Within the ratio allowed, the same text reaches the JSON schema (a clean error too).
    refused(
        archive([], [], {}, graph=text),
        "functions: must be a non-empty array",
        limits=Limits(max_graph_compression=10_000),
    )


def test_a_small_member_referenced_many_times_counts_every_copy():
    blob = np.arange(256, dtype=np.float32).tobytes()  # 1 KiB, stored once
    digest = hashlib.sha256(blob).hexdigest()
    nodes = [constant_node(digest, [256]) for _ in range(64)]  # 64 KiB once loaded
    data = archive(nodes, [[k, 0] for k in range(64)], {digest: blob})
    assert len(og.deserialize(data).results) == 64
    message = refused(
        data,
        "takes the file's constants to",
        "Limits.max_data_bytes",
        limits=Limits(max_data_bytes=32 << 10),
    )
    assert "each Constant holds its own copy" in message


def test_stored_data_over_the_cap_is_refused_from_the_directory():
    blob = bytes(4096)
    digest = hashlib.sha256(blob).hexdigest()
    data = archive([constant_node(digest, [1024])], [[0, 0]], {digest: blob})
    refused(
        data,
        "declares 4096 bytes",
        "Limits(max_data_bytes=...)",
        limits=Limits(max_data_bytes=4095),
    )


def test_the_default_cap_is_a_few_gib():
    assert 1 << 30 <= Limits().max_data_bytes <= 16 << 30


@pytest.mark.parametrize("field", ["max_data_bytes", "max_graph_compression", "max_depth"])
@pytest.mark.parametrize("value", [-1, 1.5, "1", None, True])
def test_limits_must_be_non_negative_ints(field, value):
    with pytest.raises(SerializationError, match=f"Limits.{field} must be a non-negative int"):
        Limits(**{field: value})


# --------------------------------------------------------------------------- repro 09
@pytest.mark.parametrize(
    "shape", [[0, 10**30], [0, 2**63], [0, 2**40, 2**40, 2**40], [2**62, 2, 2, 0]]
)
def test_empty_constant_with_impossible_shape_is_a_serialization_error(shape):
    empty = hashlib.sha256(b"").hexdigest()
    data = archive([constant_node(empty, shape)], [[0, 0]], {empty: b""})
    refused(data, "(Constant): attribute 'value'", "more elements than an array can index")


def test_empty_constant_with_possible_shape_loads():
    empty = hashlib.sha256(b"").hexdigest()
    data = archive([constant_node(empty, [0, 2**40])], [[0, 0]], {empty: b""})
    assert og.deserialize(data).results[0].type.shape == (0, 2**40)


def call_chain(depth: int) -> og.Function:
    x = og.parameter(og.f32, (4,))
    fn = og.Function([ops.relu(x) + x], [x], name="f0")
    for k in range(1, depth):
        p = og.parameter(og.f32, (4,))
        (y,) = ops.call(fn, p)
        fn = og.Function([y], [p], name=f"f{k}")
    return fn


def test_deep_call_chain_inlines_without_recursion():
    fn = og.deserialize(og.serialize(call_chain(3000)))
    flat = inline_calls(fn)
    assert not any(isinstance(n.op, ops.Call) for n in flat.nodes)
    assert sorted(type(n.op).__name__ for n in flat.nodes) == ["Add", "Parameter", "Relu"]


def test_deep_call_chain_compiles_on_every_backend(backend):
    fn = og.deserialize(og.serialize(call_chain(3000)))
    x = np.array([-2.0, -0.5, 0.0, 3.0], np.float32)
    (result,) = backend.compile(fn)(x)
    np.testing.assert_array_equal(result, np.maximum(x, 0) + x)


def test_a_callee_called_twice_per_level_inlines_every_call():
    x = og.parameter(og.f32, (2,))
    fn = og.Function([x + x], [x], name="g0")
    for k in range(1, 12):
        p = og.parameter(og.f32, (2,))
        (a,) = ops.call(fn, p)
        (b,) = ops.call(fn, p)
        fn = og.Function([a + b], [p], name=f"g{k}")
    flat = inline_calls(fn)
    assert sum(isinstance(n.op, ops.Add) for n in flat.nodes) == 2**12 - 1


def test_exponential_inlining_is_refused_before_building():
    x = og.parameter(og.f32, (2,))
    fn = og.Function([x + x], [x], name="g0")
    for k in range(1, 60):  # 2^60 nodes once inlined, from a file of a few kilobytes
        p = og.parameter(og.f32, (2,))
        (a,) = ops.call(fn, p)
        (b,) = ops.call(fn, p)
        fn = og.Function([a + b], [p], name=f"g{k}")
    loaded = og.deserialize(og.serialize(fn))
    with pytest.raises(GraphError, match=r"would give \d{19} nodes, more than max_nodes"):
        inline_calls(loaded)
    with pytest.raises(GraphError, match="inline_calls"):
        og.backend("INTERPRETER").compile(loaded)
