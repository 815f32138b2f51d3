"""Oracle entries for Dot, MatMul and Gemm: explicit sums over the contracted index."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opgraph.ops.linalg import Dot, Gemm, MatMul
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


def _matrix_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_k a[..., :, k] ⊗ b[..., k, :], batch dimensions broadcast by index arithmetic."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    n, k, m = a.shape[-2], a.shape[-1], b.shape[-1]
    result = np.zeros((*batch, n, m), a.dtype)
    for index in np.ndindex(*batch):
        left, right = _source(index, a.shape[:-2]), _source(index, b.shape[:-2])
        for j in range(k):
            result[index] += np.outer(a[left][:, j], b[right][j, :])
    return result


def _source(index: tuple[int, ...], batch: tuple[int, ...]) -> tuple[int, ...]:
    """The operand's batch index for a result batch ``index`` (size-1 dimensions repeat)."""
    own = index[len(index) - len(batch) :]
    return tuple(i if d != 1 else 0 for i, d in zip(own, batch, strict=True))


@ORACLE.register(MatMul)
def _matmul(op: MatMul, a: np.ndarray, b: np.ndarray, out: Any) -> np.ndarray:
    a2 = wide(a) if a.ndim >= 2 else wide(a)[None, :]
    b2 = wide(b) if b.ndim >= 2 else wide(b)[:, None]
    result = _matrix_product(a2, b2)
    if a.ndim == 1:
        result = result[..., 0, :]
    if b.ndim == 1:
        result = result[..., 0]
    return narrow(result, out)


@ORACLE.register(Gemm)
def _gemm(op: Gemm, a: np.ndarray, b: np.ndarray, *c: np.ndarray, out: Any) -> np.ndarray:
    a2 = wide(a).T if op.trans_a else wide(a)
    b2 = wide(b).T if op.trans_b else wide(b)
    integral = a.dtype.kind in "iu"
    alpha = int(op.alpha) if integral else op.alpha
    result = _matrix_product(a2, b2) * np.asarray(alpha).astype(a2.dtype)
    if c:
        beta = int(op.beta) if integral else op.beta
        result = result + wide(c[0]) * np.asarray(beta).astype(a2.dtype)
    return narrow(result, out)
