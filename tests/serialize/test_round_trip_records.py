"""Every record of the op table, for every element type it lists, survives a round trip: the
loaded Function prints identically, re-serializes to the same bytes, and computes bit-identical
results on INTERPRETER."""

import numpy as np
import pytest

import opgraph as og
from opgraph.core.op import OP_REGISTRY
from opgraph.serialize import deserialize, serialize
from opgraph.testing.records import RECORDS

CASES = [pytest.param(r, t, id=f"{r.name}-{t.name}") for r in RECORDS for t in r.element_types]


def op_classes(fn: og.Function) -> set[type]:
    """Op classes in ``fn`` and in every Function its nodes call."""
    seen: set[type] = set()
    stack = list(fn.nodes)
    while stack:
        node = stack.pop()
        seen.add(type(node.op))
        for value in node.op.attributes().values():
            if isinstance(value, og.Function):
                stack.extend(value.nodes)
    return seen


def assert_bit_identical(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), f"{what} result {i}"
        assert g.tobytes() == w.tobytes(), f"{what} result {i} differs"


@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_record_round_trips(record, element_type):
    fn = record.function(element_type)
    data = serialize(fn)
    loaded = deserialize(data)
    assert str(loaded) == str(fn)
    assert serialize(loaded) == data
    backend = og.backend("INTERPRETER")
    args = record.arguments(element_type)
    assert_bit_identical(
        backend.compile(loaded)(*args),
        backend.compile(fn)(*args),
        f"{record.name}[{element_type.name}]",
    )


def test_every_recorded_registered_op_round_trips():
    """Every registered op class that some record uses comes back as the same class."""
    recorded: set[type] = set()
    loaded: set[type] = set()
    for record in RECORDS:
        for element_type in record.element_types:
            fn = record.function(element_type)
            recorded |= op_classes(fn)
            loaded |= op_classes(deserialize(serialize(fn)))
    registered = {cls for _, cls in OP_REGISTRY.items()}
    assert recorded <= registered
    missing = sorted(cls.__name__ for cls in recorded - loaded)
    assert not missing, f"op classes lost in a round trip: {missing}"
