"""Split an ATen graph into opgraph partitions and eager PyTorch nodes.

A node is supported when it has a converter, its dtypes exist in opgraph, and converting it on
its own (inputs standing in as Parameters typed from FX metadata) succeeds: so a converter
that refuses some arguments (training-mode batch norm, boolean-mask indexing…) sends just that
node to eager PyTorch. ``CapabilityBasedPartitioner`` groups supported nodes into maximal
acyclic partitions; each becomes a submodule that runs one compiled Executable.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupport

from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.frontends.torch.context import tensor_constant
from opgraph.frontends.torch.converters.common import overloads
from opgraph.frontends.torch.graph import (
    Value,
    convert_graph,
    convert_node,
    dtypes_supported,
    label,
    placeholder_value,
)
from opgraph.frontends.torch.promotion import Scalar
from opgraph.frontends.torch.registry import lookup, name_of
from opgraph.frontends.torch.runtime import ExecutableModule
from opgraph.runtime.backend import Backend

#: Partitions made only of these run eagerly: torch does them as views, opgraph would copy.
_TRIVIAL = {
    operator.getitem,
    *overloads(
        "view.default",
        "_unsafe_view.default",
        "reshape.default",
        "permute.default",
        "expand.default",
        "slice.Tensor",
        "select.int",
        "squeeze.dim",
        "squeeze.dims",
        "squeeze.default",
        "unsqueeze.default",
        "t.default",
        "transpose.int",
        "clone.default",
        "alias.default",
        "detach.default",
        "lift_fresh_copy.default",
        "_to_copy.default",
        "_assert_tensor_metadata.default",
    ),
}


@dataclass
class PartitionResult:
    """The partitioned module and what stayed in eager PyTorch.

    Attributes:
        module: the GraphModule whose ``fused_*`` submodules run opgraph Executables.
        eager: overload name → why it was not converted, for each op left to PyTorch.
        converted: how many ATen nodes run in opgraph.
    """

    module: torch.fx.GraphModule
    eager: dict[str, str] = field(default_factory=dict)
    converted: int = 0


class _Support(OperatorSupport):
    """Which nodes opgraph takes, remembering why the others were refused."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: dict[str, str] = {}
        self._memo: dict[torch.fx.Node, bool] = {}

    def is_node_supported(self, submodules: Mapping[str, Any], node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node not in self._memo:
            if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
                self._memo[node] = self.is_node_supported(submodules, node.args[0])
            else:
                reason = refusal(node)
                if reason is not None:
                    self.reasons.setdefault(name_of(node.target), reason)
                self._memo[node] = reason is None
        return self._memo[node]


def refusal(node: torch.fx.Node) -> str | None:
    """Why opgraph cannot take ``node`` (None when it can)."""
    if lookup(node.target) is None:
        return "no converter"
    if not dtypes_supported(node):
        return "a dtype opgraph lacks"
    try:
        env = {
            n: placeholder_value(n.meta.get("val"), n.name, label(node))
            for n in node.all_input_nodes
        }
        convert_node(node, env)
    except ConversionError as error:
        return str(error).removeprefix(label(node) + ": ")
    return None


def partition(
    module: torch.fx.GraphModule,
    constants: Mapping[str, Any],
    backend: Backend,
) -> PartitionResult:
    """Fuse the supported nodes of ``module`` into compiled opgraph submodules.

    Args:
        module: an ATen-level GraphModule (modified in place).
        constants: placeholder name → value, for the placeholders whose values are fixed for
            this compilation (frozen weights): partitions fold them in as Constants. (Names,
            not nodes: fusing rebuilds the graph's nodes.)
        backend: the opgraph backend that compiles each partition.
    """
    support = _Support()
    partitioner = CapabilityBasedPartitioner(module, support, allows_single_node_partition=True)
    partitions = [p for p in partitioner.propose_partitions() if not _trivial(p)]
    result = PartitionResult(module, support.reasons)
    if not partitions:
        return result
    fused = partitioner.fuse_partitions(partitions)
    result.module = fused
    for node in list(fused.graph.nodes):
        if node.op == "call_module" and str(node.target).startswith("fused_"):
            submodule = getattr(fused, str(node.target))
            try:
                compiled = compile_partition(node, submodule, constants, backend)
            except Exception as error:  # a backend bug too: keep that partition eager, say why
                result.eager[f"partition {node.target}"] = f"{type(error).__name__}: {error}"
                continue
            setattr(fused, str(node.target), compiled)
            result.converted += sum(1 for n in submodule.graph.nodes if n.op == "call_function")
    fused.recompile()
    return result


def _fixed(outer: Any, constants: Mapping[str, Any]) -> Any:
    """The fixed value feeding a partition input: a frozen placeholder's, or a literal."""
    if not isinstance(outer, torch.fx.Node):
        return outer
    return constants.get(outer.name) if outer.op == "placeholder" else None


def _trivial(part: Partition) -> bool:
    return all(n.target in _TRIVIAL for n in part.nodes)


def compile_partition(
    call: torch.fx.Node,
    submodule: torch.fx.GraphModule,
    constants: Mapping[str, Any],
    backend: Backend,
) -> ExecutableModule:
    """Convert and compile one fused submodule called by ``call``."""
    placeholders = [n for n in submodule.graph.nodes if n.op == "placeholder"]
    bindings: dict[torch.fx.Node, Value] = {}
    params: list[Output] = []
    slots: list[int | None] = []
    for placeholder, outer in zip(placeholders, call.args, strict=True):
        fixed = _fixed(outer, constants)
        if isinstance(fixed, torch.Tensor):
            bindings[placeholder] = tensor_constant(fixed, f"input {outer}")
            slots.append(None)
            continue
        meta = placeholder.meta.get("val", getattr(outer, "meta", {}).get("val"))
        value = placeholder_value(meta, placeholder.name, f"input {placeholder.name!r}")
        if isinstance(value, tuple):
            raise ConversionError(f"partition input {placeholder.name!r} is a tuple")
        bindings[placeholder] = value
        runtime = value.value if isinstance(value, Scalar) else value
        slots.append(len(params) if isinstance(runtime, Output) else None)
        if isinstance(runtime, Output):
            params.append(runtime)
    env = convert_graph(submodule, bindings)
    output = env[next(n for n in submodule.graph.nodes if n.op == "output")]
    single = not isinstance(output, list | tuple)
    results = [output] if single else list(output)
    if not all(isinstance(r, Output) for r in results):
        raise ConversionError(f"{call.target}: a partition output is not a tensor")
    function = Function(results, params, name=str(call.target))
    return ExecutableModule(backend, backend.compile(function), slots, single)
