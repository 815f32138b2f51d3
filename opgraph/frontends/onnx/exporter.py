"""opgraph Function → ONNX ModelProto.

Tuples and calls are lowered first, then every framework-level op without an exporter at the
requested opset is decomposed into core ops (``opgraph.passes.decompose``). Each node is then
written by the exporter registered for its op class (``exporters/<family>.py``); Parameters
become graph inputs and Constants initializers. Ops without an exporter, and attributes ONNX
cannot express, are all reported in one ConversionError.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper, numpy_helper

from opgraph.core.dim import format_dim
from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Node, Output
from opgraph.frontends.onnx import exporters as _exporters  # noqa: F401 - registers them
from opgraph.frontends.onnx.exporters.base import (
    EXPORTERS,
    ExportContext,
    exporter_for,
    onnx_type,
)
from opgraph.passes import decompose, inline_calls, unbox_tuples

#: The oldest opset the exporters target (axes and split sizes as inputs, Softmax on one axis).
OLDEST_EXPORT_OPSET = 13


def export_model(fn: Function, opset: int = 17, name: str | None = None) -> Any:
    """Write ``fn`` as an ONNX model.

    Args:
        fn: the Function; its parameters become the graph inputs (in order) and its results
            the graph outputs (named after the result nodes where they have names).
        opset: the default-domain opset to target (13 up to what the installed onnx knows).
        name: the graph name (default: the Function's).

    Returns:
        An ``onnx.ModelProto`` that passes ``onnx.checker``.

    Raises:
        ConversionError: ops without an exporter at this opset (all listed at once), or
            attributes ONNX cannot express.

    Example:
        >>> model = export_model(fn, opset=17)
        >>> onnx.save(model, "model.onnx")
    """

    newest = int(onnx.defs.onnx_opset_version())
    if not OLDEST_EXPORT_OPSET <= opset <= newest:
        raise ConversionError(f"export targets opsets {OLDEST_EXPORT_OPSET}..{newest}, got {opset}")
    lowered = lower_for_export(fn, opset)
    _check_exportable(lowered, opset)
    ctx = ExportContext(opset)
    graph = _write_graph(lowered, ctx, name or fn.name or "opgraph")
    model = onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid("", opset)],
        producer_name="opgraph",
    )
    model.ir_version = onnx.helper.find_min_ir_version_for(list(model.opset_import))
    try:  # full_check adds strict type inference: every input type its schema allows
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        raise ConversionError(f"the exported model does not validate: {error}") from error
    return model


def lower_for_export(fn: Function, opset: int) -> Function:
    """Tuples and calls removed, and the ops without an exporter decomposed."""

    lowered = unbox_tuples(inline_calls(fn))
    return decompose(lowered, lambda op: exporter_for(op, opset) is not None)


def _check_exportable(fn: Function, opset: int) -> None:
    missing = sorted(
        {
            node.op.name
            for node in fn.nodes
            if not isinstance(node.op, Parameter | Constant)
            and exporter_for(node.op, opset) is None
        }
    )
    if missing:
        raise ConversionError(
            f"cannot export {len(missing)} op(s) to ONNX opset {opset}: {', '.join(missing)}"
        )


def _write_graph(fn: Function, ctx: ExportContext, name: str) -> Any:

    names: dict[Output, str] = {}
    inputs = []
    for position, param in enumerate(fn.parameters):
        value = ctx.fresh(param.node.name or f"input_{position}")
        names[param] = value
        inputs.append(_value_info(value, param))
    problems: list[str] = []
    for node in fn.nodes:
        if isinstance(node.op, Parameter):
            continue
        if isinstance(node.op, Constant):
            value = ctx.fresh(node.name or "const")
            ctx.initializers.append(numpy_helper.from_array(node.op.value, value))
            names[node.outputs[0]] = value
            continue
        try:
            produced = _export_node(ctx, node, [names[v] for v in node.inputs])
        except ConversionError as error:
            problems.append(f"{error} (node {node})")
            continue
        names.update(zip(node.outputs, produced, strict=True))
    if problems:
        raise ConversionError("; ".join(problems))
    outputs = [_graph_output(ctx, fn, i, names) for i in range(len(fn.results))]
    return helper.make_graph(ctx.nodes, name, inputs, outputs, ctx.initializers)


def _export_node(ctx: ExportContext, node: Node, inputs: list[str]) -> list[str]:
    exporter = EXPORTERS.require(type(node.op), ctx.opset)  # checked up front
    produced = exporter(ctx, node.op, node, inputs)
    if len(produced) != len(node.outputs):
        raise ConversionError(
            f"the {node.op.name} exporter gave {len(produced)} values for {len(node.outputs)}"
        )
    return produced


def _graph_output(ctx: ExportContext, fn: Function, index: int, names: dict[Output, str]) -> Any:
    """The i-th graph output: an Identity gives each result its own (preferably the result
    node's) name, so repeated results and parameters returned as results work."""
    result = fn.results[index]
    node = result.node
    wanted = node.name if node.name and len(node.outputs) == 1 else f"output_{index}"
    value = ctx.fresh(wanted)
    ctx.nodes.append(_identity(names[result], value))
    return _value_info(value, result)


def _identity(source: str, target: str) -> Any:

    return helper.make_node("Identity", [source], [target])


def _value_info(name: str, value: Output) -> Any:
    # A symbolic dimension is written as a dim_param: a symbol by its name, an expression as
    # it prints (``2*seq``), which onnxruntime treats as one more named dimension.
    dims = [d if isinstance(d, int) else format_dim(d) for d in value.shape]
    return helper.make_tensor_value_info(name, onnx_type(value.element_type), dims)
