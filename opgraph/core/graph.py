"""Graph traversal and rebuilding, shared by Function, passes and backends."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from opgraph.core.node import Node, Output


def topological_order(roots: Iterable[Output], first: Sequence[Node] = ()) -> list[Node]:
    """Nodes reachable from ``roots``, every node after its inputs.

    Deterministic: ``first`` (e.g. the declared parameters) come first in the given order, then
    an iterative depth-first post-order over the roots in order, inputs in order.
    """
    order: list[Node] = list(first)
    done: set[Node] = set(first)
    for root in roots:
        if root.node in done:
            continue
        stack: list[tuple[Node, int]] = [(root.node, 0)]
        on_stack = {root.node}
        while stack:
            node, next_input = stack[-1]
            if next_input < len(node.inputs):
                stack[-1] = (node, next_input + 1)
                child = node.inputs[next_input].node
                if child not in done and child not in on_stack:
                    stack.append((child, 0))
                    on_stack.add(child)
                continue
            stack.pop()
            on_stack.discard(node)
            done.add(node)
            order.append(node)
    return order


#: A rewrite hook for :func:`rebuild_nodes`: given the original node and its new inputs, return
#: replacement outputs, or None to rebuild the node as it was.
Replacer = Callable[[Node, tuple[Output, ...]], Sequence[Output] | None]


def rebuild_nodes(
    nodes: Sequence[Node],
    replace: Replacer | None = None,
    initial: dict[Output, Output] | None = None,
) -> dict[Output, Output]:
    """Rebuild ``nodes`` (topologically ordered) and map every changed Output to its new one.

    ``initial`` pre-maps some Outputs (e.g. a callee's parameters to a call's arguments).

    A node whose inputs did not change and that ``replace`` leaves alone is reused as it is:
    nodes are immutable, so sharing them between Functions is safe.
    """
    mapping: dict[Output, Output] = dict(initial or {})
    for node in nodes:
        inputs = tuple(mapping.get(i, i) for i in node.inputs)
        outputs = replace(node, inputs) if replace is not None else None
        if outputs is None:
            if inputs == node.inputs:
                continue
            outputs = node.op.build(*inputs, name=node.name, provenance=node.provenance).outputs
        if len(outputs) != len(node.outputs):
            raise ValueError(
                f"replacement for {node.op.name} has {len(outputs)} outputs, "
                f"expected {len(node.outputs)}"
            )
        for old, new in zip(node.outputs, outputs, strict=True):
            if old != new:
                mapping[old] = new
    return mapping


def readers(nodes: Iterable[Node]) -> dict[Output, list[Node]]:
    """The nodes among ``nodes`` that read each value, in the order given (a node reading a
    value twice is listed twice); a value nothing reads has no entry."""
    found: dict[Output, list[Node]] = {}
    for node in nodes:
        for x in node.inputs:
            found.setdefault(x, []).append(node)
    return found


def copy_node(node: Node, inputs: tuple[Output, ...]) -> Node:
    """A fresh node with the same op, name and provenance (used by ``Function.clone``)."""
    return node.op.build(*inputs, name=node.name, provenance=node.provenance)
