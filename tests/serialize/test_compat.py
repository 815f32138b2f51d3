"""The compatibility policy of docs/format.md: old files keep loading.

* a committed format-version-1 file loads, prints and computes as when it was written;
* readers accept every format version up to theirs;
* an op that gained an attribute with a default reads old files; one without a default refuses;
* an op whose version changed reads old files through its registered upgrades.
"""

from pathlib import Path

import numpy as np
import pytest
from make_fixture import ARGUMENTS, SYMBOLIC_BINDINGS, build, build_symbolic
from serialize_ops import Grown, Scaled, document, node, with_document

import opgraph as og
from opgraph.core.errors import RegistryError, SerializationError
from opgraph.core.registry import Registry
from opgraph.serialize import (
    UPGRADES,
    decode,
    deserialize,
    load,
    register_upgrade,
    serialize,
    upgrades,
)

DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "v1_small.opgraph"


def test_the_v1_fixture_is_format_version_1():
    assert document(FIXTURE.read_bytes())["format_version"] == 1


def test_the_v1_fixture_loads_and_prints_as_written():
    assert str(load(FIXTURE)) + "\n" == (DATA / "v1_small.txt").read_text()


def test_the_v1_fixture_computes_as_the_graph_it_was_made_from():
    backend = og.backend("INTERPRETER")
    got = backend.compile(load(FIXTURE))(*ARGUMENTS)
    want = backend.compile(build())(*ARGUMENTS)
    assert len(got) == len(want) == 5  # the tuple result is flattened
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    np.testing.assert_array_equal(got[-1], ARGUMENTS[0])


FIXTURE_V2 = DATA / "v2_symbolic.opgraph"


def test_the_v2_fixture_is_format_version_2_with_symbols():
    doc = document(FIXTURE_V2.read_bytes())
    assert doc["format_version"] == 2
    assert doc["symbols"] == [
        {"name": "batch", "min": 0, "max": None},
        {"name": "seq", "min": 1, "max": 64},
    ]


def test_the_v2_fixture_loads_and_prints_as_written():
    loaded = load(FIXTURE_V2)
    assert str(loaded) + "\n" == (DATA / "v2_symbolic.txt").read_text()
    want = build_symbolic()
    assert [p.type for p in loaded.parameters] == [p.type for p in want.parameters]
    assert [hash(r.type) for r in loaded.results] == [hash(r.type) for r in want.results]


def test_the_v2_fixture_computes_as_the_graph_it_was_made_from():
    backend = og.backend("INTERPRETER")
    got, want = backend.compile(load(FIXTURE_V2)), backend.compile(build_symbolic())
    for binding in SYMBOLIC_BINDINGS:
        shape = (binding["batch"], binding["seq"], 4)
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        for g, w in zip(got(x), want(x), strict=True):
            assert g.shape == w.shape and g.tobytes() == w.tobytes()


def test_readers_accept_older_format_versions(monkeypatch):
    steps = Registry("format upgrade")  # a future version 3: one more step after 1 -> 2
    steps.add(1, upgrades.FORMAT_UPGRADES[1])
    steps.add(2, lambda doc: {**doc, "format_version": 3})
    monkeypatch.setattr(upgrades, "FORMAT_UPGRADES", steps)
    monkeypatch.setattr(decode, "FORMAT_VERSION", 3)
    assert str(load(FIXTURE)) + "\n" == (DATA / "v1_small.txt").read_text()


# -------------------------------------------------------------------------- op evolution
def grown_file() -> bytes:
    x = og.parameter(og.f32, (2,))
    return serialize(og.Function([Grown(needed=3, extra=9)(x)], [x]))


def test_an_attribute_added_with_a_default_takes_it_in_old_files(test_ops):
    data = grown_file()
    doc = document(data)
    del node(doc, "Grown")["attributes"]["extra"]  # as a file written before `extra` existed
    assert deserialize(with_document(data, doc)).results[0].node.op == Grown(needed=3, extra=7)


def test_an_attribute_added_without_a_default_refuses_old_files(test_ops):
    data = grown_file()
    doc = document(data)
    del node(doc, "Grown")["attributes"]["needed"]
    with pytest.raises(SerializationError, match="missing attribute 'needed' .it has no default"):
        deserialize(with_document(data, doc))


def scaled_file(version: int, attributes: dict) -> bytes:
    x = og.parameter(og.f32, (2,))
    data = serialize(og.Function([Scaled(1.0, 0.5)(x)], [x]))
    doc = document(data)
    node(doc, "Scaled")["version"] = version
    node(doc, "Scaled")["attributes"] = attributes
    return with_document(data, doc)


@pytest.mark.parametrize(
    ("version", "attributes"),
    [(1, {"factor": 4}), (2, {"scale": 4.0}), (3, {"scale": 4.0, "bias": 0.0})],
)
def test_old_op_versions_are_upgraded_step_by_step(test_ops, version, attributes):
    op = deserialize(scaled_file(version, attributes)).results[0].node.op
    assert op == Scaled(scale=4.0, bias=0.0)
    assert type(op.scale) is float


def test_the_upgraded_attributes_are_checked_like_any_others(test_ops):
    with pytest.raises(SerializationError, match="unknown attribute.s. 'factor' for Scaled"):
        deserialize(scaled_file(2, {"factor": 4}))


def test_an_op_version_without_an_upgrade_is_refused(test_ops):
    x = og.parameter(og.f32, (2,))
    from serialize_ops import Stuck

    data = serialize(og.Function([Stuck()(x)], [x]))
    doc = document(data)
    node(doc, "Stuck")["version"] = 1
    with pytest.raises(
        SerializationError,
        match="op Stuck version 1 is older than this opgraph's version 2 and no upgrade from "
        "version 1 is registered",
    ):
        deserialize(with_document(data, doc))


def test_a_failing_upgrade_is_reported_with_its_cause(test_ops):
    x = og.parameter(og.f32, (2,))
    from serialize_ops import Broken

    data = serialize(og.Function([Broken()(x)], [x]))
    doc = document(data)
    node(doc, "Broken")["version"] = 1
    with pytest.raises(
        SerializationError, match=r"\(Broken\): upgrading from version 1 failed"
    ) as info:
        deserialize(with_document(data, doc))
    assert isinstance(info.value.__cause__, KeyError)


def test_an_upgrade_must_return_attributes(test_ops, monkeypatch):
    monkeypatch.setitem(UPGRADES._items, ("Scaled", 2), lambda attributes: None)
    with pytest.raises(SerializationError, match="returned NoneType, not a dict of attributes"):
        deserialize(scaled_file(2, {"scale": 1.0}))


def test_upgrades_refuse_duplicates():
    with pytest.raises(RegistryError, match="already registered"):
        register_upgrade("Scaled", from_version=1)(lambda attributes: attributes)
