"""Differential tests: random graphs run on CPU (serial and forced-parallel) and INTERPRETER
must agree — elementwise chains with broadcasts, reductions fused as row phases, converts and
selects, views, over integer, f32/f64 and f16/bf16 types.

Computed floats are compared or truncated to integers only where the reference's op-by-op
rounding cannot flip the outcome (leaf parameters): fused code may round differently by an ulp.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opgraph as og
from opgraph import ops
from opgraph.testing.compare import assert_close

FLOATS = [og.f32, og.f64, og.f16, og.bf16]
INTS = [og.i8, og.i32, og.i64, og.u8, og.u16]
TOLERANCE = {"f16": 3e-2, "bf16": 6e-2, "f32": 2e-4, "f64": 1e-9}

FLOAT_UNARY = [
    ops.tanh,
    ops.sigmoid,
    lambda x: ops.exp(ops.negative(ops.abs(x))),
    lambda x: ops.sqrt(ops.abs(x)),
    ops.relu,
    ops.negative,
]
INT_UNARY = [ops.abs, ops.relu, lambda x: ops.multiply(x, x)]
BINARY = [ops.add, ops.subtract, ops.multiply, ops.maximum, ops.minimum]


def _nonzero(x):
    one = og.builders.scalar_like(1, x)
    return ops.select(ops.equal(x, og.builders.scalar_like(0, x)), one, x)


def _step(draw, values, params, t):
    x = draw(st.sampled_from(values))
    kind = draw(st.sampled_from(["unary", "binary", "binary", "select", "reduce", "view"]))
    if kind == "unary":
        return draw(st.sampled_from(FLOAT_UNARY if t.is_real else INT_UNARY))(x)
    same = [v for v in values if v.shape == x.shape]
    y = draw(st.sampled_from(same))
    if kind == "binary":
        if not t.is_real and draw(st.booleans()):
            return ops.divide(x, _nonzero(y), floor_division=draw(st.booleans()))
        return draw(st.sampled_from(BINARY))(x, y)
    leaves = [p for p in params if p.shape == x.shape]
    if kind == "select" and leaves:
        condition = ops.less(draw(st.sampled_from(leaves)), draw(st.sampled_from(leaves)))
        return ops.select(condition, x, y)
    if kind == "reduce" and x.rank:
        axis = draw(st.integers(0, x.rank - 1))
        reduce = draw(st.sampled_from([ops.reduce_sum, ops.reduce_max, ops.reduce_min]))
        total = reduce(x, (axis,))
        back = ops.broadcast(total, x.shape, (axis,)) if draw(st.booleans()) else total
        return back if back.shape != x.shape else ops.add(back, x)
    if x.rank >= 2:
        perm = draw(st.permutations(range(x.rank)))
        return ops.transpose(x, perm)
    return ops.reshape(x, (x.shape[0] if x.rank else 1, 1))


@st.composite
def graphs(draw, types):
    t = draw(st.sampled_from(types))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    params = [og.parameter(t, shape) for _ in range(draw(st.integers(1, 3)))]
    values = list(params)
    if draw(st.booleans()):  # a convert of a leaf: exact in both
        other = draw(st.sampled_from([og.f32, og.i32, og.i8, og.u8, og.f16]))
        values.append(ops.convert(ops.convert(params[0], other), t))
    for _ in range(draw(st.integers(1, 8))):
        values.append(_step(draw, values, params, t))
    results = draw(
        st.lists(st.sampled_from(values[len(params) :] or values), min_size=1, max_size=3)
    )
    return og.Function(results, params), t


def _arguments(fn, t, seed):
    rng = np.random.default_rng(seed)
    if t.is_real:
        return [rng.uniform(-2, 2, p.shape).astype(t.dtype) for p in fn.parameters]
    return [rng.integers(-20, 21, p.shape).astype(t.dtype) for p in fn.parameters]


def _agree(fn, t, seed, backend):
    args = _arguments(fn, t, seed)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    got = backend.compile(fn)(*args)
    tol = TOLERANCE.get(t.name, 0.0)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, tol, tol, f"{t.name} {fn}")


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(graphs(FLOATS), st.integers(0, 2**31))
def test_float_graphs_agree(cpu, case, seed):
    _agree(*case, seed, cpu)


@SETTINGS
@given(graphs(INTS), st.integers(0, 2**31))
def test_integer_graphs_agree_exactly(cpu, case, seed):
    _agree(*case, seed, cpu)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs(FLOATS + INTS), st.integers(0, 2**31))
def test_parallel_kernels_agree(parallel_cpu, case, seed):
    """Every kernel split between threads, whatever its size."""
    _agree(*case, seed, parallel_cpu)
