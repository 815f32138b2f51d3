"""Reference kernels for shape_of and non_zero (results sized by the run, not the types)."""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.ops import dynamic as dy


@KERNELS.register(dy.ShapeOf)
def _shape_of(op: dy.ShapeOf, x: np.ndarray) -> np.ndarray:
    return np.array(x.shape, dtype=np.int64).reshape(x.ndim)


@KERNELS.register(dy.NonZero)
def _non_zero(op: dy.NonZero, x: np.ndarray) -> np.ndarray:
    found = np.nonzero(x != 0)  # NaN != 0: NaN counts as non-zero, as in ONNX
    return np.stack(found).astype(np.int64).reshape(x.ndim, -1)
