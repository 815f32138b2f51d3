"""TfIdfVectorizer over integer tokens, in the graph.

For each n-gram length ``n`` and skip distance ``d``, a constant index matrix gathers every
window ``x[i], x[i+d], …, x[i+(n-1)d]`` of each row; comparing the windows with the pool's
n-grams of that length and counting full matches gives per-n-gram counts, which a constant
one-hot matrix sums into the output columns. Unigrams count once (skips do not change them),
as in the ONNX reference.
"""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import expand_to, full, typed_constant
from opgraph.frontends.onnx.registry import onnx_op


def _pool(ctx: NodeContext) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """n → (the pool's n-grams ``[G, n]``, their output columns ``[G]``) for the used n."""
    pool = np.asarray(ctx.attr("pool_int64s") or [], dtype=np.int64)
    if ctx.attr("pool_strings"):
        raise ctx.fail("string pools are not supported (opgraph has no string tensors)")
    starts = [int(c) for c in ctx.attr("ngram_counts")]
    columns = [int(i) for i in ctx.attr("ngram_indexes")]
    low, high = int(ctx.attr("min_gram_length")), int(ctx.attr("max_gram_length"))
    grams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    ngram = 0
    for n, start in enumerate(starts, start=1):
        end = starts[n] if n < len(starts) else len(pool)
        count = (end - start) // n
        if low <= n <= high and count:
            values = pool[start : start + count * n].reshape(count, n)
            grams[n] = (values, np.asarray(columns[ngram : ngram + count]))
        ngram += count
    return grams


def _counts(x: Output, grams: np.ndarray, distance: int, width: int) -> Output:
    """``[B, width]`` counts of ``grams`` (``[G, n]``) in the rows of ``x`` at ``distance``."""
    length, n = static_dim(x.shape[1], "TfIdfVectorizer's n-gram positions"), grams.shape[1]
    starts = length - (n - 1) * distance
    if starts <= 0:
        return _zeros((static_dim(x.shape[0], "TfIdfVectorizer's empty counts"), width))
    positions = np.arange(starts)[:, None] + np.arange(n)[None, :] * distance
    windows = ops.gather(x, constant(positions.astype(np.int64)), axis=1)  # [B, W, n]
    shape = (x.shape[0], starts, grams.shape[0], n)
    pool = typed_constant(grams, x.element_type)
    matches = ops.equal(ops.broadcast(windows, shape, (2,)), ops.broadcast(pool, shape, (0, 1)))
    found = ops.convert(ops.reduce_all(matches, [3]), et.f32)
    return ops.reduce_sum(found, [1])  # [B, G]


@onnx_op("TfIdfVectorizer", since=9)
def _tfidf(ctx: NodeContext) -> Output:
    x = ctx.input(0)
    rows = x if x.rank == 2 else ops.reshape(x, [1, x.shape[0]])
    width = max(int(i) for i in ctx.attr("ngram_indexes")) + 1
    skips = int(ctx.attr("max_skip_count", 0))
    total: Output | None = None
    for n, (grams, columns) in _pool(ctx).items():
        spread = np.zeros((len(columns), width))
        spread[np.arange(len(columns)), columns] = 1.0
        for distance in range(1, (1 if n == 1 else skips + 1) + 1):
            counts = ops.dot(
                _counts(rows, grams, distance, len(columns)), typed_constant(spread, et.f32)
            )
            total = counts if total is None else ops.add(total, counts)
    if total is None:
        total = _zeros((static_dim(rows.shape[0], "TfIdfVectorizer's empty counts"), width))
    result = _weigh(ctx, total, width)
    return result if x.rank == 2 else ops.reshape(result, [width])


def _zeros(shape: tuple[int, int]) -> Output:
    return typed_constant(np.zeros(shape), et.f32)


def _weigh(ctx: NodeContext, counts: Output, width: int) -> Output:
    mode = str(ctx.attr("mode"))
    weights = ctx.attr("weights")
    if mode == "TF":
        return counts
    scale = (
        expand_to(typed_constant(np.asarray(weights, np.float32), et.f32), 2, [1], counts.shape)
        if weights
        else full(1, counts)
    )
    if mode == "IDF":
        present = ops.greater(counts, full(0, counts))
        return ops.select(present, scale, full(0, counts))
    if mode == "TFIDF":
        return ops.multiply(counts, scale)
    raise ctx.fail(f"unknown mode {mode!r}")
