"""Helpers for the PyTorch bridge tests (import after ``pytest.importorskip("torch")``)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

import opgraph as og
from opgraph.frontends.torch.graph import convert_graph, placeholder_value
from opgraph.frontends.torch.runtime import ExecutableModule
from opgraph.frontends.torch.types import as_numpy


def numpy_of(t: torch.Tensor) -> np.ndarray:
    return np.array(as_numpy(t.detach().contiguous()), order="C")  # ascontiguousarray makes 0-d 1-d


def one_node_function(op: Any, args: tuple, kwargs: dict) -> tuple[og.Function, list, Any]:
    """A Function converted from the single ATen call ``op(*args, **kwargs)`` (tensors become
    placeholders; metadata from running it eagerly), its numpy inputs and torch's result."""
    graph = torch.fx.Graph()
    inputs: list[tuple[torch.fx.Node, torch.Tensor]] = []

    def lift(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            node = graph.placeholder(f"in{len(inputs)}")
            node.meta["val"] = value
            inputs.append((node, value))
            return node
        if isinstance(value, list | tuple):
            return type(value)(lift(v) for v in value)
        return value

    call = graph.call_function(op, lift(tuple(args)), lift(dict(kwargs)))
    expected = op(*args, **kwargs)
    call.meta["val"] = expected
    if isinstance(expected, list | tuple):
        items = []
        for i, value in enumerate(expected):
            if value is None:  # an undefined tensor (no result)
                continue
            item = graph.call_function(operator.getitem, (call, i))
            item.meta["val"] = value
            items.append(item)
        graph.output(tuple(items))
    else:
        graph.output(call)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    bindings = {node: placeholder_value(t, node.name, node.name) for node, t in inputs}
    env = convert_graph(module, bindings)
    results = env[next(n for n in graph.nodes if n.op == "output")]
    results = list(results) if isinstance(results, tuple) else [results]
    params = [bindings[node] for node, _ in inputs]
    function = og.Function(results, params, name=str(op))
    return function, [numpy_of(t) for _, t in inputs], expected


def check_op(
    backend: og.Backend, op: Any, *args: Any, rtol: float = 1e-5, atol: float = 1e-6, **kwargs: Any
) -> None:
    """Convert ``op(*args, **kwargs)`` alone, run it on ``backend`` and compare with ATen."""
    function, arrays, expected = one_node_function(op, args, kwargs)
    got = backend.compile(function)(*arrays)
    wanted = [w for w in pytree.tree_leaves(expected) if w is not None]
    assert len(got) == len(wanted)
    for g, w in zip(got, wanted, strict=True):
        w = numpy_of(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind == "f" or w.dtype == og.bf16.dtype:
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
            )
        else:
            np.testing.assert_array_equal(g, w)


def assert_close(got: Any, wanted: Any, tol: float = 1e-5) -> None:
    """Every tensor leaf of ``got`` equals ``wanted``'s within ``tol`` (relative, with an
    absolute floor of ``tol`` for values near zero)."""
    got_leaves, wanted_leaves = pytree.tree_leaves(got), pytree.tree_leaves(wanted)
    assert len(got_leaves) == len(wanted_leaves)
    for g, w in zip(got_leaves, wanted_leaves, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)


class ExecutionCounter:
    """Counts ExecutableModule runs (how often a compiled graph really ran in opgraph)."""

    def __init__(self, monkeypatch: Any) -> None:
        self.calls = 0
        original = ExecutableModule.forward

        def counting(module: ExecutableModule, *args: Any) -> Any:
            self.calls += 1
            return original(module, *args)

        monkeypatch.setattr(ExecutableModule, "forward", counting)
