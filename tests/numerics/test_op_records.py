"""The record table on every backend × element type, against the numpy oracle."""

import pytest

import opgraph as og
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate
from opgraph.testing.records import DATA_DEPENDENT_RECORDS, RECORDS

CASES = [
    pytest.param(r, t, id=f"{r.name}-{t.name}")
    for r in (*RECORDS, *DATA_DEPENDENT_RECORDS)
    for t in r.element_types
]


@pytest.mark.parametrize("backend_name", og.backends())
@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_record(backend_name, record, element_type):
    fn = record.function(element_type)
    if "data_dependent" in record.tags and backend_name not in ("INTERPRETER", "CPU"):
        # GPU plans memory before the call: it refuses value-decided sizes (CPU runs them in
        # stages around the data-dependent nodes, backends/cpu/staged.py).
        with pytest.raises(og.UnsupportedOpError, match="decided by the input values"):
            og.backend(backend_name).compile(fn)
        return
    args = record.arguments(element_type)
    got = og.backend(backend_name).compile(fn)(*args)
    want = evaluate(fn, args)
    rtol, atol = record.tolerance(element_type)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, rtol, atol, f"{record.name}[{element_type.name}] result {i}")


def test_record_names_are_unique():
    names = [r.name for r in (*RECORDS, *DATA_DEPENDENT_RECORDS)]
    assert len(names) == len(set(names))
