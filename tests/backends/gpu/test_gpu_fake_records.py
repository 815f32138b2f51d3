"""The numeric record table and random graphs through the GPU backend on the fake device.

The fake device computes each generated kernel's *spec* with the reference kernels (not its
CUDA), so these tests check what surrounds the kernels with real numbers: lowering and fusion
as the GPU backend uses them, placement and transfers between GPU and host, the memory plan
on both sides, kernel parameters (every pointer is resolved and bounds-checked against its
allocation), cuBLAS operands, boundary copies and the call path. The CUDA text itself is
checked by the golden and nvcc tests, and numerically on a real GPU (test_gpu_device.py).
"""

import numpy as np
import pytest
from gpu_cases import fake_backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate
from opgraph.testing.records import RECORDS

CASES = [pytest.param(r, t, id=f"{r.name}-{t.name}") for r in RECORDS for t in r.element_types]
BACKEND, DEVICE = fake_backend()


@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_record_on_fake_gpu(record, element_type):
    fn = record.function(element_type)
    args = record.arguments(element_type)
    got = BACKEND.compile(fn)(*args)
    want = evaluate(fn, args)
    rtol, atol = record.tolerance(element_type)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, rtol, atol, f"{record.name}[{element_type.name}] result {i} (fake GPU)")


def test_the_table_exercised_every_kind_of_device_step():
    """The table above is only meaningful if its programs reach the device: loop kernels,
    cuBLAS products, convolutions and pooling all ran there, and some steps on the host."""
    backend, device = fake_backend()
    kinds = set()
    host = 0
    for record in RECORDS:
        exe = backend.compile(record.function(record.element_types[0]))
        kinds |= {type(a).__name__ for a in exe.compiled.actions}
        host += len(exe.host_steps())
    assert {"DeviceLoop", "DeviceGemm", "DeviceConv", "DevicePool", "HostRun"} <= kinds
    assert host > 0


# --------------------------------------------------------------------- random graphs
# The differential random-graph test of tests/numerics, run on the fake GPU.
UNARY = ["tanh", "sigmoid", "relu", "abs", "negative"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


@st.composite
def graphs(draw):
    import opgraph as og
    from opgraph import ops

    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    element_type = draw(st.sampled_from([og.f32, og.f64, og.f16]))
    params = [og.parameter(element_type, shape) for _ in range(draw(st.integers(1, 3)))]
    values = list(params)
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "movement", "reduce"]))
        x = draw(st.sampled_from(values))
        if kind == "unary":
            values.append(getattr(ops, draw(st.sampled_from(UNARY)))(x))
        elif kind == "binary":
            same = [v for v in values if v.shape == x.shape and v.element_type is x.element_type]
            values.append(
                getattr(ops, draw(st.sampled_from(BINARY)))(x, draw(st.sampled_from(same)))
            )
        elif kind == "movement" and x.rank:
            t = ops.transpose(x, draw(st.permutations(range(x.rank))))
            values.append(ops.reshape(t, (-1,)) if draw(st.booleans()) else t)
        elif x.rank:
            axis = draw(st.integers(0, x.rank - 1))
            reduce = draw(st.sampled_from([ops.reduce_sum, ops.reduce_max]))
            values.append(reduce(x, (axis,)))
    results = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
    return og.Function(results, params), element_type


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.integers(0, 2**31))
def test_random_graphs_on_fake_gpu(case, seed):
    fn, element_type = case
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-2, 2, p.shape).astype(element_type.dtype) for p in fn.parameters]
    want = evaluate(fn, args)
    got = BACKEND.compile(fn)(*args)
    tolerance = 2e-2 if element_type.name == "f16" else 1e-4
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, tolerance, tolerance, "fake GPU")
