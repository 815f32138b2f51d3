"""Reference kernels for nn ops. Float16/bfloat16 compute in f32."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from opgraph.backends.interpreter.kernels.convolution import accumulator
from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.ops.nn import LRN, BatchNormInference, BatchNormTraining, LogSoftmax, Softmax

Array = np.ndarray[Any, Any]


def _shifted(x: Array, axis: int) -> Array:
    """``x - max(x)`` along ``axis``, in the accumulation type (the stable form)."""
    wide = x.astype(accumulator(x.dtype))
    return wide - np.max(wide, axis=axis, keepdims=True)


@KERNELS.register(Softmax)
def _softmax(op: Softmax, x: Array) -> Array:
    if x.size == 0:
        return x.copy()
    e = np.exp(_shifted(x, op.axis))
    return (e / np.sum(e, axis=op.axis, keepdims=True)).astype(x.dtype)


@KERNELS.register(LogSoftmax)
def _log_softmax(op: LogSoftmax, x: Array) -> Array:
    if x.size == 0:
        return x.copy()
    s = _shifted(x, op.axis)
    return (s - np.log(np.sum(np.exp(s), axis=op.axis, keepdims=True))).astype(x.dtype)


def _channel_view(value: Array, rank: int) -> Array:
    """A ``(C,)`` array shaped ``(1, C, 1, ...)`` to broadcast against rank-``rank`` data."""
    return value.reshape((1, -1) + (1,) * (rank - 2))


def _normalize(x: Array, scale: Array, bias: Array, mean: Array, var: Array, eps: float) -> Array:
    rank = x.ndim
    factor = _channel_view(scale / np.sqrt(var + eps), rank)
    return (x - _channel_view(mean, rank)) * factor + _channel_view(bias, rank)


@KERNELS.register(BatchNormInference)
def _batch_norm_inference(op: BatchNormInference, x: Array, *params: Array) -> Array:
    wide = accumulator(x.dtype)
    scale, bias, mean, var = (p.astype(wide) for p in params)
    return _normalize(x.astype(wide), scale, bias, mean, var, op.epsilon).astype(x.dtype)


@KERNELS.register(BatchNormTraining)
def _batch_norm_training(
    op: BatchNormTraining, x: Array, scale: Array, bias: Array
) -> tuple[Array, Array, Array]:
    wide = accumulator(x.dtype)
    data = x.astype(wide)
    axes = (0, *range(2, x.ndim))
    mean = np.mean(data, axis=axes)
    var = np.mean(np.square(data - _channel_view(mean, x.ndim)), axis=axes)
    y = _normalize(data, scale.astype(wide), bias.astype(wide), mean, var, op.epsilon)
    return y.astype(x.dtype), mean.astype(x.dtype), var.astype(x.dtype)


@KERNELS.register(LRN)
def _lrn(op: LRN, x: Array) -> Array:
    wide = x.astype(accumulator(x.dtype))
    below, above = op.window()
    padding = [(0, 0)] * x.ndim
    padding[1] = (below, above)
    squares = np.pad(np.square(wide), padding)
    sums = sliding_window_view(squares, op.size, axis=1).sum(axis=-1)
    return (wide / (op.bias + op.alpha / op.size * sums) ** op.beta).astype(x.dtype)
