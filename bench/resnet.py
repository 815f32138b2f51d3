"""W4: ResNet-18, ImageNet shape (batch 1 x 3x224x224, 1000 classes) and its CIFAR variant
(3x3 stride-1 stem, no max-pool, 10 classes, batch 32 x 3x32x32). Inference: batch norm with
fixed statistics."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

import opgraph as og
from bench.models import Case, _bias, _const
from bench.onnx_builder import OnnxGraph
from opgraph import ops

EPS = 1e-5
STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))


@dataclass
class Conv:
    weight: np.ndarray  # (O, C, k, k)
    stride: int
    pad: int
    bn: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # scale, bias, mean, var


class Weights:
    """Random ResNet-18 weights (He init, batch-norm statistics near identity)."""

    def __init__(self, cifar: bool, classes: int) -> None:
        self.rng = np.random.default_rng(7)
        self.cifar = cifar
        self.stem = self.conv(3, 64, 3 if cifar else 7, 1 if cifar else 2)
        self.blocks: list[tuple[Conv, Conv, Conv | None]] = []
        channels = 64
        for width, stride in STAGES:
            for i in range(2):
                s = stride if i == 0 else 1
                down = self.conv(channels, width, 1, s) if (s != 1 or channels != width) else None
                self.blocks.append(
                    (self.conv(channels, width, 3, s), self.conv(width, width, 3, 1), down)
                )
                channels = width
        self.fc = (self.rng.standard_normal((512, classes)) / math.sqrt(512)).astype(np.float32)
        self.fc_bias = (self.rng.standard_normal(classes) * 0.01).astype(np.float32)

    def conv(self, c: int, o: int, k: int, stride: int) -> Conv:
        w = self.rng.standard_normal((o, c, k, k)) * math.sqrt(2.0 / (c * k * k))
        bn = (
            1 + 0.1 * self.rng.standard_normal(o),
            0.1 * self.rng.standard_normal(o),
            0.1 * self.rng.standard_normal(o),
            1 + 0.1 * np.abs(self.rng.standard_normal(o)),
        )
        return Conv(w.astype(np.float32), stride, k // 2, tuple(p.astype(np.float32) for p in bn))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- opgraph
def _og_conv(x: og.Output, c: Conv, relu: bool) -> og.Output:
    y = ops.convolution(x, _const(c.weight), (c.stride,) * 2, None, (c.pad,) * 2, (c.pad,) * 2)
    y = ops.batch_norm_inference(y, *(_const(p) for p in c.bn), epsilon=EPS)
    return ops.relu(y) if relu else y


def _opgraph(w: Weights, batch: int, size: int) -> og.Function:
    x = og.parameter(og.f32, (batch, 3, size, size), "image")
    h = _og_conv(x, w.stem, True)
    if not w.cifar:
        h = ops.max_pool(h, (3, 3), (2, 2), (1, 1), (1, 1))
    for first, second, down in w.blocks:
        y = _og_conv(_og_conv(h, first, True), second, False)
        h = ops.relu(ops.add(y, _og_conv(h, down, False) if down else h))
    pooled = ops.reduce_mean(h, (2, 3))
    logits = ops.add(ops.dot(pooled, _const(w.fc)), _bias(w.fc_bias, (batch, w.fc.shape[1])))
    return og.Function([logits], [x], name="resnet18_cifar" if w.cifar else "resnet18")


# ------------------------------------------------------------------------------------- onnx
def _onnx(w: Weights, batch: int, size: int) -> OnnxGraph:
    g = OnnxGraph("resnet18")
    x = g.input("image", (batch, 3, size, size))

    def conv(v: str, c: Conv, relu: bool) -> str:
        k = c.weight.shape[2]
        y = g.op("Conv", v, g.const(c.weight), kernel_shape=[k, k], strides=[c.stride] * 2,
                 pads=[c.pad] * 4)  # fmt: skip
        y = g.op("BatchNormalization", y, *(g.const(p) for p in c.bn), epsilon=EPS)
        return g.op("Relu", y) if relu else y

    h = conv(x, w.stem, True)
    if not w.cifar:
        h = g.op("MaxPool", h, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for first, second, down in w.blocks:
        y = conv(conv(h, first, True), second, False)
        h = g.op("Relu", g.op("Add", y, conv(h, down, False) if down else h))
    pooled = g.op("Flatten", g.op("GlobalAveragePool", h), axis=1)
    logits = g.op("Add", g.op("MatMul", pooled, g.const(w.fc)), g.const(w.fc_bias))
    g.output(logits, (batch, w.fc.shape[1]))
    return g


def _torch(w: Weights) -> object:
    def conv(v: torch.Tensor, c: Conv, relu: bool) -> torch.Tensor:
        weight = torch.from_numpy(c.weight)
        y = F.conv2d(v, weight, stride=c.stride, padding=c.pad)
        scale, bias, mean, var = (torch.from_numpy(p) for p in c.bn)
        y = F.batch_norm(y, mean, var, scale, bias, False, 0.0, EPS)
        return F.relu(y) if relu else y

    fc, fc_bias = torch.from_numpy(w.fc.T.copy()), torch.from_numpy(w.fc_bias)

    def model(x: torch.Tensor) -> torch.Tensor:
        h = conv(x, w.stem, True)
        if not w.cifar:
            h = F.max_pool2d(h, 3, 2, 1)
        for first, second, down in w.blocks:
            y = conv(conv(h, first, True), second, False)
            h = F.relu(y + (conv(h, down, False) if down else h))
        return F.linear(h.mean((2, 3)), fc, fc_bias)

    return model


def _case(cifar: bool) -> Case:
    batch, size, classes = (32, 32, 10) if cifar else (1, 224, 1000)
    w = Weights(cifar, classes)
    data = np.random.default_rng(8).standard_normal((batch, 3, size, size)).astype(np.float32)
    return Case(
        "W4 ResNet-18 CIFAR batch 32" if cifar else "W4 ResNet-18 ImageNet batch 1",
        "w4",
        _opgraph(w, batch, size),
        _onnx(w, batch, size).model(),
        [data],
        _torch(w),  # type: ignore[arg-type]
        None,
        flops=0.0,
        tolerance=2e-3,
    )


def resnet18_imagenet() -> Case:
    return _case(cifar=False)


def resnet18_cifar() -> Case:
    return _case(cifar=True)
