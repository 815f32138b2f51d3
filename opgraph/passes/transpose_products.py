"""Compute a transposed matrix product as the product of the swapped, transposed operands:
``transpose(dot(a, b)) -> dot(transpose(b), transpose(a))``.

Reverse-mode autodiff makes this shape for every ``x @ w.T`` layer: the weight's gradient is
``transpose(dot(transpose(x), g))`` (the adjoint of the transposed weight, transposed back).
Read through the transpose, the product's rows are columns: the consumer (an optimizer
update, or the copy into a result) walks the matrix with a stride of a whole row. The swapped
product is the same sums in the weight's own layout, and transposed operands cost a BLAS call
nothing (a transpose of a transpose cancels here).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.node import Node, Output
from opgraph.ops.linalg import Dot, dot
from opgraph.ops.movement import Transpose, transpose

__all__ = ["transpose_products"]


def _use_counts(fn: Function) -> Counter[Output]:
    uses: Counter[Output] = Counter(fn.results)
    for node in fn.nodes:
        uses.update(node.inputs)
    return uses


def _swapped(x: Output) -> Output:
    """``x`` (2-D) transposed, a transpose of a transpose cancelled."""
    op = x.op
    if isinstance(op, Transpose) and op.perm == (1, 0):
        return x.node.inputs[0]
    return transpose(x, (1, 0))


def _matrix_product(value: Output) -> bool:
    op = value.op
    return (
        isinstance(op, Dot)
        and op.reduction_axes_count == 1
        and all(x.rank == 2 for x in value.node.inputs)
    )


def transpose_products(fn: Function) -> Function:
    """Replace every ``transpose(dot(a, b), (1, 0))`` of 2-D operands, where the product has
    no other use, by ``dot(transpose(b), transpose(a))`` (an operand that is itself a 2-D
    transpose is used untransposed).

    Needs: nothing. Guarantees: no 2-D Transpose reads a matrix product that nothing else
    reads; each element is the same dot product of the same numbers (the order of its sum
    is the BLAS kernel's, as before).
    """
    uses = _use_counts(fn)

    def replace(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        op = node.op
        if not isinstance(op, Transpose) or op.perm != (1, 0):
            return None
        (product,) = inputs
        if uses[node.inputs[0]] != 1 or not _matrix_product(product):
            return None
        a, b = product.node.inputs
        return [dot(_swapped(b), _swapped(a), 1)]

    mapping = rebuild_nodes(fn.nodes, replace)
    return fn.with_outputs(mapping) if mapping else fn
