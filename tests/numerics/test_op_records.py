"""The record table on every backend × element type, against the numpy oracle.

Data-dependent records also run on GPU where no GPU is present, on the fake device
(``FakeDevice``; the rest of the table runs there in tests/backends/gpu/test_gpu_fake_records.py).
"""

import pytest

import opgraph as og
from opgraph.backends.fused.staged import StagedExecutable, is_data_dependent
from opgraph.backends.gpu import FakeDevice, GpuBackend
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate
from opgraph.testing.records import DATA_DEPENDENT_RECORDS, RECORDS

CASES = [
    pytest.param(r, t, id=f"{r.name}-{t.name}")
    for r in (*RECORDS, *DATA_DEPENDENT_RECORDS)
    for t in r.element_types
]
DATA_DEPENDENT_CASES = [
    pytest.param(r, t, id=f"{r.name}-{t.name}")
    for r in DATA_DEPENDENT_RECORDS
    for t in r.element_types
]


@pytest.mark.parametrize("backend_name", og.backends())
@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_record(backend_name, record, element_type):
    check_record(og.backend(backend_name), record, element_type)


@pytest.mark.parametrize(("record", "element_type"), DATA_DEPENDENT_CASES)
def test_data_dependent_record_on_gpu(record, element_type):
    """GPU runs data-dependent Functions in stages (backends/fused/staged.py); where no GPU is
    present, on the fake device."""
    if "GPU" in og.backends():
        pytest.skip("a real GPU is present: test_record runs these on it")
    backend = GpuBackend(device=FakeDevice())
    fn = record.function(element_type)
    staged = isinstance(backend.compile(fn), StagedExecutable)
    assert staged == is_data_dependent(fn), f"{record.name}: staged only with value-decided sizes"
    check_record(backend, record, element_type)


def check_record(backend: og.Backend, record, element_type) -> None:
    fn = record.function(element_type)
    args = record.arguments(element_type)
    got = backend.compile(fn)(*args)
    want = evaluate(fn, args)
    rtol, atol = record.tolerance(element_type)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, rtol, atol, f"{record.name}[{element_type.name}] result {i}")


def test_record_names_are_unique():
    names = [r.name for r in (*RECORDS, *DATA_DEPENDENT_RECORDS)]
    assert len(names) == len(set(names))
