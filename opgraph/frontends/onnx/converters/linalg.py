"""MatMul, Gemm and Det."""

from __future__ import annotations

import functools
import itertools

import numpy as np

from opgraph import ops
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.registry import onnx_op


@onnx_op("MatMul", since=1)
def _matmul(ctx: NodeContext) -> Output:
    return ops.matmul(ctx.input(0), ctx.input(1))


@onnx_op("Gemm", since=1)
def _gemm(ctx: NodeContext) -> Output:
    """Gemm (C optional from opset 11; it broadcasts to the product's shape)."""
    return ops.gemm(
        ctx.input(0),
        ctx.input(1),
        ctx.optional(2),
        alpha=float(ctx.attr("alpha", 1.0)),
        beta=float(ctx.attr("beta", 1.0)),
        trans_a=bool(ctx.attr("transA", 0)),
        trans_b=bool(ctx.attr("transB", 0)),
    )


#: Det expands minors over column subsets (n · 2^n products); larger matrices are refused.
DET_LIMIT = 10


@onnx_op("Det", since=11)
def _det(ctx: NodeContext) -> Output:
    """Laplace expansion along the rows, each minor computed once per column subset."""
    x = ctx.input(0)
    n = x.shape[-1]
    if n != x.shape[-2] or n > DET_LIMIT:
        raise ctx.fail(f"needs square matrices of size at most {DET_LIMIT}, got {x.type}")
    entries = [[_entry(x, i, j) for j in range(n)] for i in range(n)]
    minors: dict[tuple[int, ...], Output] = {}
    for size in range(1, n + 1):
        row = n - size
        for columns in itertools.combinations(range(n), size):
            terms = []
            for position, column in enumerate(columns):
                rest = columns[:position] + columns[position + 1 :]
                term = (
                    entries[row][column]
                    if not rest
                    else ops.multiply(entries[row][column], minors[rest])
                )
                terms.append(ops.negative(term) if position % 2 else term)
            minors[columns] = functools.reduce(ops.add, terms)
    return minors[tuple(range(n))]


def _entry(x: Output, i: int, j: int) -> Output:
    row = ops.gather(x, constant(np.array(i, dtype=np.int64)), axis=x.rank - 2)
    return ops.gather(row, constant(np.array(j, dtype=np.int64)), axis=row.rank - 1)
