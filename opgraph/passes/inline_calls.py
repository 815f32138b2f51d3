"""Expand every ``Call`` into the body of its Function."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from opgraph.core.errors import GraphError
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.literals import Parameter
from opgraph.core.node import Node, Output
from opgraph.ops.structural import Call
from opgraph.passes._rewrite_nodes import rewrite_nodes

#: The most nodes inlining may produce by default. Each level of calls can multiply the size
#: (a Function calling the previous one twice, 40 levels deep, is 2^40 nodes from a file of a
#: few kilobytes); a real model inlines to well under a million.
DEFAULT_MAX_NODES = 1 << 22


def inline_calls(fn: Function, max_nodes: int = DEFAULT_MAX_NODES) -> Function:
    """Replace each ``Call(f, args)`` by ``f``'s body with its parameters bound to ``args``.

    Callees are inlined first, innermost first, and without recursion: a chain of calls
    thousands deep inlines like a flat graph. The size of the result is counted before any
    node is built.

    Needs: nothing. Guarantees: no ``Call`` node remains (nested calls included); results and
    numerics are unchanged.

    Raises:
        GraphError: inlining would give more than ``max_nodes`` nodes.
    """
    order = _callees_first(fn)
    _check_size(fn, order, max_nodes)
    inlined: dict[Function, Function] = {}
    for function in order:
        inlined[function] = rewrite_nodes(function, functools.partial(_inline, inlined))
    return inlined[fn]


def _check_size(fn: Function, order: list[Function], max_nodes: int) -> None:
    sizes: dict[Function, int] = {}
    for function in order:  # callees first, so each callee's size is known
        sizes[function] = sum(
            sizes[n.op.function] if isinstance(n.op, Call) else 1 for n in function.nodes
        )
    if sizes[fn] > max_nodes:
        raise GraphError(
            f"inline_calls: inlining the calls in {fn.name} would give {sizes[fn]} nodes, more "
            f"than max_nodes={max_nodes} (each call copies its callee's body, so calls nested "
            "several levels deep multiply the size)"
        )


def _callees_first(fn: Function) -> list[Function]:
    """``fn`` and every Function it calls, directly or not, each once, callees before callers.

    An explicit stack instead of recursion, so call depth is not bound by Python's recursion
    limit. Calls cannot form a cycle (a Function exists before any Call of it).
    """
    order: list[Function] = []
    done: set[Function] = set()
    stack: list[tuple[Function, bool]] = [(fn, False)]
    while stack:
        function, expanded = stack.pop()
        if function in done:
            continue
        if expanded:
            done.add(function)
            order.append(function)
            continue
        stack.append((function, True))
        for node in function.nodes:
            if isinstance(node.op, Call) and node.op.function not in done:
                stack.append((node.op.function, False))
    return order


def _inline(
    inlined: dict[Function, Function], node: Node, inputs: tuple[Output, ...]
) -> Sequence[Output] | None:
    if not isinstance(node.op, Call):
        return None
    callee = inlined[node.op.function]  # already free of calls: callees come first
    body = [n for n in callee.nodes if not isinstance(n.op, Parameter)]
    mapping = rebuild_nodes(body, initial=dict(zip(callee.parameters, inputs, strict=True)))
    return [mapping.get(r, r) for r in callee.results]
