"""Function: results and parameters grouped into a callable unit that backends compile."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from opgraph.core.errors import GraphError
from opgraph.core.graph import copy_node, rebuild_nodes, topological_order
from opgraph.core.literals import Parameter
from opgraph.core.node import Node, Output
from opgraph.core.printing import format_function
from opgraph.core.tensor_type import TensorType, ValueType, flatten_types

_function_ids = itertools.count()


class Function:
    """A graph with an ordered list of parameters and of results.

    Args:
        results: the result values (an Output or a sequence of them; tuple-typed results are
            flattened at call time).
        parameters: the Parameter Outputs, in argument order.
        name: optional name; defaults to ``"Function_<n>"``.

    Raises:
        GraphError: a result is not an Output, a parameter is not a Parameter, a parameter is
            listed twice, or a Parameter reachable from the results is not listed.
    """

    __slots__ = ("_index", "name", "nodes", "parameters", "results")

    results: tuple[Output, ...]
    parameters: tuple[Output, ...]
    name: str
    nodes: tuple[Node, ...]

    def __init__(
        self,
        results: Output | Iterable[Output],
        parameters: Iterable[Output] = (),
        name: str | None = None,
    ) -> None:
        result_tuple = _as_outputs(results, "result")
        parameter_tuple = _as_outputs(parameters, "parameter")
        fn_name = name if name is not None else f"Function_{next(_function_ids)}"
        _check_parameters(parameter_tuple, fn_name)
        nodes = topological_order(result_tuple, first=[p.node for p in parameter_tuple])
        _check_reachable_parameters(nodes, parameter_tuple, fn_name)
        setter = object.__setattr__
        setter(self, "results", result_tuple)
        setter(self, "parameters", parameter_tuple)
        setter(self, "name", fn_name)
        setter(self, "nodes", tuple(nodes))
        setter(self, "_index", None)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Function is immutable; passes return new Functions")

    # ------------------------------------------------------------------------ types
    @property
    def parameter_types(self) -> tuple[TensorType, ...]:
        return tuple(p.tensor_type for p in self.parameters)

    @property
    def result_types(self) -> tuple[ValueType, ...]:
        return tuple(r.type for r in self.results)

    @property
    def flat_result_types(self) -> tuple[TensorType, ...]:
        """Result types with tuples flattened, as a call returns them."""
        return flatten_types(self.result_types)

    @property
    def ops(self) -> tuple[Node, ...]:
        """Nodes that are not Parameters, in topological order."""
        return tuple(n for n in self.nodes if not isinstance(n.op, Parameter))

    # ---------------------------------------------------------------------- copying
    def clone(self, name: str | None = None) -> Function:
        """A deep copy: every node rebuilt (and re-validated), names and provenance kept."""
        mapping = rebuild_nodes(self.nodes, lambda node, inputs: copy_node(node, inputs).outputs)
        return self.with_outputs(mapping, name=name)

    def with_outputs(self, mapping: dict[Output, Output], name: str | None = None) -> Function:
        """This Function with results and parameters mapped through ``mapping``."""
        return Function(
            [mapping.get(r, r) for r in self.results],
            [mapping.get(p, p) for p in self.parameters],
            name=name if name is not None else self.name,
        )

    # ----------------------------------------------------------------------- printing
    def __str__(self) -> str:
        return format_function(self)

    def __repr__(self) -> str:
        params = ", ".join(str(t) for t in self.parameter_types)
        results = ", ".join(str(t) for t in self.result_types)
        return f"<Function {self.name}({params}) -> ({results}), {len(self.nodes)} nodes>"

    def describe_attribute(self) -> str:
        return f"@{self.name}"


def _as_outputs(values: Output | Iterable[Output], what: str) -> tuple[Output, ...]:
    if isinstance(values, Output):
        return (values,)
    if isinstance(values, Node):
        raise GraphError(f"Function {what}s must be Outputs, got a Node; use node.outputs[i]")
    try:
        items = tuple(values)
    except TypeError:
        raise GraphError(
            f"Function {what}s must be an Output or a sequence of Outputs, "
            f"got {type(values).__name__}"
        ) from None
    for i, value in enumerate(items):
        if not isinstance(value, Output):
            raise GraphError(f"Function {what} {i} must be an Output, got {type(value).__name__}")
    return items


def _check_parameters(parameters: tuple[Output, ...], fn_name: str) -> None:
    seen: dict[Node, int] = {}
    for i, p in enumerate(parameters):
        if not isinstance(p.node.op, Parameter):
            raise GraphError(
                f"Function {fn_name}: parameter {i} is {p.node.op.name} (built at "
                f"{p.node.provenance}), not a Parameter"
            )
        if p.node in seen:
            raise GraphError(
                f"Function {fn_name}: parameter {_label(p)} is listed twice "
                f"(positions {seen[p.node]} and {i})"
            )
        seen[p.node] = i


def _check_reachable_parameters(
    nodes: list[Node], parameters: tuple[Output, ...], fn_name: str
) -> None:
    declared = {p.node for p in parameters}
    missing = [n for n in nodes if isinstance(n.op, Parameter) and n not in declared]
    if missing:
        names = ", ".join(_label(n.outputs[0]) for n in missing)
        raise GraphError(
            f"Function {fn_name}: the results depend on parameter(s) not in the parameter "
            f"list: {names}"
        )


def _label(p: Output) -> str:
    name = f"{p.node.name!r} " if p.node.name else ""
    return f"{name}{p.type} (built at {p.node.provenance})"
