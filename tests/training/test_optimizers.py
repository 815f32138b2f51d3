"""Each update rule against a numpy implementation of the same formula."""

import numpy as np
import pytest

import opgraph as og
from opgraph import optim

SHAPES = [(3, 4), (5,), ()]


def _values(rng, positive=False):
    arrays = [rng.standard_normal(s) for s in SHAPES]
    return [np.abs(a) if positive else a for a in arrays]


def _params(name):
    return [og.parameter(og.f64, s, name=f"{name}{i}") for i, s in enumerate(SHAPES)]


def _run(backend, fn, *groups):
    return backend.compile(fn)(*[np.asarray(a) for group in groups for a in group])


def numpy_sgd(p, g, lr):
    return p - lr * g


def numpy_momentum(p, g, v, lr, beta):
    v = beta * v + g
    return p - lr * v, v


def numpy_adam(p, g, m, v, t, lr, b1, b2, eps):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def test_sgd_matches_numpy(backend):
    rng = np.random.default_rng(0)
    p, g = _params("p"), _params("g")
    fn = og.Function(optim.sgd(p, g, lr=0.25), [*p, *g])
    pv, gv = _values(rng), _values(rng)
    for got, pi, gi in zip(_run(backend, fn, pv, gv), pv, gv, strict=True):
        np.testing.assert_allclose(got, numpy_sgd(pi, gi, 0.25), rtol=1e-12)


def test_momentum_matches_numpy(backend):
    rng = np.random.default_rng(1)
    p, g, v = _params("p"), _params("g"), _params("v")
    new_p, new_v = optim.momentum(p, g, v, lr=0.1, beta=0.8)
    fn = og.Function([*new_p, *new_v], [*p, *g, *v])
    pv, gv, vv = _values(rng), _values(rng), _values(rng)
    got = _run(backend, fn, pv, gv, vv)
    for i in range(len(SHAPES)):
        want_p, want_v = numpy_momentum(pv[i], gv[i], vv[i], 0.1, 0.8)
        np.testing.assert_allclose(got[i], want_p, rtol=1e-12)
        np.testing.assert_allclose(got[len(SHAPES) + i], want_v, rtol=1e-12)


@pytest.mark.parametrize("t", [1, 2, 37])
def test_adam_matches_numpy_with_the_step_as_an_input(backend, t):
    rng = np.random.default_rng(t)
    p, g, m, v = _params("p"), _params("g"), _params("m"), _params("v")
    step = og.parameter(og.i64, (), name="t")
    hyper = {"lr": 0.01, "beta1": 0.85, "beta2": 0.99, "eps": 1e-6}
    new_p, new_m, new_v = optim.adam(p, g, m, v, step, **hyper)
    fn = og.Function([*new_p, *new_m, *new_v], [*p, *g, *m, *v, step])
    pv, gv, mv = _values(rng), _values(rng), _values(rng)
    vv = _values(rng, positive=True)
    got = _run(backend, fn, pv, gv, mv, vv, [np.int64(t)])
    n = len(SHAPES)
    for i in range(n):
        want = numpy_adam(pv[i], gv[i], mv[i], vv[i], t, 0.01, 0.85, 0.99, 1e-6)
        for k in range(3):
            np.testing.assert_allclose(got[k * n + i], want[k], rtol=1e-10)


def test_adam_with_python_numbers_equals_adam_with_graph_scalars():
    rng = np.random.default_rng(5)
    p, g, m, v = _params("p"), _params("g"), _params("m"), _params("v")
    lr = og.parameter(og.f32, (), name="lr")  # converted to f64 explicitly
    folded = optim.adam(p, g, m, v, 3, lr=0.02)[0]
    graph = optim.adam(p, g, m, v, og.constant(3.0, og.f64), lr=lr)[0]
    fn = og.Function([*folded, *graph], [*p, *g, *m, *v, lr])
    pv, gv, mv, vv = _values(rng), _values(rng), _values(rng), _values(rng, positive=True)
    got = _run(og.backend("INTERPRETER"), fn, pv, gv, mv, vv, [np.float32(0.02)])
    for a, b in zip(got[: len(SHAPES)], got[len(SHAPES) :], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_float32_update_stays_float32():
    p = og.parameter(og.f32, (2,))
    g = og.parameter(og.f32, (2,))
    (new,) = optim.sgd([p], [g], lr=0.5)
    assert new.type == p.type


def test_learning_rate_as_a_scalar_parameter():
    p, g = og.parameter(og.f64, (3,)), og.parameter(og.f64, (3,))
    lr = og.parameter(og.f64, ())
    fn = og.Function(optim.sgd([p], [g], lr), [p, g, lr])
    (got,) = og.backend("INTERPRETER").compile(fn)(np.ones(3), np.arange(3.0), np.array(0.5))
    np.testing.assert_allclose(got, [1.0, 0.5, 0.0])


def test_rule_errors():
    p = og.parameter(og.f32, (2,))
    with pytest.raises(og.OpTypeError, match="1 parameter\\(s\\) but 2 grads"):
        optim.sgd([p], [p, p], 0.1)
    with pytest.raises(
        og.OpTypeError, match="grads\\[0\\] is f32\\[3\\], parameter 0 is f32\\[2\\]"
    ):
        optim.sgd([p], [og.parameter(og.f32, (3,))], 0.1)
    with pytest.raises(og.OpTypeError, match="lr must be a scalar"):
        optim.sgd([p], [p], og.parameter(og.f32, (2,)))
    q = og.parameter(og.i32, (2,))
    with pytest.raises(og.OpTypeError, match="only floats can be trained"):
        optim.momentum([q], [q], [q], 0.1)
    with pytest.raises(og.OpTypeError, match="Adam: 1 parameter\\(s\\) need 3 state values"):
        optim.Adam().update([p], [p], [p])


def test_state_specs():
    w = og.parameter(og.f32, (2, 3), name="w")
    b = og.parameter(og.f32, (3,))
    assert optim.SGD().state_specs([w, b]) == []
    names = [s.name for s in optim.Momentum().state_specs([w, b])]
    assert names == ["w.velocity", "param1.velocity"]
    specs = optim.Adam().state_specs([w, b])
    assert [s.name for s in specs] == ["w.m", "param1.m", "w.v", "param1.v", "adam.step"]
    assert [str(s.type) for s in specs] == ["f32[2,3]", "f32[3]", "f32[2,3]", "f32[3]", "i64[]"]
    assert all(not a.any() for a in optim.Adam().initial_state([w, b]))
