"""A float sum over the leading axes of a tensor (a bias gradient: ``sum(g, 0)`` of a
``[tokens, features]`` cotangent) as a product with a vector of ones.

As a CPU row kernel, each output element is one strided walk down a column of the input: a
cache line per element, 40x slower than the product on ``[1024, 3072]`` (12.3 ms against
0.28 ms, one thread). The product reads the rows in order with BLAS. (On a GPU the same walk
is coalesced across threads, so the rewrite is the CPU backend's only.) Sums stay blocked as
everywhere on the CPU (docs/design.md, "CPU floating-point sums are pairwise"): up to
``BLOCK`` rows are one product, more are cut into blocks of rows (a batched product), whose
partial sums are summed again (a shorter sum over the leading axis).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.literals import constant
from opgraph.core.node import Node, Output
from opgraph.core.shape import is_static, static_shape
from opgraph.ops.linalg import dot, matmul
from opgraph.ops.movement import reshape
from opgraph.ops.reduction import ReduceSum, reduce_sum

#: Rows summed by one product; more are cut into blocks of at most this many.
BLOCK = 512
#: Smallest block a longer sum is cut into (a row count with no divisor between this and
#: ``BLOCK`` keeps its row kernel).
MIN_BLOCK = 64
#: Leading rows and kept columns below which the row kernel is as fast (few, or short, walks).
MIN_ROWS = 16
MIN_COLUMNS = 16


def _block(rows: int) -> int | None:
    if rows <= BLOCK:
        return rows
    for size in range(BLOCK, MIN_BLOCK - 1, -1):
        if rows % size == 0:
            return size
    return None


def column_sum(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    """A ReduceSum over leading axes rebuilt on ``inputs`` as products with ones (a CPU
    rewrite: ``backends/cpu/rewrites.py``), or None when the row kernel is as good or the
    shapes do not qualify."""
    op = node.op
    assert isinstance(op, ReduceSum)
    (x,) = inputs
    out = node.outputs[0]
    k = len(op.axes)
    if x.element_type not in (et.f32, et.f64) or not 0 < k < x.rank or op.axes != tuple(range(k)):
        return None
    if not is_static(x.shape):
        return None  # static sizes only
    shape = static_shape(x.shape)
    rows, columns = math.prod(shape[:k]), math.prod(shape[k:])
    block = _block(rows)
    if rows < MIN_ROWS or columns < MIN_COLUMNS or block is None:
        return None
    t = x.element_type
    if block == rows:
        ones = constant(np.ones(rows, t.dtype), t)
        total = dot(ones, reshape(x, (rows, columns)), 1)
    else:
        ones = constant(np.ones((1, block), t.dtype), t)
        partial = matmul(ones, reshape(x, (rows // block, block, columns)))
        total = reduce_sum(reshape(partial, (rows // block, columns)), (0,))
    return [reshape(total, out.shape)]
