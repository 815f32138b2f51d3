"""Conversion state: values by name, import-time constant folding, node attributes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import helper

from opgraph.core import element_type as et
from opgraph.core.dim import bounds
from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.literals import Constant, constant
from opgraph.core.node import Output
from opgraph.ops.quantization import DequantizeLinear
from opgraph.runtime.backend import backend

#: Values computed only from constants are folded at import time up to this many elements.
FOLD_LIMIT = 1 << 24


class NeedsConstantError(ConversionError):
    """A converter needs the import-time value of ``value_name`` (a shape, an axis list, the
    data of an op whose output shape depends on it); pass it in ``constant_inputs`` when it is a
    graph input."""

    def __init__(self, message: str, value_name: str) -> None:
        super().__init__(message)
        self.value_name = value_name


@dataclass
class GraphContext:
    """The values of one ONNX graph (subgraphs see their outer scopes' values)."""

    opsets: dict[str, int]
    outer: GraphContext | None = None
    values: dict[str, Output | None] = field(default_factory=dict)

    @property
    def opset(self) -> int:
        """The default domain's opset version."""
        return self.opsets.get("", 1)

    def version(self, domain: str) -> int:
        """The opset version of ``domain`` in this graph (ai.onnx is the default domain)."""
        return self.opsets.get("" if domain in ("", "ai.onnx") else domain, 1)

    def lookup(self, name: str, where: str) -> Output | None:
        """The value called ``name`` (None for an omitted optional function input)."""
        scope: GraphContext | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.outer
        raise ConversionError(
            f"{where}: input {name!r} is not produced by any node, input or initializer"
        )


@dataclass
class NodeContext:
    """What a converter sees: the node, its inputs (None for omitted optional inputs) and
    helpers for attributes and import-time constants."""

    node: Any  # onnx.NodeProto
    inputs: list[Output | None]
    graph: GraphContext
    importer: Any  # the Importer, for subgraphs

    @property
    def opset(self) -> int:
        """The opset version of the node's domain."""
        return self.graph.version(self.node.domain)

    @property
    def where(self) -> str:
        return f"ONNX node {self.node.name or '<unnamed>'!r} ({self.node.op_type})"

    def input(self, index: int) -> Output:
        """Required input ``index``."""
        if index >= len(self.inputs) or self.inputs[index] is None:
            raise ConversionError(f"{self.where}: required input {index} is missing")
        value = self.inputs[index]
        assert value is not None
        return value

    def optional(self, index: int) -> Output | None:
        """Optional input ``index``, or None when it is omitted."""
        return self.inputs[index] if index < len(self.inputs) else None

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` as a Python value (bytes decoded), or ``default``."""

        for attribute in self.node.attribute:
            if attribute.name == name:
                value = helper.get_attribute_value(attribute)
                if isinstance(value, bytes):
                    return value.decode()
                if isinstance(value, list) and value and isinstance(value[0], bytes):
                    return [v.decode() for v in value]
                return value
        return default

    def tensor_attr(self, name: str) -> np.ndarray | None:
        """The value of tensor attribute ``name`` (a ``sparse_tensor`` is densified), or None
        when unset; external data is read only where the import allows (``tensors.py``)."""
        for attribute in self.node.attribute:
            if attribute.name != name:
                continue
            where = f"{self.where} attribute {name!r}"
            if attribute.HasField("sparse_tensor"):
                return self.importer.tensors.sparse_array(attribute.sparse_tensor, where)
            if not attribute.HasField("t"):
                raise self.fail(f"attribute {name!r} is not a tensor")
            return self.importer.tensors.array(attribute.t, where)
        return None

    def has_attr(self, name: str) -> bool:
        """True when the node sets attribute ``name``."""
        return any(a.name == name for a in self.node.attribute)

    def known(self, index: int) -> bool:
        """True when input ``index`` is known at import time (a Constant, or a shape value
        with symbolic dimensions); False for a tensor known only at run time, for which a
        converter builds the op's run-time form (``ops.dynamic_reshape``…)."""
        if not self.importer.run_time_values:
            return True  # ``const`` then raises NeedsConstantError for a run-time value
        if constant_value(self.input(index)) is not None:
            return True
        self.importer.run_time_nodes += 1
        return False

    def const(self, index: int, what: str) -> np.ndarray:
        """The import-time value of input ``index``; ConversionError when it is not constant."""
        value = constant_value(self.input(index))
        if value is None:
            name = self.node.input[index]
            raise NeedsConstantError(
                f"{self.where}: {what} (input {index}, {name!r}) is needed at import time; it "
                "is known only at run time (the importer converts the node then, when ONNX "
                "or the model types its outputs; constant_inputs= specialises graph inputs)",
                name,
            )
        return value

    def const_or_none(self, index: int, what: str) -> np.ndarray | None:
        """Like :meth:`const` for an optional input; None when it is omitted."""
        return None if self.optional(index) is None else self.const(index, what)

    def fail(self, message: str) -> ConversionError:
        """A ConversionError naming this node (raise it)."""
        return ConversionError(f"{self.where}: {message}")


def constant_value(value: Output) -> np.ndarray | None:
    """The array of a Constant-produced value, else None."""
    op = value.node.op
    return op.value if isinstance(op, Constant) else None


def fold(values: Sequence[Output | None], inputs: Sequence[Output | None]) -> list[Output | None]:
    """Replace values computed only from constants by Constants (bounded by FOLD_LIMIT).

    ``inputs`` are the converter's inputs (already folded when they could be), so the walk
    stays inside the nodes the converter just built.
    """

    boundary = {v for v in inputs if v is not None}
    todo = [
        i
        for i, v in enumerate(values)
        if v is not None
        and not isinstance(v.node.op, Constant)
        # A symbolic size depends on a Parameter (then _static is False) or on the data
        # (non_zero, unique…: folded when that data is constant, up to the symbol's bound).
        and bounds(v.tensor_type.size)[1] <= FOLD_LIMIT
        and not _dequantized_bytes(v)
        and _static(v, boundary)
    ]
    folded = list(values)
    if not todo:
        return folded
    chosen = [v for v in (values[i] for i in todo) if v is not None]
    results = backend("INTERPRETER").compile(Function(chosen, []))()
    for i, value, array in zip(todo, chosen, results, strict=True):
        folded[i] = constant(np.asarray(array), value.element_type)
    return folded


def _dequantized_bytes(value: Output) -> bool:
    """A dequantization of 8-bit values (quantized weights) stays an op: backends run the
    products that read it on 8-bit kernels (``fuse_quantized_products``); their own constant
    folding folds it when they do not."""
    return isinstance(value.node.op, DequantizeLinear) and value.node.inputs[0].element_type in (
        et.u8,
        et.i8,
    )


def _static(value: Output, boundary: set[Output]) -> bool:
    """True when ``value`` depends on Constants only, walking back to the boundary."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v.node in seen:
            continue
        seen.add(v.node)
        if isinstance(v.node.op, Constant):
            continue
        if v in boundary or not v.node.inputs:
            return False  # a non-constant input, or a Parameter
        stack.extend(v.node.inputs)
    return True
