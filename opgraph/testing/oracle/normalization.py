"""Oracle entries for the normalization ops: numpy mean and variance in f64."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.ops import normalization as nm
from opgraph.testing.oracle.registry import ORACLE, narrow, wide


def _standardize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon)


def _per_channel(param: np.ndarray, rank: int) -> np.ndarray:
    return wide(param).reshape((1, -1) + (1,) * (rank - 2))


@ORACLE.register(nm.LayerNorm)
def _layer_norm(op: nm.LayerNorm, x: np.ndarray, *params: np.ndarray, out: Any) -> np.ndarray:
    y = _standardize(wide(x), tuple(range(op.axis, x.ndim)), op.epsilon)
    if params:
        y = y * wide(params[0])
    if len(params) == 2:
        y = y + wide(params[1])
    return narrow(y, out)


@ORACLE.register(nm.GroupNorm)
def _group_norm(
    op: nm.GroupNorm, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, out: Any
) -> np.ndarray:
    n, c = x.shape[:2]
    grouped = wide(x).reshape(n, op.num_groups, c // op.num_groups, *x.shape[2:])
    y = _standardize(grouped, tuple(range(2, grouped.ndim)), op.epsilon).reshape(x.shape)
    return narrow(y * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim), out)


@ORACLE.register(nm.InstanceNorm)
def _instance_norm(
    op: nm.InstanceNorm, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, out: Any
) -> np.ndarray:
    y = _standardize(wide(x), tuple(range(2, x.ndim)), op.epsilon)
    return narrow(y * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim), out)
