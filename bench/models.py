"""The benchmark workloads, each built three times from the same weights: an opgraph Function
(opgraph builders), an ONNX model (``onnx.helper``, for onnxruntime and OpenVINO), and torch /
numpy callables."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import torch
import torch.nn.functional as F

import opgraph as og
from bench.onnx_builder import OnnxGraph
from opgraph import ops


@dataclass
class Case:
    """One benchmark case."""

    name: str
    workload: str
    function: og.Function
    onnx: onnx.ModelProto
    inputs: list[np.ndarray]
    torch_fn: Callable[..., Any]
    numpy_fn: Callable[..., Any] | None
    flops: float = 0.0
    tolerance: float = 1e-4
    notes: list[str] = field(default_factory=list)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _const(value: np.ndarray) -> og.Output:
    return og.constant(np.ascontiguousarray(value, np.float32))


def _bias(b: np.ndarray, shape: tuple[int, ...]) -> og.Output:
    return ops.broadcast(_const(b), shape, tuple(range(len(shape) - 1)))


# ------------------------------------------------------------------------------------ W1
def w1(n: int) -> Case:
    """``(a + b) * c`` on ``n x n`` f32."""
    shape = (n, n)
    a, b, c = (og.parameter(og.f32, shape, name) for name in "abc")
    fn = og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c], name=f"w1_{n}")
    g = OnnxGraph("w1")
    ia, ib, ic = (g.input(name, shape) for name in "abc")
    g.output(g.op("Mul", g.op("Add", ia, ib), ic), shape)
    inputs = [_rng(i).random(shape, np.float32) for i in range(3)]
    return Case(
        f"W1 (a+b)*c {n}x{n}",
        "w1",
        fn,
        g.model(),
        inputs,
        lambda x, y, z: (x + y) * z,
        lambda x, y, z: (x + y) * z,
        flops=2.0 * n * n,
    )


# ------------------------------------------------------------------------------------ W2
def w2(size: int = 1 << 22) -> Case:
    """``tanh(x*0.5 + 1) * sigmoid(x) - x/3`` on ``size`` f32."""
    x = og.parameter(og.f32, (size,), "x")
    y = ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x / 3.0
    fn = og.Function([y], [x], name="w2")
    g = OnnxGraph("w2")
    ix = g.input("x", (size,))
    half, one, three = (g.const(np.array(v, np.float32)) for v in (0.5, 1.0, 3.0))
    t = g.op("Tanh", g.op("Add", g.op("Mul", ix, half), one))
    left = g.op("Mul", t, g.op("Sigmoid", ix))
    g.output(g.op("Sub", left, g.op("Div", ix, three)), (size,))
    data = _rng(1).uniform(-4, 4, size).astype(np.float32)

    def numpy_fn(v: np.ndarray) -> np.ndarray:
        return np.tanh(v * 0.5 + 1) * (1 / (1 + np.exp(-v))) - v / 3

    return Case(
        "W2 tanh(x*0.5+1)*sigmoid(x)-x/3 4M",
        "w2",
        fn,
        g.model(),
        [data],
        lambda v: torch.tanh(v * 0.5 + 1) * torch.sigmoid(v) - v / 3,
        numpy_fn,
        flops=10.0 * size,
    )


# ------------------------------------------------------------------------------------ W3
def w3(batch: int) -> Case:
    """MLP 784-512-512-10, ReLU, softmax."""
    rng = _rng(3)
    sizes = [784, 512, 512, 10]
    weights = [
        (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32)
        for i, o in itertools.pairwise(sizes)
    ]
    biases = [(rng.standard_normal(o) * 0.1).astype(np.float32) for o in sizes[1:]]
    x = og.parameter(og.f32, (batch, 784), "x")
    h = x
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        h = ops.add(ops.dot(h, _const(w)), _bias(b, (batch, w.shape[1])))
        h = ops.relu(h) if i < 2 else ops.softmax(h, -1)
    fn = og.Function([h], [x], name=f"w3_{batch}")
    g = OnnxGraph("w3")
    t = g.input("x", (batch, 784))
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        t = g.op("Add", g.op("MatMul", t, g.const(w)), g.const(b))
        t = g.op("Relu", t) if i < 2 else g.op("Softmax", t, axis=-1)
    g.output(t, (batch, 10))
    tw = [torch.from_numpy(w.T.copy()) for w in weights]
    tb = [torch.from_numpy(b) for b in biases]

    def torch_fn(v: torch.Tensor) -> torch.Tensor:
        v = F.relu(F.linear(v, tw[0], tb[0]))
        v = F.relu(F.linear(v, tw[1], tb[1]))
        return torch.softmax(F.linear(v, tw[2], tb[2]), -1)

    def numpy_fn(v: np.ndarray) -> np.ndarray:
        v = np.maximum(v @ weights[0] + biases[0], 0)
        v = np.maximum(v @ weights[1] + biases[1], 0)
        z = v @ weights[2] + biases[2]
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    data = _rng(4).random((batch, 784), np.float32)
    flops = 2.0 * batch * sum(i * o for i, o in itertools.pairwise(sizes))
    return Case(f"W3 MLP batch {batch}", "w3", fn, g.model(), [data], torch_fn, numpy_fn, flops)
