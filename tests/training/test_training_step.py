"""The step Function's layout, and the Trainer feeding it back on two sets of tensors."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops, optim


def _quadratic(batch=4):
    """loss(w, b; x, y) = mean((x·w + b − y)²) / 2, in f64."""
    w = og.parameter(og.f64, (3,), name="w")
    b = og.parameter(og.f64, (), name="b")
    x = og.parameter(og.f64, (batch, 3), name="x")
    y = og.parameter(og.f64, (batch,), name="y")
    pred = ops.add(ops.dot(x, w), ops.broadcast(b, (batch,), (0,)))
    err = ops.subtract(pred, y)
    loss = ops.reduce_sum(ops.multiply(err, err), (0,)) * (0.5 / batch)
    return og.Function([loss], [w, b, x, y], name="quadratic")


def _numpy_grads(w, b, x, y):
    err = x @ w + b - y
    return 0.5 * np.mean(err**2), x.T @ err / len(y), np.mean(err)


def _data(rng, batch=4):
    return rng.standard_normal((batch, 3)), rng.standard_normal(batch)


def test_step_layout_parameters_then_state_then_batch():
    loss_fn = _quadratic()
    step = optim.training_step(loss_fn, 2, optim.Adam())
    names = [p.node.name for p in step.parameters]
    assert names == ["w", "b", "w.m", "b.m", "w.v", "b.v", "adam.step", "x", "y"]
    types = [str(t) for t in step.flat_result_types]
    assert types == ["f64[]", "f64[3]", "f64[]", "f64[3]", "f64[]", "f64[3]", "f64[]", "i64[]"]
    assert step.name == "quadratic_step"
    assert step.parameters[:2] == loss_fn.parameters[:2]


def test_step_with_learning_rate_input_and_chosen_parameters():
    loss_fn = _quadratic()
    w, b, x, y = loss_fn.parameters
    step = optim.training_step(loss_fn, [b], optim.SGD(), learning_rate_input=True, name="s")
    names = [p.node.name for p in step.parameters]
    assert names == ["b", "w", "x", "y", optim.LEARNING_RATE]
    assert [str(t) for t in step.flat_result_types] == ["f64[]", "f64[]"]
    rng = np.random.default_rng(0)
    wv, bv = rng.standard_normal(3), np.float64(0.5)
    xv, yv = _data(rng)
    loss, new_b = og.backend("INTERPRETER").compile(step)(bv, wv, xv, yv, np.float64(0.1))
    want_loss, _, db = _numpy_grads(wv, bv, xv, yv)
    np.testing.assert_allclose(loss, want_loss)
    np.testing.assert_allclose(new_b, bv - 0.1 * db)


@pytest.mark.parametrize(
    ("optimizer", "rule"),
    [
        (optim.SGD(lr=0.1), "sgd"),
        (optim.Momentum(lr=0.05, beta=0.9), "momentum"),
        (optim.Adam(lr=0.01, beta1=0.8, beta2=0.95, eps=1e-7), "adam"),
    ],
)
def test_trainer_follows_the_numpy_rule_over_several_steps(backend, optimizer, rule):
    rng = np.random.default_rng(1)
    w0, b0 = rng.standard_normal(3), np.float64(0.3)
    trainer = optim.Trainer(_quadratic(), 2, optimizer, [w0, b0], backend)
    params = [w0, b0]
    state = [np.zeros(3), np.float64(0), np.zeros(3), np.float64(0)]
    for t in range(1, 6):
        x, y = _data(rng)
        loss, *grads = _numpy_grads(*params, x, y)
        np.testing.assert_allclose(trainer.step(x, y), loss, rtol=1e-10)
        params = _numpy_update(rule, optimizer, params, grads, state, t)
        for got, want in zip(trainer.parameter_values(), params, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9)
    assert trainer.steps == 5
    if rule == "adam":
        assert trainer.state_values()[-1] == 5


def _numpy_update(rule, opt, params, grads, state, t):
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        if rule == "sgd":
            out.append(p - opt.lr * g)
        elif rule == "momentum":
            state[i] = opt.beta * state[i] + g
            out.append(p - opt.lr * state[i])
        else:
            state[i] = opt.beta1 * state[i] + (1 - opt.beta1) * g
            state[2 + i] = opt.beta2 * state[2 + i] + (1 - opt.beta2) * g * g
            m_hat = state[i] / (1 - opt.beta1**t)
            v_hat = state[2 + i] / (1 - opt.beta2**t)
            out.append(p - opt.lr * m_hat / (np.sqrt(v_hat) + opt.eps))
    return out


def test_trainer_alternates_two_tensor_sets():
    trainer = optim.Trainer(_quadratic(), 2, optim.SGD(), [np.zeros(3), np.float64(0)])
    rng = np.random.default_rng(2)
    first = trainer.parameter_tensors
    trainer.step(*_data(rng))
    second = trainer.parameter_tensors
    trainer.step(*_data(rng))
    assert all(a is not b for a, b in zip(first, second, strict=True))
    assert all(a is c for a, c in zip(first, trainer.parameter_tensors, strict=True))


def test_trainer_learning_rate_schedule():
    trainer = optim.Trainer(
        _quadratic(), 2, optim.SGD(lr=123.0), [np.ones(3), np.float64(0)], learning_rate_input=True
    )
    x, y = _data(np.random.default_rng(3))
    _, dw, db = _numpy_grads(np.ones(3), 0.0, x, y)
    trainer.step(x, y, learning_rate=0.0)
    np.testing.assert_allclose(trainer.parameter_values()[0], np.ones(3))
    trainer.step(x, y, learning_rate=0.5)
    np.testing.assert_allclose(trainer.parameter_values()[0], np.ones(3) - 0.5 * dw)
    with pytest.raises(og.GraphError, match="takes a learning_rate"):
        trainer.step(x, y)


def test_trainer_and_step_errors():
    loss_fn = _quadratic()
    init = [np.zeros(3), np.float64(0)]
    with pytest.raises(og.GraphError, match="expected 2 batch array"):
        optim.Trainer(loss_fn, 2, optim.SGD(), init).step(np.zeros((4, 3)))
    with pytest.raises(og.GraphError, match="compiled without learning_rate_input"):
        optim.Trainer(loss_fn, 2, optim.SGD(), init).step(
            np.zeros((4, 3)), np.zeros(4), learning_rate=0.1
        )
    with pytest.raises(og.GraphError, match="1 initial value"):
        optim.Trainer(loss_fn, 2, optim.SGD(), init[:1])
    with pytest.raises(og.GraphError, match="cannot train the first 5"):
        optim.training_step(loss_fn, 5, optim.SGD())
    with pytest.raises(og.GraphError, match="params\\[0\\] is not a parameter"):
        optim.training_step(loss_fn, [og.parameter(og.f64, (3,))], optim.SGD())
    two = og.Function([loss_fn.results[0], loss_fn.results[0]], loss_fn.parameters)
    with pytest.raises(og.NotDifferentiableError, match="exactly one result"):
        optim.training_step(two, 2, optim.SGD())
    vector = og.Function([loss_fn.parameters[0]], [loss_fn.parameters[0]])
    with pytest.raises(og.NotDifferentiableError, match="needs a seed"):
        optim.training_step(vector, 1, optim.SGD())


def test_cosine_schedule():
    schedule = optim.cosine_schedule(0.1, 10, final_lr=0.01)
    assert schedule(0) == pytest.approx(0.1)
    assert schedule(5) == pytest.approx(0.055)
    assert schedule(10) == schedule(50) == pytest.approx(0.01)
    assert optim.constant_schedule(0.3)(7) == 0.3
    with pytest.raises(ValueError, match="total_steps must be > 0"):
        optim.cosine_schedule(0.1, 0)
