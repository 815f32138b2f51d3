"""specialize_shapes: a symbolic Function made static for one binding of its symbols."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from opgraph.core.dim import DimExpr, evaluate
from opgraph.core.errors import GraphError, OpTypeError
from opgraph.core.function import Function
from opgraph.core.literals import Parameter
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.core.printing import format_node, value_names
from opgraph.core.shape import DeferredCheck, recording_deferred_checks
from opgraph.core.tensor_type import TensorType, TupleType, ValueType, flatten_types


def is_symbolic(fn: Function) -> bool:
    """True when a parameter or result type of ``fn`` has a symbolic dimension."""
    types = (*fn.parameter_types, *fn.flat_result_types)
    return any(type(d) is not int for t in types for d in t.shape)


def specialize_value(value: Any, binding: Mapping[str, int]) -> Any:
    """An attribute value with every dimension expression evaluated under ``binding``
    (tuples and nested tuples included); other values unchanged."""
    if isinstance(value, DimExpr):
        return evaluate(value, binding)
    if isinstance(value, tuple):
        items = tuple(specialize_value(v, binding) for v in value)
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, TensorType):
        return TensorType(value.element_type, specialize_value(value.shape, binding))
    if isinstance(value, Function) and is_symbolic(value):  # a callee (Call, control flow)
        return specialize_shapes(value, binding)
    return value


def specialize_op(op: Op, binding: Mapping[str, int]) -> Op:
    """``op`` with its dimension-valued attributes evaluated (the same op when it has none)."""
    changed = {}
    for name, value in op.attributes().items():
        new = specialize_value(value, binding)
        if new is not value:
            changed[name] = new
    return dataclasses.replace(op, **changed) if changed else op  # type: ignore[type-var]


def specialize_type(t: ValueType, binding: Mapping[str, int]) -> ValueType:
    if isinstance(t, TupleType):
        return TupleType(tuple(specialize_type(e, binding) for e in t.elements))
    return TensorType(t.element_type, tuple(evaluate(d, binding) for d in t.shape))


def specialize_shapes(fn: Function, binding: Mapping[str, int]) -> Function:
    """``fn`` with the symbols named in ``binding`` replaced by their values.

    Every node is rebuilt through its type rule, so the checks a type rule could not decide on
    symbols (a slice inside its axis, a window inside the padded data) run for these values;
    each rebuilt node's type must equal its symbolic type evaluated under ``binding``.
    Partial bindings are allowed (the result keeps the other symbols).

    Raises:
        OpTypeError: a type rule rejects the node for these values (the message names the
            node and the binding).
        GraphError: a rebuilt type differs from the evaluated symbolic one (a type-rule bug).
    """
    mapping: dict[Output, Output] = {}
    names = value_names(fn)
    for node in fn.nodes:
        inputs = tuple(mapping.get(i, i) for i in node.inputs)
        op = specialize_op(node.op, binding)
        if op is node.op and inputs == node.inputs:
            continue
        try:
            new = op.build(*inputs, name=node.name, provenance=node.provenance)
        except OpTypeError as error:
            raise OpTypeError(
                f"{fn.name}: with {_describe(binding)}, {format_node(node, names)} is invalid: "
                f"{getattr(error, 'detail', error)}"
            ) from None
        _check_types(fn, node, new, binding, names)
        mapping.update(zip(node.outputs, new.outputs, strict=True))
    results = [mapping.get(r, r) for r in fn.results]
    parameters = [mapping.get(p, p) for p in fn.parameters]
    return Function(results, parameters, name=fn.name)


def _check_types(
    fn: Function, old: Node, new: Node, binding: Mapping[str, int], names: dict[Output, str]
) -> None:
    if isinstance(old.op, Parameter):
        return
    want = flatten_types(tuple(specialize_type(t, binding) for t in old.output_types))
    got = flatten_types(new.output_types)
    if want != got:
        raise GraphError(
            f"{fn.name}: with {_describe(binding)}, {format_node(old, names)} has the static "
            f"type {', '.join(map(str, got))}, its symbolic type gives "
            f"{', '.join(map(str, want))} (a type-rule bug)"
        )


def _describe(binding: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(binding.items())) or "no binding"


def deferred_checks(fn: Function) -> tuple[DeferredCheck, ...]:
    """The size conditions ``fn``'s type rules deferred on its symbols (a split that must
    divide, a slice bound inside a symbolic axis…), each once: a backend that does not re-run
    the type rules at every binding evaluates these instead (``DeferredCheck.holds``), and
    asks :func:`specialize_shapes` for the error's wording only when one fails."""
    found: dict[DeferredCheck, None] = {}
    with recording_deferred_checks() as recorded:
        for node in fn.nodes:
            types = tuple(i.type for i in node.inputs)
            try:
                node.op.canonicalize(*types).infer(*types)
            except OpTypeError:  # built once already; a rule that re-checks differently
                continue
    for check in recorded:
        found.setdefault(check, None)
    return tuple(found)
