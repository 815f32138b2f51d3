"""Remove tuple values: project tuple elements directly and flatten tuple results."""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.core.errors import GraphError
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.node import Node, Output
from opgraph.core.tensor_type import TupleType
from opgraph.ops.structural import GetTupleElement, Tuple


def unbox_tuples(fn: Function) -> Function:
    """Resolve ``get_tuple_element(tuple_(…), i)`` and flatten tuple-typed results in order.

    Needs: ``inline_calls`` first (tuples returned by calls are resolved once inlined).
    Guarantees: no tuple-typed value remains; the flat result list is what a call returns.
    """
    mapping = rebuild_nodes(fn.nodes, _project)
    results: list[Output] = []
    for r in fn.results:
        results.extend(_flatten(mapping.get(r, r)))
    return Function(results, [mapping.get(p, p) for p in fn.parameters], fn.name)


def _project(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    if not isinstance(node.op, GetTupleElement):
        return None
    source = inputs[0]
    if not isinstance(source.node.op, Tuple):
        raise GraphError(
            f"unbox_tuples: get_tuple_element reads a tuple made by {source.node.op.name} "
            f"(built at {source.node.provenance}); run inline_calls first"
        )
    return [source.node.inputs[node.op.index]]


def _flatten(value: Output) -> list[Output]:
    if not isinstance(value.type, TupleType):
        return [value]
    if not isinstance(value.node.op, Tuple):
        raise GraphError(f"unbox_tuples: cannot flatten a tuple made by {value.node.op.name}")
    flat: list[Output] = []
    for element in value.node.inputs:
        flat.extend(_flatten(element))
    return flat
