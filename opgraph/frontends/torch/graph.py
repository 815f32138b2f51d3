"""Convert the nodes of an ATen-level FX graph into opgraph values.

Both entry points use this walk: :func:`~opgraph.frontends.torch.import_exported` on a whole
ExportedProgram, and the ``torch.compile`` backend on each supported partition. Every node is
converted inside a provenance scope naming it (and the user's source line torch recorded), and
every converted result is checked against the shape and dtype ATen recorded in
``node.meta["val"]``, so a converter bug surfaces at the node that has it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import torch

from opgraph.core import element_type as et
from opgraph.core.errors import ConversionError, OpgraphError
from opgraph.core.literals import parameter
from opgraph.core.node import Output
from opgraph.core.provenance import provenance_scope
from opgraph.frontends.torch import converters as _converters  # noqa: F401 - registers them
from opgraph.frontends.torch.context import NodeContext, tensor_constant
from opgraph.frontends.torch.promotion import Scalar
from opgraph.frontends.torch.registry import lookup, name_of
from opgraph.frontends.torch.symbols import dims_of, is_size, to_dim
from opgraph.frontends.torch.types import from_torch

#: What an FX node converts to: an Output, a tuple of them (None for unused outputs), a
#: Python number (scalar-valued nodes) or None.
Value = Any

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_SYMBOLIC: dict[type, type] = {torch.SymBool: bool, torch.SymInt: int, torch.SymFloat: float}
_SCALAR_TYPES = {bool: et.boolean, int: et.i64, float: et.f64}


def label(node: torch.fx.Node) -> str:
    """``torch node 'addmm_1' (aten.addmm.default) at model.py:12``: the provenance of the
    opgraph nodes built for ``node``."""
    text = f"torch node {node.name!r} ({name_of(node.target)})"
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if frames:
        path, line = frames[-1]
        text += f" at {path.rsplit('/', 1)[-1]}:{line}"
    return text


def convert_graph(
    module: torch.fx.GraphModule,
    bindings: Mapping[torch.fx.Node, Value],
    convert: Callable[[torch.fx.Node, Mapping[torch.fx.Node, Value]], Value] | None = None,
) -> dict[torch.fx.Node, Value]:
    """Convert every node of ``module.graph`` after its placeholders.

    Args:
        module: an FX GraphModule of ATen overloads (``get_attr`` nodes read its attributes).
        bindings: a value for every placeholder.
        convert: converts one ``call_function`` node on the values so far (default
            :func:`convert_node`; the backend passes its trial conversions'
            :meth:`~opgraph.frontends.torch.support.Support.convert`).

    Returns:
        The value of every node (the output node maps to the list of results).

    Raises:
        ConversionError: naming the node, when it cannot be converted.
    """
    convert = convert or convert_node
    env: dict[torch.fx.Node, Value] = {}
    for node in module.graph.nodes:
        if node.op == "placeholder":
            if node not in bindings:
                raise ConversionError(f"placeholder {node.name!r} has no binding")
            env[node] = bindings[node]
        elif node.op == "get_attr":
            env[node] = _attribute(module, node)
        elif node.op == "call_function":
            env[node] = convert(node, env)
        elif node.op == "output":
            env[node] = _substitute(node.args[0], env)
        else:
            raise ConversionError(f"{label(node)}: FX {node.op} nodes are not ATen-level")
    return env


def is_size_node(node: torch.fx.Node) -> bool:
    """True for a node computing a traced size (``sym_size``, ``operator.mul`` on sizes…)."""
    return node.op == "call_function" and is_size(node.meta.get("val"))


def convert_node(node: torch.fx.Node, env: Mapping[torch.fx.Node, Value]) -> Value:
    """Convert one ``call_function`` node whose inputs are in ``env``.

    A node computing a traced size becomes the opgraph dimension its metadata records
    (``2*s0``), whatever the operations that computed it.
    """
    if is_size_node(node):
        return to_dim(node.meta["val"], label(node))
    converter = lookup(node.target)
    if converter is None:
        raise ConversionError(f"{label(node)}: no converter for {name_of(node.target)}")
    ctx = NodeContext(
        node, bind(node.target, _substitute(node.args, env), _substitute(node.kwargs, env))
    )
    with provenance_scope(label(node)):
        try:
            produced = converter(ctx)
            _check_against_meta(ctx, produced)
        except ConversionError:
            raise
        except OpgraphError as error:
            raise ConversionError(f"{label(node)}: {error}") from error
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as error:
            raise ConversionError(
                f"{label(node)}: cannot convert: {type(error).__name__}: {error}"
            ) from error
    return tuple(produced) if isinstance(produced, list) else produced


def bind(target: Any, args: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments by schema name with defaults filled in (``arg0``… for Python callables)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return {f"arg{i}": a for i, a in enumerate(args)} | dict(kwargs)
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(args) > len(positional):
        raise ConversionError(
            f"{name_of(target)}: {len(args)} positional arguments, schema takes {len(positional)}"
        )
    bound = {a.name: v for a, v in zip(positional, args, strict=False)}
    for argument in schema.arguments:
        if argument.name in kwargs:
            bound[argument.name] = kwargs[argument.name]
        elif argument.name not in bound:
            bound[argument.name] = argument.default_value if argument.has_default_value() else None
    return bound


def placeholder_value(meta: Any, name: str, where: str) -> Value:
    """A Parameter (or tuple of them, or the number itself) standing for a value with FX
    metadata ``meta``; a traced size (a backed ``SymInt``) stands for its dimension."""
    if isinstance(meta, torch.Tensor):
        return parameter(from_torch(meta.dtype, where), dims_of(meta, where), name=name)
    if is_size(meta):  # a traced size: the dimension itself, bound by the tensors' shapes
        return to_dim(meta, where)
    if isinstance(meta, list | tuple):
        return tuple(placeholder_value(m, f"{name}_{i}", where) for i, m in enumerate(meta))
    if meta is None or isinstance(meta, bool | int | float):
        return meta
    kind = _SYMBOLIC.get(type(meta))
    if kind is not None:  # a run-time Python number (from item())
        return Scalar(parameter(_SCALAR_TYPES[kind], (), name=name), kind)
    raise ConversionError(f"{where}: cannot stand for a {type(meta).__name__} value")


def _substitute(value: Any, env: Mapping[torch.fx.Node, Value]) -> Any:
    if isinstance(value, torch.fx.Node):
        return env[value]
    if isinstance(value, list | tuple):
        return type(value)(_substitute(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _substitute(v, env) for k, v in value.items()}
    return value


def _attribute(module: torch.fx.GraphModule, node: torch.fx.Node) -> Value:
    value: Any = module
    for part in str(node.target).split("."):
        value = getattr(value, part)
    if isinstance(value, torch.Tensor):
        return tensor_constant(value, label(node))
    raise ConversionError(f"{label(node)}: attribute of type {type(value).__name__}")


def _check_against_meta(ctx: NodeContext, produced: Value) -> None:
    """The converter's results must have the shapes and dtypes ATen recorded."""
    meta = ctx.node.meta.get("val")
    if meta is None:
        return
    metas = list(meta) if isinstance(meta, list | tuple) else [meta]
    values = list(produced) if isinstance(produced, list | tuple) else [produced]
    if len(values) != len(metas):
        raise ctx.fail(f"converter made {len(values)} outputs, ATen makes {len(metas)}")
    for index, (value, expected) in enumerate(zip(values, metas, strict=True)):
        if not isinstance(value, Output) or not isinstance(expected, torch.Tensor):
            continue
        shape = dims_of(expected, ctx.where)
        element_type = from_torch(expected.dtype, ctx.where)
        if value.shape != shape or value.element_type != element_type:
            raise ctx.fail(
                f"output {index}: the converter made {value.type}, ATen makes "
                f"{element_type.name}{list(shape)} (a converter bug; please report it)"
            )
