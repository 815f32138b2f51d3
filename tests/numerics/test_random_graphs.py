"""Random graphs (hypothesis): every backend agrees with the oracle."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opgraph as og
from opgraph import ops
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate

UNARY = [
    ops.tanh,
    ops.sigmoid,
    ops.relu,
    ops.abs,
    ops.negative,
    lambda x: ops.exp(ops.negative(ops.abs(x))),
]
BINARY = [ops.add, ops.subtract, ops.multiply, ops.maximum, ops.minimum]


@st.composite
def graphs(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    element_type = draw(st.sampled_from([og.f32, og.f64]))
    params = [og.parameter(element_type, shape) for _ in range(draw(st.integers(1, 3)))]
    values = list(params)
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "movement", "reduce"]))
        x = draw(st.sampled_from(values))
        if kind == "unary":
            values.append(draw(st.sampled_from(UNARY))(x))
        elif kind == "binary":
            same = [v for v in values if v.shape == x.shape]
            values.append(draw(st.sampled_from(BINARY))(x, draw(st.sampled_from(same))))
        elif kind == "movement" and x.rank:
            perm = draw(st.permutations(range(x.rank)))
            t = ops.transpose(x, perm)
            values.append(ops.reshape(t, (-1,)) if draw(st.booleans()) else t)
        elif x.rank:
            axis = draw(st.integers(0, x.rank - 1))
            values.append(ops.reduce_sum(x, (axis,)))
    results = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
    return og.Function(results, params), element_type


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.integers(0, 2**31))
def test_random_graphs_match_oracle(case, seed):
    fn, element_type = case
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-2, 2, p.shape).astype(element_type.dtype) for p in fn.parameters]
    want = evaluate(fn, args)
    for name in og.backends():
        got = og.backend(name).compile(fn)(*args)
        for g, w in zip(got, want, strict=True):
            assert_close(g, w, 1e-4, 1e-5, name)
