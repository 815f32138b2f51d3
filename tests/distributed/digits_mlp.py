"""The digits MLP in f64 for the distributed tests (shared by the tests and the MPI worker).

f64 keeps the difference between data-parallel and single-process training at rounding level,
so the comparison can be tight.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

import opgraph as og
from opgraph.ops import relu
from opgraph.optim import Optimizer, Trainer, dense, softmax_cross_entropy

SIZES = (64, 32, 10)


def loss_function(batch: int, sizes: Sequence[int] = SIZES) -> og.Function:
    """``(w0, b0, w1, b1, …, images, labels) -> mean cross-entropy`` in f64."""
    params: list[og.Output] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        params += [
            og.parameter(og.f64, (fan_in, fan_out), name=f"w{i}"),
            og.parameter(og.f64, (fan_out,), name=f"b{i}"),
        ]
    images = og.parameter(og.f64, (batch, sizes[0]), name="images")
    labels = og.parameter(og.f64, (batch, sizes[-1]), name="labels")
    h = images
    layers = len(params) // 2
    for i in range(layers):
        h = dense(h, params[2 * i], params[2 * i + 1])
        h = relu(h) if i + 1 < layers else h
    loss = softmax_cross_entropy(h, labels)
    return og.Function([loss], [*params, images, labels], name="digits_mlp_loss")


def initial_values(sizes: Sequence[int] = SIZES, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    values: list[np.ndarray] = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        values.append(rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in))
        values.append(rng.uniform(-0.1, 0.1, fan_out))
    return values


def digits(n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` digits: f64 images in [0, 1] and f64 one-hot labels."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.data / 16.0).astype(np.float64)[:n]
    y = np.eye(10, dtype=np.float64)[data.target][:n]
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


def train(
    trainer: Trainer, batches: Sequence[Sequence[np.ndarray]]
) -> tuple[list[float], list[np.ndarray]]:
    """Run one step per batch; the losses and the final parameters."""
    losses = [trainer.step(*batch) for batch in batches]
    return losses, trainer.parameter_values()


def single_process(
    optimizer: Optimizer,
    batches: Sequence[Sequence[np.ndarray]],
    seed: int = 0,
    backend: str = "INTERPRETER",
) -> tuple[list[float], list[np.ndarray]]:
    """Plain (not distributed) training on ``batches``, from :func:`initial_values`."""
    batch = len(batches[0][0])
    trainer = Trainer(
        loss_function(batch), 2 * (len(SIZES) - 1), optimizer, initial_values(seed=seed), backend
    )
    return train(trainer, batches)
