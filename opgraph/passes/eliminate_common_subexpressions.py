"""Common subexpression elimination (CSE)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from opgraph.core.function import Function
from opgraph.core.literals import Parameter
from opgraph.core.node import Node, Output
from opgraph.passes._rewrite_nodes import rewrite_nodes

__all__ = ["eliminate_common_subexpressions"]


def eliminate_common_subexpressions(fn: Function) -> Function:
    """Merge nodes that compute the same thing: equal ops (op class and attributes — ops are
    dataclasses, Constants compare by value) applied to the same inputs, for commutative ops in
    either order. The first node in topological order is kept; merging cascades to users.

    Parameters are never merged (each is its own argument). An op whose attributes cannot be
    hashed is left alone.

    Needs: nothing. Guarantees: no two nodes have equal ops and equal inputs (up to the order of
    a commutative op's two inputs); numerics unchanged.

    Returns:
        ``fn`` itself when nothing merges.
    """
    seen: dict[Hashable, Node] = {}

    def merge(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        if isinstance(node.op, Parameter):
            return None
        current = node
        if inputs != node.inputs:
            current = node.op.build(*inputs, name=node.name, provenance=node.provenance)
        key = _key(current)
        try:
            first = seen.setdefault(key, current)
        except TypeError:  # unhashable attributes: never merged
            first = current
        if first is node:
            return None
        return first.outputs

    return rewrite_nodes(fn, merge)


def _key(node: Node) -> Hashable:
    inputs = node.inputs
    if type(node.op).commutative and len(inputs) == 2:
        inputs = tuple(sorted(inputs, key=lambda o: (o.node.id, o.index)))
    return (type(node.op), node.op, inputs)
