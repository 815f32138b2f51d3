"""Dead code elimination."""

from __future__ import annotations

from opgraph.core.function import Function
from opgraph.core.graph import topological_order

__all__ = ["eliminate_dead_code"]


def eliminate_dead_code(fn: Function) -> Function:
    """Drop every node the results do not depend on.

    A :class:`Function` already holds only the nodes reachable from its results (its
    construction walks back from them), so nodes orphaned by an earlier rewrite are gone once
    that rewrite returns; this pass states the guarantee in a pipeline and checks it. Parameters
    are the Function's interface and are always kept, used or not; a multi-output node is kept
    whole while any of its outputs is used.

    Needs: nothing. Guarantees: every non-Parameter node is reachable from a result; numerics
    unchanged.

    Returns:
        ``fn`` itself when nothing is dead, else a Function of the live nodes.
    """
    live = topological_order(fn.results, first=[p.node for p in fn.parameters])
    if len(live) == len(fn.nodes):
        return fn
    return Function(fn.results, fn.parameters, fn.name)
