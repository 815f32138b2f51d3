"""Softmax, LogSoftmax, batch normalization (inference, and training as ONNX's training mode
with momentum 0, whose running statistics are then the batch's), LRN, the normalizations with
ONNX counterparts, and the activations ONNX has as ops (the others decompose first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core.errors import ConversionError
from opgraph.core.node import Node
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.exporters.base import ExportContext, Exporter, exports


@exports(ops.Softmax, since=13)
def _softmax(ctx: ExportContext, op: ops.Softmax, node: Node, inputs: list[str]) -> list[str]:
    return [ctx.one("Softmax", inputs, axis=op.axis)]


@exports(ops.LogSoftmax, since=13)
def _log_softmax(
    ctx: ExportContext, op: ops.LogSoftmax, node: Node, inputs: list[str]
) -> list[str]:
    return [ctx.one("LogSoftmax", inputs, axis=op.axis)]


@exports(ops.BatchNormInference)
def _batch_norm(
    ctx: ExportContext, op: ops.BatchNormInference, node: Node, inputs: list[str]
) -> list[str]:
    return [ctx.one("BatchNormalization", inputs, epsilon=float(op.epsilon))]


@exports(ops.BatchNormTraining, since=14)
def _batch_norm_training(
    ctx: ExportContext, op: ops.BatchNormTraining, node: Node, inputs: list[str]
) -> list[str]:
    channels = node.inputs[1].shape
    dtype = node.inputs[1].element_type.dtype
    mean = ctx.constant(np.zeros(channels, dtype), "mean")
    var = ctx.constant(np.ones(channels, dtype), "var")
    return ctx.emit(
        "BatchNormalization",
        [*inputs, mean, var],
        3,
        epsilon=float(op.epsilon),
        momentum=0.0,
        training_mode=1,
    )


@exports(ops.LRN)
def _lrn(ctx: ExportContext, op: ops.LRN, node: Node, inputs: list[str]) -> list[str]:
    return [
        ctx.one(
            "LRN",
            inputs,
            alpha=float(op.alpha),
            beta=float(op.beta),
            bias=float(op.bias),
            size=int(op.size),
        )
    ]


@exports(ops.LayerNorm, since=17)
def _layer_norm(ctx: ExportContext, op: ops.LayerNorm, node: Node, inputs: list[str]) -> list[str]:
    arguments = list(inputs)
    if len(arguments) == 1:  # ONNX needs a scale
        shape = node.inputs[0].shape[op.axis :]
        arguments.append(ctx.constant(np.ones(shape, node.inputs[0].element_type.dtype), "one"))
    return [ctx.one("LayerNormalization", arguments, axis=op.axis, epsilon=float(op.epsilon))]


@exports(ops.InstanceNorm)
def _instance_norm(
    ctx: ExportContext, op: ops.InstanceNorm, node: Node, inputs: list[str]
) -> list[str]:
    return [ctx.one("InstanceNormalization", inputs, epsilon=float(op.epsilon))]


@exports(ops.GroupNorm, since=21)
def _group_norm(ctx: ExportContext, op: ops.GroupNorm, node: Node, inputs: list[str]) -> list[str]:
    return [
        ctx.one("GroupNormalization", inputs, num_groups=op.num_groups, epsilon=float(op.epsilon))
    ]


def _activation(op_type: str, **attributes: Callable[[Any], Any]) -> Exporter:
    def export(ctx: ExportContext, op: ops.Activation, node: Node, inputs: list[str]) -> list[str]:
        values = {name: read(op) for name, read in attributes.items()}
        return [ctx.one(op_type, inputs, **values)]

    return export


exports(ops.Elu)(_activation("Elu", alpha=lambda op: float(op.alpha)))
exports(ops.Selu)(
    _activation("Selu", alpha=lambda op: float(op.alpha), gamma=lambda op: float(op.gamma))
)
exports(ops.LeakyRelu)(_activation("LeakyRelu", alpha=lambda op: float(op.alpha)))
exports(ops.HardSigmoid)(
    _activation("HardSigmoid", alpha=lambda op: float(op.alpha), beta=lambda op: float(op.beta))
)
exports(ops.HardSwish, since=14)(_activation("HardSwish"))
exports(ops.Softplus)(_activation("Softplus"))
exports(ops.Softsign)(_activation("Softsign"))
exports(ops.Mish, since=18)(_activation("Mish"))
exports(ops.Gelu, since=20)(_activation("Gelu", approximate=lambda op: op.approximate.value))


@exports(ops.PRelu)
def _prelu(ctx: ExportContext, op: ops.PRelu, node: Node, inputs: list[str]) -> list[str]:
    x, slope = node.inputs
    if op.axis is None:
        return [ctx.one("PRelu", inputs)]
    shape = [1] * x.rank
    shape[op.axis] = static_dim(slope.shape[0], "an exported PRelu's slope", ConversionError)
    reshaped = ctx.one("Reshape", [inputs[1], ctx.ints(shape, "shape")])
    return [ctx.one("PRelu", [inputs[0], reshaped])]


@exports(ops.Clamp)
def _clamp(ctx: ExportContext, op: ops.Clamp, node: Node, inputs: list[str]) -> list[str]:
    """Clip with the bounds rounded the way Clamp rounds them for the element type."""
    element_type = node.inputs[0].element_type
    bounds = [
        "" if value is None else ctx.constant(np.asarray(value, element_type.dtype), "bound")
        for value in op.typed_bounds(element_type)
    ]
    while bounds and not bounds[-1]:
        bounds.pop()
    return [ctx.one("Clip", [inputs[0], *bounds])]
