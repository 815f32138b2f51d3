"""Conversion state: values by name, import-time constant folding, node attributes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.literals import Constant, constant
from opgraph.core.node import Output

#: Values computed only from constants are folded at import time up to this many elements.
FOLD_LIMIT = 1 << 24


@dataclass
class GraphContext:
    """The values of one ONNX graph (subgraphs see their outer scopes' values)."""

    opset: int
    outer: GraphContext | None = None
    values: dict[str, Output] = field(default_factory=dict)

    def lookup(self, name: str, where: str) -> Output:
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
        return self.graph.opset

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
        return self.inputs[index] if index < len(self.inputs) else None

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` as a Python value (bytes decoded), or ``default``."""
        from onnx import helper

        for attribute in self.node.attribute:
            if attribute.name == name:
                value = helper.get_attribute_value(attribute)
                if isinstance(value, bytes):
                    return value.decode()
                if isinstance(value, list) and value and isinstance(value[0], bytes):
                    return [v.decode() for v in value]
                return value
        return default

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self.node.attribute)

    def const(self, index: int, what: str) -> np.ndarray:
        """The import-time value of input ``index``; ConversionError when it is not constant."""
        value = constant_value(self.input(index))
        if value is None:
            raise ConversionError(
                f"{self.where}: {what} (input {index}) must be computable at import time "
                "(opgraph shapes are static)"
            )
        return value

    def const_or_none(self, index: int, what: str) -> np.ndarray | None:
        return None if self.optional(index) is None else self.const(index, what)

    def fail(self, message: str) -> ConversionError:
        return ConversionError(f"{self.where}: {message}")


def constant_value(value: Output) -> np.ndarray | None:
    """The array of a Constant-produced value, else None."""
    op = value.node.op
    return op.value if isinstance(op, Constant) else None


def fold(values: Sequence[Output], inputs: Sequence[Output | None]) -> list[Output]:
    """Replace values computed only from constants by Constants (bounded by FOLD_LIMIT).

    ``inputs`` are the converter's inputs (already folded when they could be), so the walk
    stays inside the nodes the converter just built.
    """
    from opgraph.runtime.backend import backend

    boundary = {v for v in inputs if v is not None}
    todo = [
        i
        for i, v in enumerate(values)
        if not isinstance(v.node.op, Constant)
        and v.tensor_type.size <= FOLD_LIMIT
        and _static(v, boundary)
    ]
    folded = list(values)
    if not todo:
        return folded
    results = backend("INTERPRETER").compile(Function([values[i] for i in todo], []))()
    for i, array in zip(todo, results, strict=True):
        folded[i] = constant(np.asarray(array), values[i].element_type)
    return folded


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
