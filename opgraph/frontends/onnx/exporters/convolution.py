"""Convolution (Conv), ConvolutionBackpropData (ConvTranspose) and the pools (AveragePool,
MaxPool, MaxPool with its Indices output). Nodes hold explicit padding, so ``auto_pad`` is
always NOTSET in the export."""

from __future__ import annotations

from typing import Any

from opgraph import ops
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, exports, unsupported


def _spatial(node: Node) -> int:
    return node.inputs[0].rank - 2


def _ones(values: Any, count: int) -> list[int]:
    return [int(v) for v in values] if values is not None else [1] * count


def _pads(op: ops.ConvolutionBase | ops.Pool, node: Node) -> list[int]:
    count = _spatial(node)
    below = _zeros(op.padding_below, count)
    above = _zeros(op.padding_above, count)
    if any(p < 0 for p in below + above):
        raise unsupported(node, "ONNX pads cannot be negative (cropping)")
    return below + above


def _zeros(values: Any, count: int) -> list[int]:
    return [int(v) for v in values] if values is not None else [0] * count


@exports(ops.Convolution)
def _conv(ctx: ExportContext, op: ops.Convolution, node: Node, inputs: list[str]) -> list[str]:
    count = _spatial(node)
    if any(d != 1 for d in _ones(op.data_dilations, count)):
        raise unsupported(node, "ONNX Conv has no data dilation")
    return [
        ctx.one(
            "Conv",
            inputs,
            kernel_shape=list(node.inputs[1].shape[2:]),
            strides=_ones(op.strides, count),
            dilations=_ones(op.dilations, count),
            pads=_pads(op, node),
            group=int(op.groups),
        )
    ]


@exports(ops.ConvolutionBackpropData)
def _conv_transpose(
    ctx: ExportContext, op: ops.ConvolutionBackpropData, node: Node, inputs: list[str]
) -> list[str]:
    count = _spatial(node)
    return [
        ctx.one(
            "ConvTranspose",
            inputs,
            kernel_shape=list(node.inputs[1].shape[2:]),
            strides=_ones(op.strides, count),
            dilations=_ones(op.dilations, count),
            pads=_pads(op, node),
            output_padding=_zeros(op.output_padding, count),
            group=int(op.groups),
        )
    ]


def _window(op: ops.Pool, node: Node) -> dict[str, Any]:
    count = _spatial(node)
    return {
        "kernel_shape": [int(k) for k in op.window_shape],
        "strides": _ones(op.strides, count),
        "pads": _pads(op, node),
        "ceil_mode": int(op.ceil_mode),
    }


@exports(ops.AvgPool)
def _avg_pool(ctx: ExportContext, op: ops.AvgPool, node: Node, inputs: list[str]) -> list[str]:
    include = int(op.include_padding)
    return [ctx.one("AveragePool", inputs, count_include_pad=include, **_window(op, node))]


@exports(ops.MaxPool)
def _max_pool(ctx: ExportContext, op: ops.MaxPool, node: Node, inputs: list[str]) -> list[str]:
    dilations = _ones(op.dilations, _spatial(node))
    return [ctx.one("MaxPool", inputs, dilations=dilations, **_window(op, node))]


@exports(ops.MaxPoolWithIndices)
def _max_pool_indices(
    ctx: ExportContext, op: ops.MaxPoolWithIndices, node: Node, inputs: list[str]
) -> list[str]:
    dilations = _ones(op.dilations, _spatial(node))
    return ctx.emit("MaxPool", inputs, 2, dilations=dilations, **_window(op, node))
