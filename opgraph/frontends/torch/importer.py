"""torch.export ExportedProgram (core ATen) -> opgraph Function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind

from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.frontends.torch.context import tensor_constant
from opgraph.frontends.torch.graph import Value, convert_graph, placeholder_value
from opgraph.frontends.torch.registry import lookup
from opgraph.frontends.torch.support import unsupported_ops
from opgraph.frontends.torch.symbols import symbol_ranges

_WEIGHTS = (InputKind.PARAMETER, InputKind.BUFFER)
_MUTATIONS = (
    OutputKind.BUFFER_MUTATION,
    OutputKind.USER_INPUT_MUTATION,
    OutputKind.PARAMETER_MUTATION,
)


def import_exported(
    exported_program: torch.export.ExportedProgram,
    params_as_parameters: bool = False,
    *,
    keep_mutations: bool = False,
    name: str = "torch_exported",
) -> Function:
    """Convert a ``torch.export`` program in core ATen to a Function.

    Run ``exported_program.run_decompositions()`` first: converters are keyed by core ATen
    overloads (plus a few common non-core ones).

    Args:
        exported_program: the ExportedProgram. Sizes exported as dynamic
            (``dynamic_shapes={"x": {0: Dim("batch", max=64)}}``) become symbolic dimensions
            named by their ``Dim`` (``og.dim("batch", max=64)``, bounded by the program's
            ``range_constraints``): one Function for every batch size.
        params_as_parameters: make parameters and buffers Parameters of the Function (named
            by their state-dict key, after the user inputs, in the program's order) instead
            of Constants; for training.
        keep_mutations: a program that updates buffers or inputs in place (batch norm in
            training mode, ``x.add_(1)``) is refused unless this is set; then the new values
            are extra results after the user outputs, in the program's order.
        name: the Function's name.

    Returns:
        The Function: one Parameter per tensor user input in order (Python scalar inputs are
        specialised to their example values), results in user-output order.

    Raises:
        ConversionError: unsupported overloads (all of them listed at once), dtypes opgraph
            lacks, a symbolic size an op needs static, non-tensor outputs or unrequested
            mutations.

    Example:
        >>> ep = torch.export.export(model.eval(), (x,)).run_decompositions()
        >>> fn = import_exported(ep)
        >>> (y,) = og.backend("INTERPRETER").compile(fn)(x.numpy())
    """
    return convert_program(exported_program, params_as_parameters, keep_mutations, name).function


@dataclass
class ConvertedProgram:
    """A converted ExportedProgram and what its results mean.

    Attributes:
        function: the Function (user outputs first, then mutated values when kept).
        user_outputs: how many results are user outputs.
        mutated_inputs: for each kept mutation, the index of the user input it updates, or
            None for a buffer or parameter.
    """

    function: Function
    user_outputs: int
    mutated_inputs: list[int | None] = field(default_factory=list)


def convert_program(
    exported_program: torch.export.ExportedProgram,
    params_as_parameters: bool = False,
    keep_mutations: bool = False,
    name: str = "torch_exported",
) -> ConvertedProgram:
    """:func:`import_exported` with the details the torch.compile backend needs."""
    ep = exported_program
    if not keep_mutations:
        _refuse_mutations(ep)
    check_supported(ep.graph)
    module = ep.graph_module
    with symbol_ranges(ep.range_constraints):
        bindings, params = _bind_inputs(ep, params_as_parameters)
        env = convert_graph(module, bindings)
    output_node = next(n for n in module.graph.nodes if n.op == "output")
    users, mutations, mutated = _split_outputs(ep, list(env[output_node]))
    results = [_tensor_result(v, i) for i, v in enumerate(users + mutations)]
    return ConvertedProgram(Function(results, params, name=name), len(users), mutated)


def check_supported(graph: torch.fx.Graph) -> None:
    """Raise one ConversionError listing every unsupported overload of ``graph``."""
    missing = unsupported_ops(graph)
    if not missing:
        return
    parts = [
        f"{op} (node{'s' if len(nodes) > 1 else ''} {', '.join(nodes[:3])}"
        + (", …" if len(nodes) > 3 else "")
        + ")"
        for op, nodes in sorted(missing.items())
    ]
    hint = ""
    if any(_non_core(n.target) for n in graph.nodes if n.op == "call_function"):
        hint = " (some are not core ATen: call exported_program.run_decompositions() first)"
    raise ConversionError(
        f"the program uses {len(missing)} unsupported ATen overload(s){hint}: " + "; ".join(parts)
    )


def _non_core(target: Any) -> bool:
    tags = getattr(target, "tags", None)
    return tags is not None and lookup(target) is None and torch.Tag.core not in tags


def _bind_inputs(
    ep: torch.export.ExportedProgram, params_as_parameters: bool
) -> tuple[dict[torch.fx.Node, Value], list[Output]]:
    placeholders = [n for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    specs = ep.graph_signature.input_specs
    if len(placeholders) != len(specs):
        raise ConversionError(
            f"the program has {len(placeholders)} placeholders but {len(specs)} input specs"
        )
    bindings: dict[torch.fx.Node, Value] = {}
    users: list[Output] = []
    weights: list[Output] = []
    for node, spec in zip(placeholders, specs, strict=True):
        where = f"input {node.name!r}"
        if spec.kind == InputKind.USER_INPUT:
            value = placeholder_value(node.meta.get("val"), node.name, where)
            if isinstance(value, tuple):
                raise ConversionError(f"{where}: only tensor and scalar inputs are supported")
            if isinstance(value, Output):
                users.append(value)
            bindings[node] = value
        elif spec.kind in _WEIGHTS and params_as_parameters:
            value = placeholder_value(node.meta.get("val"), str(spec.target), where)
            weights.append(value)
            bindings[node] = value
        elif spec.kind in (*_WEIGHTS, InputKind.CONSTANT_TENSOR):
            bindings[node] = tensor_constant(lifted_tensor(ep, str(spec.target), where), where)
        else:
            raise ConversionError(f"{where}: {spec.kind.name} inputs are not supported")
    return bindings, users + weights


def lifted_tensor(ep: torch.export.ExportedProgram, target: str, where: str) -> torch.Tensor:
    """The parameter, buffer or constant tensor ``target`` that ``ep`` lifted to an input."""
    if target in ep.state_dict:
        value = ep.state_dict[target]
    elif target in ep.constants:
        value = ep.constants[target]
    else:
        raise ConversionError(f"{where}: no value for {target!r} in the program")
    if not isinstance(value, torch.Tensor):
        raise ConversionError(f"{where}: {target!r} is a {type(value).__name__}, not a tensor")
    return value


def _refuse_mutations(ep: torch.export.ExportedProgram) -> None:
    updated = [str(s.target) for s in ep.graph_signature.output_specs if s.kind in _MUTATIONS]
    if updated:
        raise ConversionError(
            f"the program updates {', '.join(updated)} in place (batch norm in training mode? "
            "call model.eval() before exporting); pass keep_mutations=True to get the new "
            "values as extra results"
        )


def _split_outputs(
    ep: torch.export.ExportedProgram, values: list[Value]
) -> tuple[list[Value], list[Value], list[int | None]]:
    signature = ep.graph_signature
    user_inputs = [str(s.arg.name) for s in signature.input_specs if s.kind == InputKind.USER_INPUT]
    users: list[Value] = []
    mutations: list[Value] = []
    mutated: list[int | None] = []
    for spec, value in zip(signature.output_specs, values, strict=True):
        if spec.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT):
            users.append(value)
        elif spec.kind in _MUTATIONS:
            mutations.append(value)
            target = str(spec.target)
            mutated.append(user_inputs.index(target) if target in user_inputs else None)
        else:
            raise ConversionError(f"output {spec.arg}: {spec.kind.name} outputs are not supported")
    return users, mutations, mutated


def _tensor_result(value: Value, index: int) -> Output:
    if not isinstance(value, Output):
        raise ConversionError(
            f"output {index} is a {type(value).__name__}; only tensor outputs are supported"
        )
    return value
