"""Random graphs with symbolic dimensions (hypothesis): one symbolic compile, run at two
bindings of its symbols, agrees with static compiles of the Function specialised to each
binding (``og.passes.specialize_shapes``).

The symbolic side is one parameter, ``SYMBOLIC_BACKENDS``: a backend that compiles symbolic
Functions joins the list (INTERPRETER and CPU do). The static side is ``STATIC_BACKEND``.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opgraph as og
from opgraph import ops
from opgraph.core.dim import evaluate
from opgraph.passes import specialize_shapes
from opgraph.testing.compare import assert_close

SYMBOLIC_BACKENDS = ["INTERPRETER", "CPU"]
STATIC_BACKEND = "CPU"
SYMBOLS = ("a", "b")
MAX_RANK = 4

UNARY = [ops.tanh, ops.relu, ops.negative, ops.abs]
BINARY = [ops.add, ops.multiply, ops.maximum]
REDUCTIONS = [ops.reduce_sum, ops.reduce_max, ops.reduce_mean]


def _dims(draw):
    """A dimension: a symbol (a bare name, so a parameter holding it binds it) or 1..3."""
    return draw(st.one_of(st.sampled_from([og.dim(s) for s in SYMBOLS]), st.integers(1, 3)))


def _same_shape(draw, values, x):
    return draw(st.sampled_from([v for v in values if v.shape == x.shape]))


def _step(draw, kind, x, values, params):
    """One new value from ``x`` (None when the kind does not apply to it)."""
    if kind == "unary":
        return draw(st.sampled_from(UNARY))(x)
    if kind == "binary":
        return draw(st.sampled_from(BINARY))(x, _same_shape(draw, values, x))
    if kind == "broadcast" and x.rank < MAX_RANK:
        return ops.broadcast(x, (_dims(draw), *x.shape), (0,))
    if kind == "matmul" and x.rank:
        w = og.parameter(og.f32, (x.shape[-1], _dims(draw)), name=f"w{len(params)}")
        params.append(w)
        return ops.matmul(x, w)
    if kind == "reshape" and x.rank >= 2:
        merged = (*x.shape[:-2], x.shape[-2] * x.shape[-1])
        return ops.reshape(x, merged if draw(st.booleans()) else (-1,))
    if kind == "concat" and x.rank:
        axis = draw(st.integers(0, x.rank - 1))
        return ops.concat([x, _same_shape(draw, values, x)], axis)
    if kind == "slice" and x.rank:
        axis = draw(st.integers(0, x.rank - 1))
        upper = list(x.shape)
        steps = [1] * x.rank
        steps[axis] = draw(st.integers(1, 2))  # from 0: never empty on a non-empty axis
        return ops.slice(x, [0] * x.rank, upper, steps)
    if kind == "reduce" and x.rank:
        axis = draw(st.integers(0, x.rank - 1))
        return draw(st.sampled_from(REDUCTIONS))(x, (axis,), draw(st.booleans()))
    if kind == "transpose" and x.rank >= 2:
        return ops.transpose(x, draw(st.permutations(range(x.rank))))
    return None


KINDS = [
    "unary",
    "binary",
    "broadcast",
    "matmul",
    "reshape",
    "concat",
    "slice",
    "reduce",
    "transpose",
]


@st.composite
def symbolic_graphs(draw):
    """A Function whose first parameter holds every symbol by itself (so each call binds them
    all), and up to a dozen ops drawn from ``KINDS``."""
    extra = draw(st.lists(st.integers(1, 3), max_size=1))
    first = og.parameter(og.f32, (*(og.dim(s) for s in SYMBOLS), *extra), name="x0")
    params = [first]
    if draw(st.booleans()):
        params.append(og.parameter(og.f32, tuple(_dims(draw) for _ in range(2)), name="x1"))
    values = list(params)
    for _ in range(draw(st.integers(1, 12))):
        x = draw(st.sampled_from(values))
        made = _step(draw, draw(st.sampled_from(KINDS)), x, values, params)
        if made is not None:
            values.append(made)
    results = [values[-1], *draw(st.lists(st.sampled_from(values), max_size=1))]
    return og.Function(results, params, name="random_symbolic")


def _bindings():
    return st.fixed_dictionaries({s: st.integers(1, 5) for s in SYMBOLS})


def _arguments(fn, binding, rng):
    shapes = [tuple(int(evaluate(d, binding)) for d in p.shape) for p in fn.parameter_types]
    return [rng.uniform(-2, 2, shape).astype(np.float32) for shape in shapes]


@pytest.mark.parametrize("backend", SYMBOLIC_BACKENDS)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(symbolic_graphs(), _bindings(), _bindings(), st.integers(0, 2**31))
def test_symbolic_compile_matches_static_compiles(backend, fn, first, second, seed):
    exe = og.backend(backend).compile(fn)
    rng = np.random.default_rng(seed)
    for binding in (first, second):
        args = _arguments(fn, binding, rng)
        got = exe(*args)
        static = og.backend(STATIC_BACKEND).compile(specialize_shapes(fn, binding))
        want = static(*args)
        for i, (g, w, t) in enumerate(zip(got, want, fn.flat_result_types, strict=True)):
            what = f"{backend} result {i} with {binding}"
            assert g.shape == tuple(evaluate(d, binding) for d in t.shape), what
            assert_close(g, w, 1e-4, 1e-4, what)
