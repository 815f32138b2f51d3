"""Dynamo graphs with symbolic sizes, exported once with those sizes kept symbolic.

With ``torch.compile(dynamic=True)``, or after dynamo's automatic dynamic shapes marked a size
dynamic, the FX graph dynamo hands the backend has symbolic sizes: its tensor placeholders have
shapes like ``[s33, 16]``, and each symbol is also passed as a ``SymInt`` argument (``s33``).
:class:`DynamicSignature` reads that from the placeholders' metadata: which arguments are
sizes, which tensor axis each equals, and which axes are symbolic. :meth:`export` then lowers
the graph to core ATen once, with ``torch.export`` told that those axes are dynamic
(``Dim.AUTO``) and the size arguments computed from the tensors inside the exported program,
so the ATen graph has the symbolic shapes and ``sym_size`` arithmetic that the converters turn
into one symbolic opgraph Function.

With dynamic shapes dynamo also passes float module attributes (a layer norm's ``eps``) as
0-d tensors read with ``.item()``; such a value reaching a fused ATen op
(``_transformer_encoder_layer_fwd``) stops ``torch.export`` (a data-dependent guard), so the
export specialises these floats to their values (:attr:`DynamicSignature.floats`, part of the
backend's cache key).

A graph whose symbolic values are not tensor sizes (a ``SymFloat``, a ``SymInt`` that no tensor
axis equals, such as a dynamic Python int argument) has no DynamicSignature; the backend then
specialises per call signature.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch.export import Dim


def placeholder_meta(node: torch.fx.Node) -> Any:
    """The example value dynamo recorded for a placeholder."""
    return node.meta.get("example_value", node.meta.get("val"))


@dataclass(frozen=True)
class DynamicSignature:
    """How a dynamo graph with symbolic sizes is called.

    Attributes:
        count: the number of arguments.
        sizes: argument position of each ``SymInt`` size -> (tensor argument, axis) it equals.
        axes: tensor argument position -> its symbolic axes.
        floats: positions of the Python floats dynamo passes as 0-d tensors read only with
            ``.item()``; the export specialises them to their values.
    """

    count: int
    sizes: dict[int, tuple[int, int]]
    axes: dict[int, tuple[int, ...]]
    floats: frozenset[int] = frozenset()

    @staticmethod
    def of(gm: torch.fx.GraphModule) -> DynamicSignature | None:
        """The signature of ``gm``, or None when it has no symbolic size or has symbolic
        values that are not tensor sizes."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        metas = [placeholder_meta(n) for n in placeholders]
        axes: dict[int, tuple[int, ...]] = {}
        where: dict[Any, tuple[int, int]] = {}
        for index, meta in enumerate(metas):
            if isinstance(meta, torch.Tensor):
                found: list[tuple[int, Any]] = [
                    (k, d) for k, d in enumerate(meta.shape) if isinstance(d, torch.SymInt)
                ]
                if found:
                    axes[index] = tuple(k for k, _ in found)
                for k, d in found:
                    where.setdefault(d.node.expr, (index, k))
        sizes: dict[int, tuple[int, int]] = {}
        for index, meta in enumerate(metas):
            if isinstance(meta, torch.SymFloat | torch.SymBool):
                return None
            if isinstance(meta, torch.SymInt):
                expr = meta.node.expr
                if not isinstance(expr, sympy.Symbol) or expr not in where:
                    return None
                sizes[index] = where[expr]
        floats = frozenset(i for i, n in enumerate(placeholders) if _float_as_tensor(n))
        return DynamicSignature(len(metas), sizes, axes, floats) if axes else None

    def kept(self) -> list[int]:
        """Positions of the arguments the exported program takes (all but the sizes)."""
        return [i for i in range(self.count) if i not in self.sizes]

    def key(self, index: int, tensor: torch.Tensor) -> tuple[Any, ...]:
        """``tensor``'s shape with its symbolic axes left out (None); a specialised float's
        value."""
        if index in self.floats:
            return (float(tensor.item()),)
        symbolic = self.axes.get(index, ())
        return tuple(None if k in symbolic else d for k, d in enumerate(tensor.shape))

    def export(self, gm: torch.fx.GraphModule, args: Sequence[Any]) -> torch.export.ExportedProgram:
        """``gm`` in core ATen with the symbolic axes kept symbolic; the program takes the
        arguments at :meth:`kept` positions."""
        kept = self.kept()
        module = _SizesFromTensors(_specialise_floats(gm, self.floats, args), self, kept)
        specs = tuple({k: Dim.AUTO for k in self.axes[i]} if i in self.axes else None for i in kept)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch-internal deprecation noise
            program = torch.export.export(
                module, tuple(args[i] for i in kept), dynamic_shapes=(specs,), strict=False
            )
            return program.run_decompositions()


def _float_as_tensor(node: torch.fx.Node) -> bool:
    """A placeholder for a Python float that dynamo passes as a tensor, read with ``.item()``."""
    grapharg = node.meta.get("grapharg")
    return (
        bool(getattr(grapharg, "pass_arg_as_tensor", False))
        and bool(node.users)
        and all(u.op == "call_method" and u.target == "item" for u in node.users)
    )


def _specialise_floats(
    gm: torch.fx.GraphModule, floats: frozenset[int], args: Sequence[Any]
) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose ``.item()`` reads of the ``floats`` arguments are their values."""
    if not floats:
        return gm
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for index in floats:
        value = float(args[index].item())
        for item in list(placeholders[index].users):
            for user in list(item.users):
                user.replace_input_with(item, value)
            graph.erase_node(item)
    return torch.fx.GraphModule(gm, graph)


class _SizesFromTensors(torch.nn.Module):
    """Calls a dynamo graph with its size arguments read from the tensors they equal."""

    def __init__(
        self, gm: torch.fx.GraphModule, signature: DynamicSignature, kept: list[int]
    ) -> None:
        super().__init__()
        self.gm = gm
        self.signature = signature
        self.positions = kept

    def forward(self, *args: Any) -> Any:
        full: list[Any] = [None] * self.signature.count
        for position, arg in zip(self.positions, args, strict=True):
            full[position] = arg
        for position, (tensor, axis) in self.signature.sizes.items():
            full[position] = full[tensor].size(axis)
        return self.gm(*full)
