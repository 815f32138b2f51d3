"""The node-by-node rebuilding every structural pass shares."""

from __future__ import annotations

from opgraph.core.function import Function
from opgraph.core.graph import Replacer, rebuild_nodes


def rewrite_nodes(fn: Function, replace: Replacer) -> Function:
    """``fn`` rebuilt in topological order with ``replace`` applied to every node."""
    mapping = rebuild_nodes(fn.nodes, replace)
    if not mapping:
        return fn
    return fn.with_outputs(mapping)
