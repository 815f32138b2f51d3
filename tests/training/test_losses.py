"""The stable log-softmax and the cross-entropy, values and gradients."""

import numpy as np
import pytest

import opgraph as og
from opgraph import optim
from opgraph.autodiff import backprop


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_log_softmax_is_stable_and_correct(axis):
    x = og.parameter(og.f64, (3, 4))
    fn = og.Function([optim.log_softmax(x, axis)], [x])
    values = np.random.default_rng(0).standard_normal((3, 4)) * 300  # exp would overflow
    (got,) = og.backend("INTERPRETER").compile(fn)(values)
    np.testing.assert_allclose(got, _log_softmax(values, axis), rtol=1e-12)
    assert np.isfinite(got).all()


def test_cross_entropy_value_and_gradient():
    logits = og.parameter(og.f64, (5, 3))
    labels = og.parameter(og.f64, (5, 3))
    loss = optim.softmax_cross_entropy(logits, labels)
    grad = backprop(og.Function([loss], [logits, labels]), wrt=[logits])
    rng = np.random.default_rng(1)
    z = rng.standard_normal((5, 3))
    y = np.eye(3)[rng.integers(0, 3, 5)]
    value, dz = og.backend("INTERPRETER").compile(grad)(z, y)
    np.testing.assert_allclose(value, -np.mean(np.sum(y * _log_softmax(z, 1), axis=1)))
    softmax = np.exp(_log_softmax(z, 1))
    np.testing.assert_allclose(dz, (softmax - y) / 5, atol=1e-12)


def test_cross_entropy_type_errors():
    a = og.parameter(og.f32, (2, 3))
    with pytest.raises(og.OpTypeError, match="softmax_cross_entropy: needs float"):
        optim.softmax_cross_entropy(a, og.parameter(og.f32, (2, 4)))
