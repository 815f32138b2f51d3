"""Strict import: a model is checked against the ONNX spec before and while it converts.

The ONNX schemas are the single source of what is valid:

* :func:`check_model` runs ``onnx.checker`` (attribute names, kinds and required attributes,
  input and output counts, single assignment of every name, topological order, deprecated ops,
  IR and opset rules), after refusing a model without a graph, an opset newer than the installed
  onnx defines, and non-UTF-8 names; its message is rewritten to name the node.
* :func:`check_input_types` checks a node's actual input element types against its schema's
  type constraints (what onnxruntime's type inference refuses).
* :func:`check_declared` compares a declared value type (graph outputs, ``value_info``) with
  the type opgraph inferred; a symbolic or missing dimension matches anything.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import onnx.checker
import onnx.defs
from onnx import AttributeProto

from opgraph.core.dim import DimExpr, Symbol, free_symbols
from opgraph.core.errors import ConversionError
from opgraph.core.node import Output
from opgraph.core.shape import maybe_equal
from opgraph.frontends.onnx.tensors import EXTERNAL, protos_of
from opgraph.frontends.onnx.types import onnx_type_name, to_onnx

_MAXIMUM_PROTOBUF = 2**31 - 1
_CONTEXT = re.compile(r"Bad node spec for node\. Name: (.*) OpType: (\S*)")


def check_header(model: Any) -> None:
    """Refuse a model without a graph, with non-UTF-8 names, with an opset newer than the
    installed onnx defines, or with a graph output declared twice; ConversionError."""
    if not model.HasField("graph"):
        raise ConversionError("the model has no graph (only its header was found)")
    check_names(model.graph)
    _check_opsets(model)
    _check_unique_outputs(model.graph)


def check_model(model: Any) -> None:
    """Refuse a model ``onnx.checker`` refuses (the message names the node); ConversionError."""

    try:
        onnx.checker.check_model(_for_checker(model))
    except (onnx.checker.ValidationError, ValueError) as error:
        raise ConversionError(_message(str(error))) from error


def _check_opsets(model: Any) -> None:

    newest = onnx.defs.C.schema_version_map()
    for entry in model.opset_import:
        domain = "" if entry.domain == "ai.onnx" else entry.domain
        if domain in newest and entry.version > newest[domain][1]:
            raise ConversionError(
                f"the model imports opset {entry.version} of domain "
                f"{entry.domain or 'ai.onnx'!r}; the installed onnx defines versions up to "
                f"{newest[domain][1]}"
            )


def _check_unique_outputs(graph: Any) -> None:
    seen: set[str] = set()
    for info in graph.output:
        if info.name in seen:
            raise ConversionError(f"graph output {info.name!r} is declared twice")
        seen.add(info.name)


def _message(text: str) -> str:
    """The checker's first line, prefixed with the node it names (ConversionError style)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    context = [line for line in lines if line.startswith("==> Context")]
    what = " ".join(line for line in lines if not line.startswith("==> Context"))
    what = f"{what or text} (the ONNX checker refuses the model)"
    found = _CONTEXT.search(context[0]) if context else None
    if found:
        return f"ONNX node {found.group(1) or '<unnamed>'!r} ({found.group(2)}): {what}"
    return f"the model is invalid: {what}"


def _for_checker(model: Any) -> Any:
    """``model``, or a copy with checker rules relaxed, when they apply:

    * external tensors become empty inline ones: the checker would look for their files
      relative to the working directory; the TensorReader alone decides what is read;
    * in a model over protobuf's 2 GiB limit (the checker needs it serialized), tensors over
      1 MiB become empty too; the TensorReader checks their sizes when it decodes them;
    * a main-graph input or output declared without a shape (unknown rank, which onnxruntime
      accepts) gets an empty one: the checker demands the field, and with no shape inference
      it reads nothing from it.
    """
    too_big = model.ByteSize() > _MAXIMUM_PROTOBUF
    emptied = [
        index
        for index, (item, _) in enumerate(protos_of(model))
        if any(part.data_location == EXTERNAL for part in _parts(item))
        or (too_big and item.ByteSize() > 1 << 20)
    ]
    unshaped = [
        info
        for info in [*model.graph.input, *model.graph.output]
        if info.type.WhichOneof("value") == "tensor_type"
        and not info.type.tensor_type.HasField("shape")
    ]
    if not emptied and not unshaped:
        return model
    copy = type(model)()
    copy.CopyFrom(model)
    chosen = set(emptied)
    for index, (item, _) in enumerate(protos_of(copy)):
        if index in chosen:
            for part in _parts(item):  # a sparse tensor's values and indices must agree
                _empty(part)
    for info in [*copy.graph.input, *copy.graph.output]:
        if info.type.WhichOneof("value") == "tensor_type":
            info.type.tensor_type.shape.SetInParent()
    return copy


def _parts(item: Any) -> list[Any]:
    """The TensorProtos of a TensorProto (itself) or a SparseTensorProto (values, indices)."""
    return [item.values, item.indices] if hasattr(item, "indices") else [item]


def _empty(tensor: Any) -> None:
    """Make ``tensor`` an inline tensor with no elements (keeping its name and type)."""
    data = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data")
    for field in ("external_data", "string_data", *data):
        tensor.ClearField(field)
    tensor.data_location = 0
    del tensor.dims[:]
    tensor.dims.append(0)


def check_names(graph: Any) -> None:
    """Protobuf hands invalid UTF-8 in string fields back as bytes: refuse such models."""

    named = [*graph.input, *graph.output, *graph.initializer, *graph.value_info]
    if not all(isinstance(item.name, str) for item in named) or not isinstance(graph.name, str):
        raise ConversionError("the model is malformed: a graph value has a non-UTF-8 name")
    for node in graph.node:
        fields = [node.op_type, node.domain, node.name, *node.input, *node.output]
        fields += [a.name for a in node.attribute]
        if not all(isinstance(f, str) for f in fields):
            raise ConversionError("the model is malformed: a node has a non-UTF-8 name field")
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                check_names(attribute.g)
            for sub in attribute.graphs:
                check_names(sub)


# ----------------------------------------------------------------------------- node types


@functools.cache
def schema(op_type: str, domain: str, version: int) -> Any:
    """The ONNX schema of ``op_type`` at ``version`` of ``domain``, or None (custom ops)."""

    try:
        return onnx.defs.get_schema(op_type, version, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:
        return None


def check_input_types(node: Any, inputs: list[Output | None], version: int, where: str) -> None:
    """Each input's element type is one its schema allows, and inputs sharing a type
    parameter agree (``T`` of Add's two inputs)."""
    spec = schema(node.op_type, node.domain, version)
    if spec is None or not spec.inputs:
        return
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in spec.type_constraints}
    bound: dict[str, str] = {}
    formals = spec.inputs
    for index, value in enumerate(inputs):
        if value is None:
            continue
        formal = formals[min(index, len(formals) - 1)]
        actual = f"tensor({onnx_type_name(to_onnx(value.element_type))})"
        permitted = allowed.get(formal.type_str, {formal.type_str})
        if actual not in permitted:
            raise ConversionError(
                f"{where}: input {index} ({node.input[index]!r}) is {actual}, but "
                f"{formal.name} ({formal.type_str}) allows only {', '.join(sorted(permitted))}"
            )
        homogeneous = index < len(formals) - 1 or formal.is_homogeneous
        if formal.type_str in allowed and homogeneous:
            first = bound.setdefault(formal.type_str, actual)
            if first != actual:
                raise ConversionError(
                    f"{where}: input {index} ({node.input[index]!r}) is {actual}, but type "
                    f"{formal.type_str} is already {first} for an earlier input"
                )


# ------------------------------------------------------------------------ declared types


def check_declared(info: Any, value: Output, where: str) -> None:
    """A declared ValueInfoProto agrees with the inferred ``value`` (symbolic dims, declared or
    computed, match all: a computed one is a size known when the Function runs)."""
    kind = info.type.WhichOneof("value")
    if kind is None:
        return
    label = f"{where} {info.name!r}"
    if kind != "tensor_type":
        raise ConversionError(f"{label} is declared as a {kind}, but opgraph made a tensor")
    declared = info.type.tensor_type
    found = to_onnx(value.element_type)
    if not declared.elem_type:
        raise ConversionError(f"{label} is declared as a tensor without an element type")
    if declared.elem_type != found:
        raise ConversionError(
            f"{label} is declared {onnx_type_name(declared.elem_type)} but the model computes "
            f"{onnx_type_name(found)} ({value.type})"
        )
    if not declared.HasField("shape"):
        return
    dims = declared.shape.dim
    shown = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
    mismatch = len(dims) != value.rank or any(
        d.HasField("dim_value") and not maybe_equal(s, d.dim_value)
        for d, s in zip(dims, value.shape, strict=False)
    )
    if mismatch and not _data_decided(dims, value):
        raise ConversionError(
            f"{label} is declared with shape {shown} but the model computes {list(value.shape)} "
            f"({value.type})"
        )


def _data_decided(dims: Any, value: Output) -> bool:
    """True when every dimension that differs from its declared size is decided by the data
    (made only of symbols that nodes upstream of ``value`` bind when they run, such as
    ``non_zero``'s count) and may take that size: a model's declared output shape of a
    ``NonZero`` or ``Unique`` is one example run's size, which nothing checks at run time."""
    if len(dims) != value.rank:
        return False
    differing = [
        (s, d.dim_value)
        for d, s in zip(dims, value.shape, strict=True)
        if d.HasField("dim_value") and d.dim_value != s
    ]
    if not all(isinstance(s, DimExpr) and maybe_equal(s, size) for s, size in differing):
        return False
    bound: set[Symbol] = set()
    stack, seen = [value.node], set()
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            bound.update(node.op.bound_symbols())
            stack.extend(i.node for i in node.inputs)
    return all(free_symbols(s) <= bound for s, _ in differing)
