"""Oracle entries for nn ops: per-row and per-channel loops in f64 with ``math.fsum``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops.nn import LRN, BatchNormInference, BatchNormTraining, LogSoftmax, Softmax
from opgraph.testing.oracle.registry import ORACLE, narrow, wide


def _rows(x: np.ndarray, axis: int) -> tuple[np.ndarray, Any]:
    """``x`` (f64) with ``axis`` moved last and flattened to rows, and a function undoing it."""
    moved = np.moveaxis(wide(x), axis, -1)
    rows = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, 0)

    def back(result: np.ndarray) -> np.ndarray:
        return np.moveaxis(result.reshape(moved.shape), -1, axis)

    return rows, back


def _log_sum_exp(row: list[float]) -> tuple[float, float]:
    """(max, log Σ exp(v - max)) of one row."""
    top = max(row)
    return top, math.log(math.fsum(math.exp(v - top) for v in row))


@ORACLE.register(Softmax)
def _softmax(op: Softmax, x: np.ndarray, out: Any) -> np.ndarray:
    rows, back = _rows(x, op.axis)
    result = np.empty(rows.shape)
    for i, row in enumerate(rows.tolist()):
        top, log_total = _log_sum_exp(row)
        result[i] = [math.exp(v - top - log_total) for v in row]
    return narrow(back(result), out)


@ORACLE.register(LogSoftmax)
def _log_softmax(op: LogSoftmax, x: np.ndarray, out: Any) -> np.ndarray:
    rows, back = _rows(x, op.axis)
    result = np.empty(rows.shape)
    for i, row in enumerate(rows.tolist()):
        top, log_total = _log_sum_exp(row)
        result[i] = [v - top - log_total for v in row]
    return narrow(back(result), out)


def _channel(x: np.ndarray, c: int) -> np.ndarray:
    return wide(x)[:, c]


@ORACLE.register(BatchNormInference)
def _batch_norm_inference(
    op: BatchNormInference, x: np.ndarray, *params: np.ndarray, out: Any
) -> np.ndarray:
    scale, bias, mean, var = (wide(p) for p in params)
    result = np.empty(x.shape)
    for c in range(x.shape[1]):
        result[:, c] = (_channel(x, c) - mean[c]) / math.sqrt(var[c] + op.epsilon) * scale[
            c
        ] + bias[c]
    return narrow(result, out)


@ORACLE.register(BatchNormTraining)
def _batch_norm_training(
    op: BatchNormTraining, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, out: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    channels = x.shape[1]
    result = np.empty(x.shape)
    means, variances = np.empty(channels), np.empty(channels)
    for c in range(channels):
        values = _channel(x, c)
        flat = values.ravel().tolist()
        count = len(flat)
        mean = math.fsum(flat) / count if count else math.nan
        variance = math.fsum((v - mean) ** 2 for v in flat) / count if count else math.nan
        means[c], variances[c] = mean, variance
        result[:, c] = (values - mean) / math.sqrt(variance + op.epsilon) * float(
            wide(scale)[c]
        ) + float(wide(bias)[c])
    return narrow(result, out, 0), narrow(means, out, 1), narrow(variances, out, 2)


@ORACLE.register(LRN)
def _lrn(op: LRN, x: np.ndarray, out: Any) -> np.ndarray:
    xw = wide(x)
    channels = x.shape[1]
    low, high = (op.size - 1) // 2, math.ceil((op.size - 1) / 2)
    result = np.empty(x.shape)
    for c in range(channels):
        window = range(max(0, c - low), min(channels - 1, c + high) + 1)
        total = sum(xw[:, j] ** 2 for j in window)
        result[:, c] = xw[:, c] / (op.bias + op.alpha / op.size * total) ** op.beta
    return narrow(result, out)
