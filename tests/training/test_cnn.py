"""A small CNN (convolution, max-pool, dense) trained for a few compiled steps learns."""

import numpy as np
import pytest

import opgraph as og
from opgraph import optim

pytest.importorskip("sklearn")

from opgraph_examples.digits import load_digits_split


def test_cnn_step_layout():
    model = optim.cnn(channels=4)
    step = optim.training_step(model.loss_function(8), len(model.weights), optim.Momentum())
    names = [p.node.name for p in step.parameters]
    assert names[:4] == ["conv_w", "conv_b", "dense_w", "dense_b"]
    assert names[4:] == [f"{n}.velocity" for n in names[:4]] + ["images", "labels"]
    assert [str(t) for t in step.flat_result_types[1:5]] == [
        "f32[4,1,3,3]",
        "f32[4]",
        "f32[64,10]",
        "f32[10]",
    ]


def test_cnn_loss_decreases_over_a_few_steps(backend):
    data = load_digits_split()
    model = optim.cnn(channels=4)
    batch, steps = 16, 40
    trainer = optim.Trainer(
        model.loss_function(batch),
        len(model.weights),
        optim.Adam(lr=2e-2),
        model.initial_values(seed=0),
        backend,
    )
    images = data.x_train.reshape(-1, 1, 8, 8)
    labels = np.eye(10, dtype=np.float32)[data.y_train]
    losses = [
        trainer.step(images[i * batch : (i + 1) * batch], labels[i * batch : (i + 1) * batch])
        for i in range(steps)
    ]
    assert np.isfinite(losses).all()
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses
    # The filters moved: the gradient reached through max-pool and convolution.
    initial = model.initial_values(seed=0)[0]
    assert not np.allclose(trainer.parameter_values()[0], initial)


def test_cnn_predict_runs_on_the_trainer_tensors():
    model = optim.cnn(channels=2)
    trainer = optim.Trainer(model.loss_function(4), 4, optim.SGD(), model.initial_values())
    backend = og.backend("INTERPRETER")
    exe = backend.compile(model.predict_function(3))
    images = backend.create_tensor(og.f32, (3, 1, 8, 8))
    logits = backend.create_tensor(og.f32, (3, 10))
    exe.call([logits], [*trainer.parameter_tensors, images])
    np.testing.assert_allclose(logits.read(), np.zeros((3, 10)))  # biases are 0, images 0
