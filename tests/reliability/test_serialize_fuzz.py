"""Mutation fuzzers for the loader and for compiling what it loads: only OpgraphError escapes.

The corpus is every op record's graph (one file each) plus graphs with calls, tuples and shared
constants. Three mutators: bytes of the archive, characters of ``graph.json`` (in a valid
archive) and structured edits of the parsed document. Whatever a mutated file holds,
``og.deserialize`` returns a Function or raises ``SerializationError``; a Function that loads
is compiled on INTERPRETER (``OpgraphError`` or an Executable), and run on random inputs when
its values are small (``OpgraphError`` or results). Any other exception fails, naming the case.
Cases are seeded, so a failure reproduces; ``tools/fuzz.py`` runs ten times as many.
"""

from __future__ import annotations

import copy
import functools
import io
import json
import random
import zipfile
from collections import Counter
from typing import Any

import numpy as np
import pytest
from fuzzing import random_inputs, small

import opgraph as og
from opgraph import ops
from opgraph.core.errors import OpgraphError
from opgraph.serialize import Limits
from opgraph.testing.json_edits import apply_edit, paths
from opgraph.testing.records import RECORDS

pytestmark = pytest.mark.timeout(600)

LIMITS = Limits(max_graph_bytes=1 << 22, max_data_bytes=1 << 24)
RUN_ELEMENTS = 1 << 16  # run a loaded graph only when all its values together are this small


@functools.cache
def corpus() -> list[bytes]:
    """Valid files: one per op record (its first element type), and graphs with structure."""
    files = []
    for record in RECORDS:
        try:
            files.append(og.serialize(record.function(record.element_types[0])))
        except OpgraphError:
            continue  # a record needing a setup the serializer does not cover
    return files + structured()


def structured() -> list[bytes]:
    x = og.parameter(og.f32, (4,), name="x")
    inner = og.Function([ops.tuple_(ops.relu(x), x)], [x], name="inner")
    a = og.parameter(og.f32, (2, 2), name="a")
    c = og.constant(np.array([[1, -2], [np.nan, np.inf]], dtype=np.float32))
    flat = ops.reshape(ops.divide(a, c), (4,))
    (pair,) = ops.call(inner, flat)
    (again,) = ops.call(inner, ops.get_tuple_element(pair, 0))
    shared = og.constant(np.arange(4, dtype=np.float32))
    main = og.Function(
        [ops.get_tuple_element(again, 1) + shared, ops.clamp(flat, -1.0, 1.0) * shared],
        [a],
        name="main",
    )
    i = og.parameter(og.i64, (3,), name="i")
    table = og.constant(np.arange(12, dtype=np.int32).reshape(4, 3))
    gathered = og.Function([ops.gather(table, i, 0)], [i], name="gather")
    empty = og.Function([og.constant(np.zeros((0, 3), np.int8))], [], name="empty")
    return [og.serialize(f) for f in (main, gathered, empty, symbolic())]


def symbolic() -> og.Function:
    """Format version 2: symbols in shapes and attributes, expressions from concat and slice."""
    n, m = og.dim("n", max=6), og.dim("m", min=1)
    x = og.parameter(og.f32, (n, m), name="x")
    joined = ops.concat([x, x], 1)
    return og.Function([ops.slice(joined, (0, 1), (n, 2 * m), (1, 2))], [x], name="symbolic")


def archive_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {name: z.read(name) for name in z.namelist()}


def rezip(graph: bytes, data: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("graph.json", graph, compress_type=zipfile.ZIP_DEFLATED)
        for name, blob in data.items():
            if name != "graph.json":
                z.writestr(name, blob, compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


# ------------------------------------------------------------------------------ the check


def outcome(data: bytes, case: str) -> str:
    """Load, compile and maybe run ``data``; the stage it stopped at. Fails on a foreign error."""
    stage = "load"
    try:
        fn = og.deserialize(data, limits=LIMITS)
        stage = "compile"
        executable = og.backend("INTERPRETER").compile(fn)
        if not small(fn, RUN_ELEMENTS):
            return "compiled"
        stage = "run"
        executable(*random_inputs(fn, np.random.default_rng(len(data))))
        return "ran"
    except OpgraphError:
        return f"refused at {stage}"
    except Exception as error:  # anything else is the bug this fuzzer looks for
        raise AssertionError(f"{case}: {stage} raised {type(error).__name__}: {error}") from error


def campaign(cases: int, mutate: Any, name: str) -> Counter[str]:
    files = corpus()
    tally: Counter[str] = Counter()
    for seed in range(cases):
        rng = random.Random(f"{name}-{seed}")
        which = rng.randrange(len(files))
        tally[outcome(mutate(files[which], rng), f"{name} case {seed} (file {which})")] += 1
    return tally


# ------------------------------------------------------------------------------ mutators
def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    edited = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        edited[rng.randrange(len(edited))] = rng.randrange(256)
    if rng.random() < 0.3:
        edited = edited[: rng.randrange(1, len(edited) + 1)]
    return bytes(edited)


JSON_ALPHABET = b'{}[]",:0123456789-.eE \\ntfuaxl'


def mutate_json_text(data: bytes, rng: random.Random) -> bytes:
    members = archive_members(data)
    text = bytearray(members["graph.json"])
    for _ in range(rng.randint(1, 6)):
        where = rng.randrange(len(text))
        action = rng.choice(["replace", "insert", "delete"])
        if action == "replace":
            text[where] = rng.choice(JSON_ALPHABET)
        elif action == "insert":
            text.insert(where, rng.choice(JSON_ALPHABET))
        else:
            del text[where]
    if rng.random() < 0.1:
        text = text[: rng.randrange(len(text) + 1)]
    return rezip(bytes(text), members)


SPECIAL: list[Any] = [
    -1, 0, 1, 2, 3, 7, 1 << 31, 1 << 40, 1 << 63, -(1 << 63), 10**30, True, False, None, "",
    "f32", "i64", "bool", "u1", 0.5, -0.0, 1e308, [], {}, [0], [0, 0], [[0, 0]], [1, 0], [[1, 0]],
    [0, 10**30], [2**62, 2**62], [-3], [1, 2, 3, 4, 5, 6, 7, 8, 9], ["f32", [2, 2]],
    ["f32", [4]], ["i64", []], {"tuple": []}, {"tuple": [["f32", [1]]]}, {"float": "nan"},
    {"float": "-inf"}, {"element_type": "i32"}, {"element_type": "bogus"}, {"function": 0},
    {"function": 99}, {"enum": ["PadMode", "REFLECT"]}, {"enum": ["X", "Y"]},
    {"array": {"data": "0" * 64, "element_type": "f32", "shape": [1]}},
    {"dim": {"sym": 0}}, {"dim": {"sym": 9}}, {"dim": {"+": [{"sym": 0}, 1]}},
    {"dim": {"*": [1 << 63, {"sym": 0}]}}, {"dim": {"//": [{"sym": 0}, 0]}},
    {"dim": {"^": [{"sym": 1}, 99]}}, {"name": "n", "min": 3, "max": 1},
    {"name": "k", "min": 0, "max": None},
    "Add", "Relu", "Call", "Constant", "Parameter", "Tuple", "Gather", "Broadcast", "Reshape",
]  # fmt: skip


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.6 or depth > 2:
        return copy.deepcopy(rng.choice(SPECIAL))
    if roll < 0.75:
        return rng.randint(-(1 << 40), 1 << 40)
    if roll < 0.9:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["op", "shape", "x", "tuple"]): random_value(rng, depth + 1)}


def edit(doc: Any, rng: random.Random) -> Any:
    path = rng.choice(paths(doc))
    if not path:
        return doc
    action = rng.choice(["replace", "replace", "replace", "delete", "insert", "duplicate"])
    key = rng.choice(["op", "version", "attributes", "inputs", "x"])
    return apply_edit(doc, path, action, random_value(rng), key)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = rng.choice(["replace", "replace", "replace", "delete", "insert", "duplicate"])
    if action == "replace":
        parent[last] = random_value(rng)
    elif action == "delete":
        del parent[last]
    elif action == "insert" and isinstance(parent, dict):
        parent[rng.choice(["op", "version", "attributes", "inputs", "x"])] = random_value(rng)
    elif action == "insert":
        parent.insert(last, random_value(rng))
    elif isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    return doc


def mutate_structure(data: bytes, rng: random.Random) -> bytes:
    members = archive_members(data)
    doc = json.loads(members["graph.json"])
    for _ in range(rng.randint(1, 3)):
        doc = edit(doc, rng)
    return rezip(json.dumps(doc).encode(), members)


# --------------------------------------------------------------------------------- tests
def test_corpus_loads_compiles_and_runs():
    tally = Counter(outcome(data, f"corpus file {k}") for k, data in enumerate(corpus()))
    assert len(corpus()) > 300
    assert set(tally) <= {"ran", "compiled", "refused at run"}, tally


def test_mutated_archive_bytes(fuzz_cases):
    tally = campaign(fuzz_cases(2000), mutate_bytes, "bytes")
    assert sum(tally.values()) == fuzz_cases(2000)


def test_mutated_graph_json_text(fuzz_cases):
    tally = campaign(fuzz_cases(2000), mutate_json_text, "text")
    assert tally["refused at load"] < sum(tally.values())  # some mutants load (whitespace…)


def test_structured_document_edits(fuzz_cases):
    tally = campaign(fuzz_cases(2500), mutate_structure, "structure")
    loaded = sum(n for stage, n in tally.items() if stage != "refused at load")
    assert loaded > 0, tally  # edits also reach compile and run, not only the loader
