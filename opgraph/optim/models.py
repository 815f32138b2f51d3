"""Small classifiers for the training demos: parameter layout, forward pass, initial values.

A :class:`Model` builds fresh Functions for any batch size: the loss Function (parameters,
then ``images`` and one-hot ``labels``) for :func:`opgraph.optim.training_step`, and a predict
Function (parameters, then ``images``) returning logits, which can run on a
:class:`~opgraph.optim.Trainer`'s parameter tensors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.function import Function
from opgraph.core.literals import parameter
from opgraph.core.node import Output
from opgraph.core.shape import Shape
from opgraph.ops.convolution import convolution
from opgraph.ops.elementwise import add, relu
from opgraph.ops.linalg import dot
from opgraph.ops.movement import broadcast, reshape
from opgraph.ops.pooling import max_pool
from opgraph.optim.losses import softmax_cross_entropy

Forward = Callable[[Sequence[Output], Output], Output]
"""``forward(params, images) -> logits``."""


@dataclass(frozen=True, slots=True)
class Weight:
    """One trainable tensor: He-normal initialised from ``fan_in``, or zeros when it is 0."""

    name: str
    shape: Shape
    fan_in: int = 0

    def initial(self, rng: np.random.Generator) -> np.ndarray:
        if not self.fan_in:
            return np.zeros(self.shape, np.float32)
        scale = np.sqrt(2.0 / self.fan_in)
        return (rng.standard_normal(self.shape) * scale).astype(np.float32)


@dataclass(frozen=True)
class Model:
    """A classifier of ``input_shape`` examples into ``num_classes`` classes, in f32."""

    name: str
    weights: tuple[Weight, ...]
    input_shape: Shape
    num_classes: int
    forward: Forward

    def _parameters(self) -> list[Output]:
        return [parameter(et.f32, w.shape, name=w.name) for w in self.weights]

    def loss_function(self, batch: int) -> Function:
        """``(params..., images, labels) -> mean softmax cross-entropy`` for ``batch`` examples."""
        params = self._parameters()
        images = parameter(et.f32, (batch, *self.input_shape), name="images")
        labels = parameter(et.f32, (batch, self.num_classes), name="labels")
        loss = softmax_cross_entropy(self.forward(params, images), labels)
        return Function([loss], [*params, images, labels], name=f"{self.name}_loss")

    def predict_function(self, batch: int) -> Function:
        """``(params..., images) -> logits`` for ``batch`` examples."""
        params = self._parameters()
        images = parameter(et.f32, (batch, *self.input_shape), name="images")
        return Function([self.forward(params, images)], [*params, images], name=self.name)

    def initial_values(self, seed: int = 0) -> list[np.ndarray]:
        """One array per weight, reproducible from ``seed``."""
        rng = np.random.default_rng(seed)
        return [w.initial(rng) for w in self.weights]


def dense(x: Output, w: Output, b: Output) -> Output:
    """``x · w + b`` for ``x`` of shape ``(batch, in)``."""
    y = dot(x, w)
    return add(y, broadcast(b, y.shape, (0,)))


def mlp(sizes: Sequence[int] = (64, 64, 10)) -> Model:
    """A ReLU multilayer perceptron ``sizes[0] → … → sizes[-1]`` (logits at the end).

    Args:
        sizes: the input width, the hidden widths, then the number of classes.
    """
    if len(sizes) < 2:
        raise ValueError(f"mlp: needs at least an input and an output size, got {list(sizes)}")
    weights: list[Weight] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        weights += [Weight(f"w{i}", (fan_in, fan_out), fan_in), Weight(f"b{i}", (fan_out,))]

    def forward(params: Sequence[Output], images: Output) -> Output:
        h = images
        layers = len(params) // 2
        for i in range(layers):
            h = dense(h, params[2 * i], params[2 * i + 1])
            h = relu(h) if i + 1 < layers else h
        return h

    name = "mlp_" + "_".join(str(s) for s in sizes)
    return Model(name, tuple(weights), (sizes[0],), sizes[-1], forward)


def cnn(channels: int = 8, image: tuple[int, int] = (8, 8), num_classes: int = 10) -> Model:
    """A small convolutional classifier for one-channel images.

    ``conv 3×3 (same padding) + bias → ReLU → max-pool 2×2 → dense → logits``.

    Args:
        channels: the number of filters.
        image: the image's height and width (even numbers).
        num_classes: the number of classes.
    """
    height, width = image
    if height % 2 or width % 2:
        raise ValueError(f"cnn: the image's sides must be even, got {image}")
    flat = channels * (height // 2) * (width // 2)
    weights = (
        Weight("conv_w", (channels, 1, 3, 3), 9),
        Weight("conv_b", (channels,)),
        Weight("dense_w", (flat, num_classes), flat),
        Weight("dense_b", (num_classes,)),
    )

    def forward(params: Sequence[Output], images: Output) -> Output:
        conv_w, conv_b, dense_w, dense_b = params
        y = convolution(images, conv_w, padding_below=(1, 1), padding_above=(1, 1))
        y = relu(add(y, broadcast(conv_b, y.shape, (0, 2, 3))))
        pooled = max_pool(y, (2, 2), strides=(2, 2))
        return dense(reshape(pooled, (images.shape[0], flat)), dense_w, dense_b)

    return Model(f"cnn_{channels}", weights, (1, height, width), num_classes, forward)
