"""ONNX function ops: ops the spec defines by a function body of other ops.

When no converter is registered for an op but its schema carries a function body (plain or
context-dependent) at the model's opset, the importer expands the body in place: the caller's
inputs bind the function's formal inputs, attribute references (``ref_attr_name``) take the
caller's attribute values or the schema's defaults, and each body node is converted by the
ordinary registry. Registered converters always win, so an op whose catalogue counterpart is
better (fewer, fused ops) gets a converter of its own.
"""

from __future__ import annotations

import functools
from typing import Any

import onnx
import onnx.defs
from onnx import TypeProto, helper

from opgraph.core.dim import format_dim
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import GraphContext, NeedsConstantError, NodeContext
from opgraph.frontends.onnx.registry import Converter
from opgraph.frontends.onnx.types import to_onnx


def function_converter(op_type: str, domain: str, opset: int) -> Converter | None:
    """A converter that expands the schema's function body, or None when there is none."""
    schema = _schema(op_type, domain, opset)
    if schema is None:
        return None
    if schema.has_function:
        versions = list(schema.function_opset_versions)
        contextual = False
    elif schema.has_context_dependent_function:
        versions = list(schema.context_dependent_function_opset_versions)
        contextual = True
    else:
        return None
    if not versions:
        return None
    eligible = [v for v in versions if v <= opset]
    version = max(eligible) if eligible else min(versions)
    return functools.partial(_expand, schema, version, contextual)


@functools.cache
def _schema(op_type: str, domain: str, opset: int) -> Any:

    try:
        return onnx.defs.get_schema(op_type, opset, "" if domain == "ai.onnx" else domain)
    except (onnx.defs.SchemaError, TypeError):
        return None


def _expand(schema: Any, version: int, contextual: bool, ctx: NodeContext) -> list[Output | None]:

    body = onnx.FunctionProto()
    if contextual:
        types = [_type_proto(v).SerializeToString() for v in ctx.inputs]
        serialized = schema.get_context_dependent_function_with_opset_version(
            version, ctx.node.SerializeToString(), types
        )
    else:
        serialized = schema.get_function_with_opset_version(version)
    if not serialized:
        raise ctx.fail("the op's function body is not available for these inputs")
    body.ParseFromString(serialized)
    attributes = _attributes(schema, ctx.node)
    opsets = dict(ctx.graph.opsets)
    opsets.update(
        {("" if o.domain == "ai.onnx" else o.domain): o.version for o in body.opset_import}
    )
    scope = GraphContext(opsets, outer=None)
    for index, name in enumerate(body.input):
        scope.values[name] = ctx.optional(index)
    nodes = [_bind_attributes(node, attributes) for node in body.node]
    try:
        ctx.importer.convert_node_list(nodes, scope)
    except NeedsConstantError as error:
        formal = list(body.input)
        if error.value_name not in formal:
            raise
        actual = ctx.node.input[formal.index(error.value_name)]
        raise NeedsConstantError(f"{ctx.where}: {error}", actual) from error
    return [scope.values.get(name) for name in body.output]


def _type_proto(value: Output | None) -> Any:

    if value is None:
        return TypeProto()
    # a symbolic dimension as a dim_param, as the exporter writes graph inputs and outputs
    dims = [d if isinstance(d, int) else format_dim(d) for d in value.shape]
    return helper.make_tensor_type_proto(to_onnx(value.element_type), dims)


def _attributes(schema: Any, node: Any) -> dict[str, Any]:
    """The caller's attributes by name, completed with the schema's defaults."""
    values = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():
        if name not in values and spec.default_value.name:
            values[name] = spec.default_value
    return values


def _bind_attributes(node: Any, attributes: dict[str, Any]) -> Any:
    """A copy of ``node`` with attribute references replaced by the caller's values."""
    if not any(a.ref_attr_name for a in node.attribute):
        return node
    bound = type(node)()
    bound.CopyFrom(node)
    del bound.attribute[:]
    for attribute in node.attribute:
        if not attribute.ref_attr_name:
            bound.attribute.append(attribute)
            continue
        value = attributes.get(attribute.ref_attr_name)
        if value is None:
            continue  # the caller omitted it and there is no default: the attribute is unset
        copy = bound.attribute.add()
        copy.CopyFrom(value)
        copy.name = attribute.name
    return bound
