"""Expand every ``Call`` into the body of its Function."""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.literals import Parameter
from opgraph.core.node import Node, Output
from opgraph.ops.structural import Call
from opgraph.passes._rewrite_nodes import rewrite_nodes


def inline_calls(fn: Function) -> Function:
    """Replace each ``Call(f, args)`` by ``f``'s body with its parameters bound to ``args``.

    Needs: nothing. Guarantees: no ``Call`` node remains (callees are inlined recursively);
    results and numerics are unchanged.
    """
    return rewrite_nodes(fn, _inline)


def _inline(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    if not isinstance(node.op, Call):
        return None
    callee = inline_calls(node.op.function)
    body = [n for n in callee.nodes if not isinstance(n.op, Parameter)]
    mapping = rebuild_nodes(body, initial=dict(zip(callee.parameters, inputs, strict=True)))
    return [mapping.get(r, r) for r in callee.results]
