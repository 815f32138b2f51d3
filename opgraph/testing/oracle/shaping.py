"""Oracle entries for the shaping ops, stated with numpy's own shape functions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops import shaping as sh
from opgraph.testing.oracle.registry import ORACLE


@ORACLE.register(sh.Squeeze)
def _squeeze(op: sh.Squeeze, x: np.ndarray, out: Any) -> np.ndarray:
    return np.squeeze(x, axis=op.axes)


@ORACLE.register(sh.Unsqueeze)
def _unsqueeze(op: sh.Unsqueeze, x: np.ndarray, out: Any) -> np.ndarray:
    return np.expand_dims(x, op.axes)


@ORACLE.register(sh.Flatten)
def _flatten(op: sh.Flatten, x: np.ndarray, out: Any) -> np.ndarray:
    return x.reshape(math.prod(x.shape[: op.axis]), math.prod(x.shape[op.axis :]))


@ORACLE.register(sh.Stack)
def _stack(op: sh.Stack, *xs: np.ndarray, out: Any) -> np.ndarray:
    return np.stack(xs, axis=op.axis)


@ORACLE.register(sh.Expand)
def _expand(op: sh.Expand, x: np.ndarray, out: Any) -> np.ndarray:
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, op.shape)).copy()
