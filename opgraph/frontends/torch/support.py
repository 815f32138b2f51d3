"""Which ATen nodes opgraph takes: decided once per node, by one trial conversion.

A node is supported when a converter is registered for its overload, every tensor it reads or
makes has an opgraph element type, and converting it on its own (its inputs standing in as
Parameters typed from FX metadata) succeeds, so a converter that refuses some arguments
(boolean-mask indexing, training-mode dropout…) sends just that node to eager PyTorch.

The trial conversion is kept: compiling a partition instantiates each node's converted
fragment on the partition's real values (rebuilding its opgraph nodes, which re-checks their
types) instead of running the converter again. :class:`Support` is the one place that decides;
the importer's static check (:func:`unsupported_ops`), the partitioner and the backend's
``fallback="eager"/"error"`` modes all ask it.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.passes.operator_support import OperatorSupport

from opgraph.core.errors import ConversionError
from opgraph.core.graph import rebuild_nodes, topological_order
from opgraph.core.node import Output
from opgraph.frontends.torch.graph import (
    Value,
    convert_node,
    is_size_node,
    label,
    placeholder_value,
)
from opgraph.frontends.torch.promotion import Scalar
from opgraph.frontends.torch.registry import lookup, name_of
from opgraph.frontends.torch.types import supported_dtype


def static_refusal(node: torch.fx.Node) -> str | None:
    """Why ``node`` cannot be converted whatever its arguments (None when it may be)."""
    if lookup(node.target) is None:
        return "no converter"
    if not dtypes_supported(node):
        return f"a dtype opgraph lacks ({_dtypes(node)})"
    return None


def unsupported_ops(graph: torch.fx.Graph) -> dict[str, list[str]]:
    """Overload name → node names, for every call without a converter or with a dtype opgraph
    lacks (complex, fp8…)."""
    missing: dict[str, list[str]] = defaultdict(list)
    for node in graph.nodes:
        if node.op != "call_function" or is_size_node(node):
            continue
        if lookup(node.target) is None:
            missing[name_of(node.target)].append(node.name)
        elif not dtypes_supported(node):
            missing[f"{name_of(node.target)} on {_dtypes(node)}"].append(node.name)
    return dict(missing)


def dtypes_supported(node: torch.fx.Node) -> bool:
    """True when every tensor the node reads or makes has an opgraph element type."""
    return all(supported_dtype(t.dtype) for t in _tensors(_metas(node)))


@dataclass(frozen=True)
class Fragment:
    """A node converted on its own: its inputs stood in by Parameters (``inputs``, one value
    per input node) and what the converter made from them (``value``)."""

    target: Any
    inputs: dict[str, Value]
    value: Value


class Support(OperatorSupport):
    """The support decision for the nodes of one ATen graph, with their trial conversions.

    Verdicts and fragments are keyed by node name (unique in a graph, and kept when the
    partitioner copies nodes into a fused submodule).
    """

    def __init__(self) -> None:
        super().__init__()
        self.reasons: dict[str, str] = {}
        self._verdicts: dict[str, str | None] = {}
        self._fragments: dict[str, Fragment] = {}

    def is_node_supported(self, submodules: Mapping[str, Any], node: torch.fx.Node) -> bool:
        return node.op == "call_function" and self.refusal(node) is None

    def refusal(self, node: torch.fx.Node) -> str | None:
        """Why opgraph cannot take ``node`` (None when it can); decided once per node.

        A size computation (``sym_size``, arithmetic on sizes) is left to PyTorch without a
        warning: it is Python arithmetic on ints, and the partitions that use its result
        read it as the symbolic dimension its metadata records.
        """
        if is_size_node(node):
            return "a size computation (Python ints)"
        if node.name not in self._verdicts:
            reason = self._decide(node)
            self._verdicts[node.name] = reason
            if reason is not None and node.target is not operator.getitem:
                self.reasons.setdefault(name_of(node.target), reason)
        return self._verdicts[node.name]

    def refused(self, graph: torch.fx.Graph) -> dict[str, str]:
        """Overload name → reason, for every refused call of ``graph``."""
        for node in graph.nodes:
            if node.op == "call_function":
                self.refusal(node)
        return dict(self.reasons)

    def _decide(self, node: torch.fx.Node) -> str | None:
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            producer = node.args[0]
            if producer.op != "call_function":
                return "an item of a non-ATen value"
            return None if self.refusal(producer) is None else "its producer runs in PyTorch"
        reason = static_refusal(node)
        if reason is not None:
            return reason
        where = label(node)
        try:
            inputs = {
                n.name: placeholder_value(n.meta.get("val"), n.name, where)
                for n in node.all_input_nodes
            }
            env = {n: inputs[n.name] for n in node.all_input_nodes}
            value = convert_node(node, env)
        except ConversionError as error:
            return str(error).removeprefix(where + ": ")
        self._fragments[node.name] = Fragment(node.target, inputs, value)
        return None

    def convert(self, node: torch.fx.Node, env: Mapping[torch.fx.Node, Value]) -> Value:
        """``node``'s value on ``env``: its trial fragment rebuilt on the real inputs (the
        converter runs again only when no fragment fits, e.g. a Python number where the trial
        had a tensor)."""
        fragment = self._fragments.get(node.name)
        if fragment is not None and fragment.target is node.target:
            initial: dict[Output, Output] = {}
            if all(
                _bind(fragment.inputs.get(n.name), env[n], initial) for n in node.all_input_nodes
            ):
                return _instantiate(fragment.value, initial)
        return convert_node(node, env)


def _bind(stand_in: Value, real: Value, initial: dict[Output, Output]) -> bool:
    """Map the Parameters of ``stand_in`` to ``real``'s values; False when they differ in
    kind, type or structure."""
    if isinstance(stand_in, Scalar):
        stand_in = stand_in.value
        real = real.value if isinstance(real, Scalar) else None
    if isinstance(stand_in, Output):
        if not isinstance(real, Output) or real.type != stand_in.type:
            return False
        initial[stand_in] = real
        return True
    if isinstance(stand_in, tuple):
        return (
            isinstance(real, tuple)
            and len(real) == len(stand_in)
            and all(_bind(s, r, initial) for s, r in zip(stand_in, real, strict=True))
        )
    return type(stand_in) is type(real) and stand_in == real


def _instantiate(value: Value, initial: dict[Output, Output]) -> Value:
    outputs = [v for v in _flat(value) if isinstance(v, Output)]
    stand_ins = {o.node for o in initial}
    body = [n for n in topological_order(outputs) if n not in stand_ins]
    mapping = rebuild_nodes(body, initial=dict(initial))
    return _remap(value, mapping)


def _flat(value: Value) -> list[Any]:
    if isinstance(value, Scalar):
        return [value.value]
    if isinstance(value, tuple | list):
        return [x for v in value for x in _flat(v)]
    return [value]


def _remap(value: Value, mapping: Mapping[Output, Output]) -> Value:
    if isinstance(value, Output):
        return mapping.get(value, value)
    if isinstance(value, Scalar):
        return Scalar(_remap(value.value, mapping), value.kind)
    if isinstance(value, tuple | list):
        return type(value)(_remap(v, mapping) for v in value)
    return value


def _metas(node: torch.fx.Node) -> list[Any]:
    return [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]


def _dtypes(node: torch.fx.Node) -> str:
    return ", ".join(sorted({str(t.dtype) for t in _tensors(_metas(node))}))


def _tensors(values: Any) -> list[torch.Tensor]:
    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, list | tuple):
        return [t for v in values for t in _tensors(v)]
    return []
