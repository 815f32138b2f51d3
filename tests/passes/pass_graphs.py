"""A hypothesis strategy for random graphs shared by the pass tests (not a test module)."""

from hypothesis import strategies as st

import opgraph as og
from opgraph import ops

UNARY = [ops.tanh, ops.relu, ops.abs, ops.negative, ops.exp, ops.sigmoid]
BINARY = [ops.add, ops.subtract, ops.multiply, ops.maximum, ops.minimum]
IDENTITIES = [
    lambda x: (x + 0.0) * 1.0,
    lambda x: ops.negative(ops.negative(x)),
    lambda x: ops.reshape(x, x.shape),
    lambda x: ops.transpose(ops.transpose(x)),
    lambda x: ops.maximum(x, x * 0.0),
    lambda x: ops.exp(ops.negative(x)),  # the same expression drawn twice is CSE's food
    lambda x: ops.convert(x, x.element_type),
    lambda x: ops.reduce_sum(x, ()),
]


def _step(draw, values, kind):
    x = draw(st.sampled_from(values))
    if kind == "unary":
        return draw(st.sampled_from(UNARY))(ops.tanh(x) if x.element_type.is_real else x)
    if kind == "binary":
        same = [v for v in values if v.type == x.type]
        return draw(st.sampled_from(BINARY))(x, draw(st.sampled_from(same)))
    if kind == "movement" and x.rank:
        perm = draw(st.permutations(range(x.rank)))
        t = ops.transpose(x, perm)
        return ops.reshape(t, (-1,)) if draw(st.booleans()) else t
    if kind == "constant":
        return ops.add(x, x * 0.5)
    if kind == "identity":
        return draw(st.sampled_from(IDENTITIES))(x)
    if kind == "split" and x.rank and x.shape[0] >= 2:
        cut = draw(st.integers(1, x.shape[0] - 1))
        lower, upper = (0,) * x.rank, x.shape
        left = ops.slice(x, lower, (cut, *upper[1:]))
        right = ops.slice(x, (cut, *lower[1:]), upper)
        return ops.concat([ops.tanh(left), right] if draw(st.booleans()) else [left, right], 0)
    if x.rank:
        return ops.reduce_sum(x, (draw(st.integers(0, x.rank - 1)),))
    return ops.negative(x)


@st.composite
def graphs(draw, max_ops=14):
    """A random Function over f32/f64 with unary, binary, movement, constant and reduction ops,
    several results (a result may repeat, or be a parameter)."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    element_type = draw(st.sampled_from([og.f32, og.f64]))
    params = [og.parameter(element_type, shape) for _ in range(draw(st.integers(1, 3)))]
    values = list(params)
    kinds = st.sampled_from(
        ["unary", "binary", "movement", "reduce", "constant", "identity", "split"]
    )
    for _ in range(draw(st.integers(1, max_ops))):
        values.append(_step(draw, values, draw(kinds)))
    results = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
    return og.Function(results, params)
