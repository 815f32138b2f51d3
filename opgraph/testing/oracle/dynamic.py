"""Oracle entries for shape_of and non_zero, by explicit walks over the shape and elements."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops import dynamic as dy
from opgraph.testing.oracle.registry import ORACLE


@ORACLE.register(dy.ShapeOf)
def _shape_of(op: dy.ShapeOf, x: np.ndarray, out: Any) -> np.ndarray:
    return np.array([int(d) for d in x.shape] or [], dtype=np.int64)


@ORACLE.register(dy.NonZero)
def _non_zero(op: dy.NonZero, x: np.ndarray, out: Any) -> np.ndarray:
    columns = []
    for index in np.ndindex(*x.shape):  # row-major order
        value = float(x[index])
        if value != 0.0 or math.isnan(value):
            columns.append(index)
    return np.array(columns, dtype=np.int64).reshape(len(columns), x.ndim).T.copy()
