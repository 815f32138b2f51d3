"""Reverse mode: cotangents flow from the results back to the chosen values.

Each op's adjoint is its ``vjp`` (in the op's own module; most ops define the single-output
``adjoint`` hook that the default ``vjp`` calls). A framework-level op without its own adjoint
is differentiated through its decomposition. Cotangents of values used several times
are summed; integer and boolean values never carry a cotangent; an op marked not
differentiable that would need to pass a gradient raises ``NotDifferentiableError`` naming the
op and the path to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.core.errors import GraphError, NotDifferentiableError
from opgraph.core.function import Function
from opgraph.core.graph import topological_order
from opgraph.core.literals import Parameter, constant, parameter
from opgraph.core.node import Node, Output
from opgraph.core.tensor_type import TensorType
from opgraph.ops.elementwise import add
from opgraph.ops.movement import zeros_like
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.unbox_tuples import unbox_tuples

__all__ = ["backprop", "gradients", "zeros_like"]


def _is_float(value: Output) -> bool:
    t = value.type
    return isinstance(t, TensorType) and t.element_type.is_real


def gradients(
    results: Sequence[Output], wrt: Sequence[Output], seeds: Sequence[Output | None]
) -> list[Output]:
    """Cotangents of ``wrt`` for ``Σ seeds[i] · results[i]`` (None seeds contribute nothing).

    ``wrt`` may be any values of the graph; gradients stop at them (they are treated as leaves).
    Values of ``wrt`` that no result depends on get zeros.
    """
    nodes = topological_order(results)
    leaves = {w.node for w in wrt}
    relevant = _forward_reachable(nodes, leaves)
    cotangent: dict[Output, Output] = {}
    via: dict[Node, Node] = {}
    for result, seed in zip(results, seeds, strict=True):
        if seed is not None:
            _accumulate(cotangent, result, seed)
    for node in reversed(nodes):
        if node not in relevant or node in leaves:
            continue
        cts = tuple(cotangent.get(o) for o in node.outputs)
        if all(c is None for c in cts):
            continue
        for inp, ct in zip(node.inputs, _input_cotangents(node, cts, via), strict=True):
            if ct is None or inp.node not in relevant or not _is_float(inp):
                continue
            if ct.type != inp.type:
                raise GraphError(
                    f"{node.op.name}.vjp returned a cotangent of type {ct.type} for an input of "
                    f"type {inp.type} (a bug in the op's adjoint)"
                )
            _accumulate(cotangent, inp, ct)
            via.setdefault(inp.node, node)
    return [cotangent[w] if w in cotangent else zeros_like(w) for w in wrt]


def _forward_reachable(nodes: list[Node], leaves: set[Node]) -> set[Node]:
    relevant = set(leaves)
    for node in nodes:
        if any(i.node in relevant for i in node.inputs):
            relevant.add(node)
    return relevant


def _accumulate(cotangent: dict[Output, Output], value: Output, ct: Output) -> None:
    previous = cotangent.get(value)
    cotangent[value] = ct if previous is None else add(previous, ct)


def _input_cotangents(
    node: Node, cts: tuple[Output | None, ...], via: dict[Node, Node]
) -> Sequence[Output | None]:
    op = node.op
    if not op.differentiable:
        raise NotDifferentiableError(
            f"{op.name} (built at {node.provenance}) is not differentiable, but a gradient must "
            f"flow through it; path from the result: {_path(node, via)}"
        )
    if op.has_vjp():
        return op.vjp(node.inputs, node.outputs, cts)
    decomposed = op.decompose(*node.inputs) if op.has_decomposition() else None
    if decomposed is not None:
        outs = (decomposed,) if isinstance(decomposed, Output) else tuple(decomposed)
        float_inputs = [i for i in node.inputs if _is_float(i)]
        grads = iter(gradients(outs, float_inputs, cts))
        return [next(grads) if _is_float(i) else None for i in node.inputs]
    raise NotDifferentiableError(
        f"{op.name} (built at {node.provenance}) has no adjoint; path from the result: "
        f"{_path(node, via)}"
    )


def _path(node: Node, via: dict[Node, Node]) -> str:
    chain = [node]
    while chain[-1] in via and len(chain) < 64:
        chain.append(via[chain[-1]])
    return " <- ".join(f"{n.op.name} ({n.provenance})" for n in reversed(chain))


def backprop(
    fn: Function,
    wrt: Sequence[Output] | None = None,
    seed: Any = None,
    name: str | None = None,
) -> Function:
    """A Function computing ``fn``'s results and the gradients of its result(s).

    Args:
        fn: the Function to differentiate (tuples and calls are lowered first).
        wrt: the parameters to differentiate with respect to (floating-point ones; default: all
            floating-point parameters).
        seed: ``None`` for a single scalar result (the gradient of that result);
            ``"parameters"`` to add one seed Parameter per result (appended to the parameters),
            computing the gradient of ``Σ seed·result``; or a sequence of arrays, one per
            result, used as constant seeds.
        name: the new Function's name (default ``"<name>_backprop"``).

    Returns:
        A Function whose results are ``fn``'s results followed by one gradient per ``wrt``
        parameter, in order, and whose parameters are ``fn``'s (then the seeds, if requested).

    Raises:
        NotDifferentiableError: a ``wrt`` value is not a floating-point parameter of ``fn``, a
            seed is missing for a non-scalar result, or the gradient must pass through an op
            that has no adjoint.
    """
    lowered = unbox_tuples(inline_calls(fn))
    targets = _targets(lowered, wrt)
    seeds, extra = _seeds(lowered, seed)
    grads = gradients(lowered.results, targets, seeds)
    return Function(
        list(lowered.results) + grads,
        list(lowered.parameters) + extra,
        name=name if name is not None else f"{fn.name}_backprop",
    )


def _targets(fn: Function, wrt: Sequence[Output] | None) -> list[Output]:
    if wrt is None:
        return [p for p in fn.parameters if _is_float(p)]
    declared = set(fn.parameters)
    for i, w in enumerate(wrt):
        if w not in declared or not isinstance(w.node.op, Parameter):
            raise NotDifferentiableError(f"backprop: wrt[{i}] is not a parameter of {fn.name}")
        if not _is_float(w):
            raise NotDifferentiableError(
                f"backprop: wrt[{i}] has element type {w.element_type.name}; only floating-point "
                "parameters have gradients"
            )
    return list(wrt)


def _seeds(fn: Function, seed: Any) -> tuple[list[Output | None], list[Output]]:
    if seed is None:
        if len(fn.results) != 1 or fn.results[0].shape != () or not _is_float(fn.results[0]):
            raise NotDifferentiableError(
                f"backprop: {fn.name} needs a seed: without one it must have exactly one scalar "
                f"floating-point result, it has {', '.join(str(r.type) for r in fn.results)}"
            )
        return [constant(1, fn.results[0].element_type)], []
    if isinstance(seed, str):
        if seed != "parameters":
            raise NotDifferentiableError(
                f"backprop: seed must be None, 'parameters' or arrays, got {seed!r}"
            )
        params = [
            parameter(r.element_type, r.shape, name=f"seed{i}") if _is_float(r) else None
            for i, r in enumerate(fn.results)
        ]
        return list(params), [p for p in params if p is not None]
    values = list(seed)
    if len(values) != len(fn.results):
        raise NotDifferentiableError(f"backprop: {len(values)} seeds for {len(fn.results)} results")
    out: list[Output | None] = []
    for i, (value, result) in enumerate(zip(values, fn.results, strict=True)):
        if value is None:
            out.append(None)
            continue
        array = np.asarray(value, dtype=result.element_type.dtype)
        if array.shape != result.shape:
            raise NotDifferentiableError(
                f"backprop: seed {i} has shape {list(array.shape)}, result {i} is {result.type}"
            )
        out.append(constant(array, result.element_type))
    return out, []
