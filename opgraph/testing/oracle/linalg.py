"""Oracle entry for Dot: an explicit sum over the contracted index space."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops.linalg import Dot
from opgraph.testing.oracle.registry import ORACLE, narrow, wide


@ORACLE.register(Dot)
def _dot(op: Dot, a: np.ndarray, b: np.ndarray, out: Any) -> np.ndarray:
    n = op.reduction_axes_count
    assert n is not None
    free_a = a.shape[: a.ndim - n]
    free_b = b.shape[n:]
    k = math.prod(a.shape[a.ndim - n :])
    a2 = wide(a).reshape(math.prod(free_a), k)
    b2 = wide(b).reshape(k, math.prod(free_b))
    result = np.zeros((a2.shape[0], b2.shape[1]), a2.dtype)
    for i in range(k):
        result += np.outer(a2[:, i], b2[i, :])
    return narrow(result.reshape(free_a + free_b), out)
