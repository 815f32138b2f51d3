"""The record table at two bindings of one symbolic Function on INTERPRETER, CPU and GPU,
against the oracle run on the Function specialised to each binding.

GPU runs on the real device where one is present, else on the fake device
(``opgraph.backends.gpu.FakeDevice``: the whole backend with the kernels' specs computed on
numpy). Its one compile specialises per binding, so both bindings run the GPU code generation.
Every record runs (no sampling).
"""

import numpy as np
import pytest

import opgraph as og
from opgraph.backends.cpu import unavailable_reason as cpu_unavailable
from opgraph.backends.gpu import FakeDevice, GpuBackend
from opgraph.passes import specialize_shapes
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate
from opgraph.testing.records import RECORDS
from opgraph.testing.symbolic import has_dimensions, symbolic_case

#: Records with no symbolic form: range_ is a build-time Constant whose length its Python-number
#: bounds fix (the records add an input of that static length); a fractional resize scale gives
#: the size floor(size * scale) in floating point, which no dimension expression reproduces.
#: Pinned: it may only shrink (docs/dynamic-shapes.md, "Ops limited to static sizes").
STATIC_ONLY = frozenset(
    {
        "range_integral",
        "range_negative_step",
        "range_empty",
        "resize_linear_asymmetric_3d",
    }
)

CASES = [pytest.param(r, id=r.name) for r in RECORDS]
#: One compile per record serves both bindings on every backend that runs symbolic Functions.
BACKENDS = [
    "INTERPRETER",
    pytest.param("CPU", marks=pytest.mark.skipif(bool(cpu_unavailable()), reason="no C compiler")),
    "GPU",
]


def backend_named(name: str) -> og.Backend:
    """``og.backend(name)``; GPU on the fake device where no GPU is present."""
    if name == "GPU" and "GPU" not in og.backends():
        return GpuBackend(device=FakeDevice())
    return og.backend(name)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("record", CASES)
def test_record_at_two_bindings(record, backend):
    if not has_dimensions(record):
        pytest.skip("scalar inputs only: no dimension to make symbolic")
    element_type = record.element_types[0]
    case = symbolic_case(record, element_type)
    if case is None:  # every scheme raised OpTypeError (any other error fails the test)
        assert record.name in STATIC_ONLY, f"{record.name} no longer builds symbolically"
        return
    assert record.name not in STATIC_ONLY, f"{record.name} builds symbolically now: unpin it"
    exe = backend_named(backend).compile(case.function)
    rtol, atol = record.tolerance(element_type)
    for binding in case.bindings:
        args = case.arguments(element_type, binding)
        got = exe(*args)
        want = evaluate(specialize_shapes(case.function, binding), args)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            # The record's tolerance was set for its own sizes; larger sums at the second
            # binding get an absolute tolerance scaled to the result's magnitude.
            finite = np.abs(w[np.isfinite(w)]) if w.dtype.kind == "f" else np.zeros(0)
            scale = float(np.max(finite, initial=0))  # an inf or NaN result sets no scale
            tol = max(atol, rtol * scale) if binding is case.bindings[1] else atol
            assert_close(g, w, rtol, tol, f"{record.name} with {binding}: result {i}")


def test_pinned_records_have_dimensions():
    pinned = [r for r in RECORDS if r.name in STATIC_ONLY]
    assert len(pinned) == len(STATIC_ONLY) and all(map(has_dimensions, pinned))


def test_most_records_run_symbolically():
    records = [r for r in RECORDS if has_dimensions(r)]
    cases = [symbolic_case(r, r.element_types[0]) for r in records]
    assert sum(c is not None for c in cases) >= 0.9 * len(records)
