"""The demo models: the seed example and a small MLP, with random inputs
(``opgraph demo``, ``opgraph viz seed|mlp``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opgraph import ops
from opgraph.builders.broadcasting import broadcast_to
from opgraph.core import element_type as et
from opgraph.core.function import Function
from opgraph.core.literals import constant, parameter
from opgraph.core.node import Output
from opgraph.core.shape import static_dim


@dataclass(frozen=True)
class DemoModel:
    name: str
    function: Function
    arguments: list[np.ndarray]


def seed_example() -> DemoModel:
    """``f(a, b, c) = (a + b) * c`` on 32×32 f32."""
    a, b, c = (parameter(et.f32, (32, 32), name=n) for n in "abc")
    fn = Function([ops.multiply(ops.add(a, b), c)], [a, b, c], name="seed")
    rng = np.random.default_rng(0)
    return DemoModel("(a+b)*c 32x32", fn, [rng.random((32, 32), np.float32) for _ in range(3)])


def _dense(x: Output, rng: np.random.Generator, width: int) -> Output:
    fan_in = static_dim(x.shape[-1], "a dense layer's random weights")
    scale = np.sqrt(2.0 / fan_in)
    w = constant((rng.standard_normal((fan_in, width)) * scale).astype(np.float32))
    b = constant((rng.standard_normal(width) * 0.1).astype(np.float32))
    y = ops.dot(x, w)
    return ops.add(y, broadcast_to(b, y.shape))


def _softmax_rows(x: Output) -> Output:
    shifted = ops.subtract(x, ops.broadcast(ops.reduce_max(x, (1,)), x.shape, (1,)))
    e = ops.exp(shifted)
    return ops.divide(e, ops.broadcast(ops.reduce_sum(e, (1,)), x.shape, (1,)))


def mlp(batch: int = 16) -> DemoModel:
    """A 784-128-64-10 MLP with ReLU and softmax, random weights."""
    rng = np.random.default_rng(1)
    x = parameter(et.f32, (batch, 784), name="images")
    h = ops.relu(_dense(x, rng, 128))
    h = ops.relu(_dense(h, rng, 64))
    fn = Function([_softmax_rows(_dense(h, rng, 10))], [x], name="mlp")
    return DemoModel(f"MLP 784-128-64-10 b{batch}", fn, [rng.random((batch, 784), np.float32)])


def models() -> list[DemoModel]:
    return [seed_example(), mlp()]
