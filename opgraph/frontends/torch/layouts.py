"""Views at a partition's boundary, so that no partition copies what torch has as a view.

* :func:`views_outside`: a partition output that is only a view of a partition input or of
  another output (AOTAutograd's forward returns ``alias(relu)`` beside ``relu`` and saves
  ``permute(weight)`` for the backward) is taken out of the Executable's results and rebuilt in
  the calling graph as the same view ops, run by torch (free). The Executable would otherwise
  write a copy, a transposed one for ``permute``.
* :func:`dense_order`: a partition input whose traced layout is a permutation of a dense one
  (the backward receives ``permute(weight)``, strides ``(1, n)``) is passed as
  ``input.permute(order)`` — contiguous, so wrapped without a copy — and transposed back inside
  the Function, where opgraph folds the transpose into the product that reads it. At run time a
  tensor with another layout is still right: ``permute(order)`` then needs a contiguous copy.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, cast

import torch

from opgraph.frontends.torch.converters.common import overloads

#: ATen ops that are views in torch: replayed outside a partition they cost nothing.
VIEWS = {
    *overloads(
        "alias.default",
        "permute.default",
        "view.default",
        "_unsafe_view.default",
        "t.default",
        "transpose.int",
        "unsqueeze.default",
        "squeeze.dim",
        "squeeze.dims",
        "squeeze.default",
        "expand.default",
        "slice.Tensor",
        "select.int",
        "detach.default",
    )
}


#: Replayed as ``reshape``: a view of the traced layout may not be one of the run-time layout
#: (a partition's results are contiguous whatever layout the trace gave them); ``reshape`` is
#: the same view whenever one exists, else a copy.
_AS_RESHAPE = set(overloads("view.default", "_unsafe_view.default"))
_RESHAPE = overloads("reshape.default")[0]


def _view_chain(node: torch.fx.Node) -> tuple[torch.fx.Node, list[torch.fx.Node]]:
    """The node under a chain of view ops ending at ``node``, and the chain (first op first)."""
    chain: list[torch.fx.Node] = []
    while node.op == "call_function" and node.target in VIEWS:
        source = node.args[0] if node.args else None
        if not isinstance(source, torch.fx.Node):
            break
        chain.append(node)
        node = source
    return node, chain[::-1]


def views_outside(module: torch.fx.GraphModule, call: torch.fx.Node) -> None:
    """Rebuild, in ``module`` after ``call`` (a fused partition returning a tuple read through
    ``getitem``), each output of the partition that is a view of one of its inputs or of
    another of its outputs, or a repeat of another output; drop those outputs from the
    partition's submodule."""
    sub = getattr(module, str(call.target))
    output = next(n for n in sub.graph.nodes if n.op == "output")
    results = output.args[0]
    reads = {cast(int, u.args[1]): u for u in call.users if u.target is operator.getitem}
    if not isinstance(results, list | tuple) or len(reads) != len(call.users):
        return
    outer = dict(zip((n for n in sub.graph.nodes if n.op == "placeholder"), call.args, strict=True))
    moved = _replayable(results, outer)
    remaining = [i for i in range(len(results)) if i not in moved]
    if not moved or not remaining:
        return
    graph = module.graph
    last = max(reads.values(), key=lambda n: list(graph.nodes).index(n), default=call)
    replacements: dict[int, torch.fx.Node] = {}
    with graph.inserting_before(last.next):  # in order, after every read of the outputs
        for i in sorted(moved):
            if i not in reads:
                continue
            source, chain = moved[i]
            value = _read(graph, call, reads, source)
            for view in chain:
                target = cast(Callable[..., Any], view.target)
                target = _RESHAPE if target in _AS_RESHAPE else target
                value = graph.call_function(target, (value, *view.args[1:]), dict(view.kwargs))
                value.meta = dict(view.meta)
            replacements[i] = value
    for i, value in replacements.items():
        reads[i].replace_all_uses_with(value)
        graph.erase_node(reads[i])
    for new, old in enumerate(remaining):
        if old in reads:
            reads[old].args = (call, new)
    output.args = (tuple(results[i] for i in remaining),)
    sub.graph.eliminate_dead_code()
    sub.recompile()


def _replayable(
    results: Any, outer: dict[torch.fx.Node, Any]
) -> dict[int, tuple[Any, list[torch.fx.Node]]]:
    """Output position → (its source: an outer value, or the position of the output it views
    or repeats; the view ops to replay on it), for each output that can be rebuilt outside."""
    moved: dict[int, tuple[Any, list[torch.fx.Node]]] = {}
    kept: dict[torch.fx.Node, int] = {}
    for i, node in enumerate(results):
        base, chain = _view_chain(node)
        if base.op == "placeholder" and chain:
            moved[i] = (outer[base], chain)
        elif node in kept:
            moved[i] = (kept[node], [])
        elif not chain:
            kept[node] = i
    for i, node in enumerate(results):  # views of outputs computed in the partition
        base, chain = _view_chain(node)
        if i not in moved and chain and base in kept:
            moved[i] = (kept[base], chain)
    return moved


def _read(
    graph: torch.fx.Graph, call: torch.fx.Node, reads: dict[int, torch.fx.Node], source: Any
) -> Any:
    """An outer value: a partition input as is; output ``source`` (an int) through its
    ``getitem``, made when the graph had none."""
    if not isinstance(source, int):
        return source
    found = reads.get(source)
    if found is None:
        found = reads[source] = graph.call_function(operator.getitem, (call, source))
    return found


def dense_order(meta: Any) -> tuple[int, ...] | None:
    """The axis order that makes a traced tensor ``meta`` contiguous (``meta.permute(order)``
    is), when its layout is a permutation of a dense one other than the identity; else None
    (contiguous, not dense, symbolic, or not a tensor)."""
    if not isinstance(meta, torch.Tensor) or meta.dim() < 2:
        return None
    shape, strides = meta.shape, meta.stride()
    if not all(isinstance(x, int) for x in (*shape, *strides)) or meta.is_contiguous():
        return None
    order = tuple(sorted(range(meta.dim()), key=lambda a: (-strides[a], a)))
    expected = 1
    for axis in reversed(order):
        if shape[axis] != 1 and strides[axis] != expected:
            return None
        expected *= shape[axis]
    if order == tuple(range(meta.dim())) or math.prod(shape) == 0:
        return None
    return order


def inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation undoing ``order``."""
    result = [0] * len(order)
    for position, axis in enumerate(order):
        result[axis] = position
    return tuple(result)
