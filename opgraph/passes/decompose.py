"""Lower framework-level ops to core ops through their ``decompose()``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opgraph.core.errors import GraphError, OpgraphError
from opgraph.core.function import Function
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.passes._rewrite_nodes import rewrite_nodes

_MAX_DEPTH = 32


def decompose(
    fn: Function, is_supported: Callable[[Op], bool] | None = None, keep_symbolic: bool = False
) -> Function:
    """Replace every op that has a decomposition, unless ``is_supported(op)`` says the target
    backend runs it natively. Decompositions that contain further decomposable ops are lowered
    too. With ``keep_symbolic``, a node with symbolic sizes whose decomposition cannot be built
    for them (it needs a concrete size: resize's coordinate tables) is kept as it is.

    Needs: nothing. Guarantees: every remaining op either has no decomposition or is supported;
    numerics unchanged (the decomposition defines the op's semantics).
    """
    supported = is_supported or (lambda op: False)

    def lower(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        op = node.op
        if not op.has_decomposition() or supported(op):
            return None
        try:
            result = op.decompose(*inputs)
        except (OpgraphError, TypeError):
            if keep_symbolic and _symbolic(node):
                return None
            raise
        return (result,) if isinstance(result, Output) else result

    for _ in range(_MAX_DEPTH):
        lowered = rewrite_nodes(fn, lower)
        if lowered is fn:
            return fn
        fn = lowered
    raise GraphError(f"decompose: {fn.name} still has decomposable ops after {_MAX_DEPTH} rounds")


def _symbolic(node: Node) -> bool:
    types = [x.tensor_type for x in node.inputs] + [o.tensor_type for o in node.outputs]
    return any(type(d) is not int for t in types for d in t.shape)
