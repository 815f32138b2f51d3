"""Split an ATen graph into opgraph partitions and eager PyTorch nodes.

:class:`~opgraph.frontends.torch.support.Support` decides which nodes opgraph takes (one trial
conversion per node); ``CapabilityBasedPartitioner`` groups supported nodes into maximal
acyclic partitions; each becomes a submodule that runs one compiled Executable, built from
the nodes' trial conversions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition

from opgraph import ops
from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.frontends.torch.context import tensor_constant
from opgraph.frontends.torch.converters.common import overloads
from opgraph.frontends.torch.graph import Value, convert_graph, placeholder_value
from opgraph.frontends.torch.layouts import dense_order, inverse, views_outside
from opgraph.frontends.torch.promotion import Scalar
from opgraph.frontends.torch.runtime import ExecutableModule, compile_function
from opgraph.frontends.torch.support import Support
from opgraph.frontends.torch.symbols import example_shape
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


def partition(
    module: torch.fx.GraphModule,
    constants: Mapping[str, Any],
    backend: Backend,
    support: Support | None = None,
) -> PartitionResult:
    """Fuse the supported nodes of ``module`` into compiled opgraph submodules.

    Args:
        module: an ATen-level GraphModule (modified in place).
        constants: placeholder name → value, for the placeholders whose values are fixed for
            this compilation (frozen weights): partitions fold them in as Constants. (Names,
            not nodes: fusing rebuilds the graph's nodes.)
        backend: the opgraph backend that compiles each partition.
        support: the support decisions for ``module``'s nodes (made here when not given).
    """
    support = support or Support()
    partitioner = CapabilityBasedPartitioner(module, support, allows_single_node_partition=True)
    partitions = [p for p in partitioner.propose_partitions() if not _trivial(p)]
    result = PartitionResult(module, dict(support.reasons))
    if not partitions:
        return result
    fused = partitioner.fuse_partitions(partitions)
    result.module = fused
    for node in list(fused.graph.nodes):
        if node.op == "call_module" and str(node.target).startswith("fused_"):
            views_outside(fused, node)
            submodule = getattr(fused, str(node.target))
            try:
                compiled = compile_partition(node, submodule, constants, backend, support)
            except Exception as error:  # a backend bug too: keep that partition eager, say why
                result.eager[f"partition {node.target}"] = f"{type(error).__name__}: {error}"
                continue
            setattr(fused, str(node.target), compiled)
            result.converted += sum(1 for n in submodule.graph.nodes if n.op == "call_function")
    fused.recompile()
    return result


def compile_graph(
    module: torch.fx.GraphModule,
    constants: Mapping[str, Any],
    backend: Backend,
    fallback: str,
    warn: Callable[[str], None],
) -> Callable[..., Any]:
    """``module`` as a callable running its supported partitions in opgraph.

    Args:
        module: an ATen-level GraphModule (modified in place).
        constants: see :func:`partition`.
        backend: the opgraph backend.
        fallback: "partition" (unsupported nodes run in PyTorch), "eager" (any unsupported
            node sends the whole graph to PyTorch) or "error" (raise ConversionError).
        warn: reports what runs in eager PyTorch.
    """
    support = Support()
    refused = support.refused(module.graph) if fallback != "partition" else {}
    if refused:
        if fallback == "error":
            raise ConversionError(f"opgraph cannot convert {listing(refused)}")
        warn(f"{listing(refused)} are not supported; the whole graph runs in eager PyTorch")
        return module
    result = partition(module, constants, backend, support)
    if result.eager:
        warn(f"{listing(result.eager)} run in eager PyTorch")
    return result.module


def listing(refused: Mapping[str, str]) -> str:
    """``2 op(s) (aten.a.default: no converter; aten.b.default: …)``."""
    reasons = "; ".join(f"{op}: {why}" for op, why in sorted(refused.items()))
    return f"{len(refused)} op(s) ({reasons})"


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
    support: Support | None = None,
) -> ExecutableModule:
    """Convert and compile one fused submodule called by ``call`` (from ``support``'s trial
    conversions when given)."""
    placeholders = [n for n in submodule.graph.nodes if n.op == "placeholder"]
    bindings: dict[torch.fx.Node, Value] = {}
    params: list[Output] = []
    slots: list[int | None] = []
    orders: list[tuple[int, ...] | None] = []  # inputs passed permuted to a dense layout
    examples: list[tuple[int, ...]] = []  # the traced shape of each parameter
    for placeholder, outer in zip(placeholders, call.args, strict=True):
        fixed = _fixed(outer, constants)
        if isinstance(fixed, torch.Tensor):
            bindings[placeholder] = tensor_constant(fixed, f"input {outer}")
            slots.append(None)
            orders.append(None)
            continue
        meta = placeholder.meta.get("val", getattr(outer, "meta", {}).get("val"))
        order = dense_order(meta)
        orders.append(order)
        if order is not None:
            meta = meta.permute(order)
        value = placeholder_value(meta, placeholder.name, f"input {placeholder.name!r}")
        if isinstance(value, tuple):
            raise ConversionError(f"partition input {placeholder.name!r} is a tuple")
        runtime = value.value if isinstance(value, Scalar) else value
        slots.append(len(params) if isinstance(runtime, Output) else None)
        if isinstance(runtime, Output):
            params.append(runtime)
            examples.append(example_shape(meta))
        if order is not None and isinstance(value, Output):
            value = ops.transpose(value, inverse(order))
        bindings[placeholder] = value
    env = convert_graph(submodule, bindings, support.convert if support else None)
    output = env[next(n for n in submodule.graph.nodes if n.op == "output")]
    single = not isinstance(output, list | tuple)
    results = [output] if single else list(output)
    if not all(isinstance(r, Output) for r in results):
        raise ConversionError(f"{call.target}: a partition output is not a tensor")
    function = Function(results, params, name=str(call.target))
    executable = compile_function(backend, function, examples)
    return ExecutableModule(backend, executable, slots, single, orders)
