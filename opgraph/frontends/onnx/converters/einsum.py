"""Einsum as transposes, reshapes, diagonal masks, sums and batched matrix products.

Labels become integers (ellipsis dimensions negative, aligned from the right). Each operand
first loses its repeated labels (a diagonal: multiply by an identity mask, sum one axis) and
the labels no one else needs (summed); operands are then contracted left to right with one
``matmul`` each over ``[batch, kept, contracted]`` layouts, and the result is transposed to
the output order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opgraph import ops
from opgraph.builders.broadcasting import broadcast_to
from opgraph.core.dim import Dim
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import prod, typed_constant
from opgraph.frontends.onnx.registry import onnx_op


@dataclass
class Term:
    """A value and the label of each of its axes."""

    value: Output
    labels: list[int]

    def dims(self) -> dict[int, Dim]:
        return dict(zip(self.labels, self.value.shape, strict=True))


def parse(equation: str, ranks: list[int]) -> tuple[list[list[int]], list[int]]:
    """Integer labels per operand and for the output (ellipsis axes negative)."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"{len(terms)} operands in {equation!r}, {len(ranks)} inputs")
    ellipsis = max(
        (rank - len(t.replace("...", "")) for t, rank in zip(terms, ranks, strict=True)),
        default=0,
    )
    labels = [_labels(t, rank) for t, rank in zip(terms, ranks, strict=True)]
    if arrow:
        return labels, _labels(rhs, len(rhs.replace("...", "")) + ellipsis)
    counts: dict[int, int] = {}
    for term in labels:
        for label in term:
            counts[label] = counts.get(label, 0) + 1
    broadcast = list(range(-ellipsis, 0))
    named = sorted(k for k, c in counts.items() if c == 1 and k >= 0)
    return labels, broadcast + named


def _labels(term: str, rank: int) -> list[int]:
    if "..." not in term:
        return [ord(c) for c in term]
    before, after = term.split("...")
    count = rank - len(before) - len(after)
    return [ord(c) for c in before] + list(range(-count, 0)) + [ord(c) for c in after]


def diagonal(term: Term) -> Term:
    """Remove repeated labels by taking diagonals."""
    while len(set(term.labels)) != len(term.labels):
        label = next(lb for lb in term.labels if term.labels.count(lb) > 1)
        first = term.labels.index(label)
        second = term.labels.index(label, first + 1)
        x = term.value
        size = static_dim(x.shape[first], "Einsum's diagonal (a repeated label)")
        eye = typed_constant(np.eye(size), x.element_type)
        others = tuple(a for a in range(x.rank) if a not in (first, second))
        mask = ops.broadcast(eye, x.shape, others) if others else eye
        summed = ops.reduce_sum(ops.multiply(x, mask), [second])
        term = Term(summed, term.labels[:second] + term.labels[second + 1 :])
    return term


def sum_out(term: Term, keep: set[int]) -> Term:
    drop = [i for i, lb in enumerate(term.labels) if lb not in keep]
    if not drop:
        return term
    value = ops.reduce_sum(term.value, drop)
    return Term(value, [lb for lb in term.labels if lb in keep])


def arrange(term: Term, order: list[int]) -> Output:
    perm = [term.labels.index(lb) for lb in order]
    return ops.transpose(term.value, perm) if perm != list(range(len(perm))) else term.value


def contract(a: Term, b: Term, needed: set[int]) -> Term:
    """``a`` times ``b``, summing the shared labels not in ``needed``."""
    shared = [lb for lb in a.labels if lb in b.labels]
    batch = [lb for lb in shared if lb in needed]
    summed = [lb for lb in shared if lb not in needed]
    a_only = [lb for lb in a.labels if lb not in shared]
    b_only = [lb for lb in b.labels if lb not in shared]
    dims_a, dims_b = a.dims(), b.dims()
    size = {lb: max(dims_a.get(lb, 1), dims_b.get(lb, 1)) for lb in a.labels + b.labels}
    left = _matrix(a, batch, a_only, summed, size)
    right = ops.transpose(_matrix(b, batch, b_only, summed, size), (0, 2, 1))
    product = ops.matmul(left, right)
    shape = [size[lb] for lb in batch + a_only + b_only]
    return Term(ops.reshape(product, shape), batch + a_only + b_only)


def _matrix(
    term: Term, batch: list[int], kept: list[int], summed: list[int], size: dict[int, Dim]
) -> Output:
    """``term`` as ``[prod(batch), prod(kept), prod(summed)]`` (broadcast where it is 1)."""
    value = arrange(term, batch + kept + summed)
    full_shape = [size[lb] for lb in batch] + [size[lb] for lb in kept + summed]
    value = broadcast_to(value, tuple(full_shape))
    dims = [prod(full_shape[: len(batch)]), prod([size[lb] for lb in kept])]
    return ops.reshape(value, [*dims, prod([size[lb] for lb in summed])])


def einsum(equation: str, values: list[Output]) -> Output:
    """``numpy.einsum(equation, *values)`` with core ops."""
    labels, output = parse(equation, [v.rank for v in values])
    terms = [diagonal(Term(v, lb)) for v, lb in zip(values, labels, strict=True)]
    for i, term in enumerate(terms):
        elsewhere = {lb for j, t in enumerate(terms) if j != i for lb in t.labels}
        terms[i] = sum_out(term, elsewhere | set(output))
    result = terms[0]
    for i in range(1, len(terms)):
        later = {lb for t in terms[i + 1 :] for lb in t.labels}
        result = contract(result, terms[i], later | set(output))
    result = sum_out(result, set(output))
    return arrange(result, output)


@onnx_op("Einsum", since=12)
def _einsum(ctx: NodeContext) -> Output:
    values = [v for v in ctx.inputs if v is not None]
    try:
        return einsum(str(ctx.attr("equation")), values)
    except ValueError as error:
        raise ctx.fail(str(error)) from error
