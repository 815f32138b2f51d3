"""The export registry (op class → exporter) and the state exporters write into.

An exporter is ``exporter(ctx, op, node, inputs) -> names``: it receives the node's op (typed
as the class it is registered for), the node and the ONNX names of its inputs, emits ONNX
nodes and initializers through ``ctx``, and returns one ONNX value name per output of the
node. ``@exports(OpClass, since=N)`` registers it for models of
opset N and later; a newer registration for the same class wins at higher opsets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import helper, numpy_helper

from opgraph.core.errors import ConversionError
from opgraph.core.node import Node
from opgraph.core.op import Op
from opgraph.core.registry import VersionedRegistry
from opgraph.frontends.onnx.types import to_onnx

#: ``exporter(ctx, op, node, inputs) -> names``; ``op`` is ``node.op``, which the exporter
#: annotates with the op class (or family base) it is registered for.
Exporter = Callable[["ExportContext", Any, Node, list[str]], list[str]]

EXPORTERS: VersionedRegistry[type[Op], Exporter] = VersionedRegistry("ONNX exporter", "opset")


def exports(*classes: type[Op], since: int = 1) -> Callable[[Exporter], Exporter]:
    """Register an exporter for ``classes`` from ONNX opset ``since`` on."""
    return EXPORTERS.register(*classes, since=since)


def exporter_for(op: Op | type[Op], opset: int) -> Exporter | None:
    """The exporter of ``op``'s class at ``opset``, or None."""
    return EXPORTERS.lookup(op if isinstance(op, type) else type(op), opset)


def exported_ops() -> list[tuple[str, int]]:
    """(op class name, since) of every exporter, for docs and coverage."""
    return sorted((cls.__name__, v) for cls, v, _ in EXPORTERS.entries())


@dataclass
class ExportContext:
    """The graph being written: nodes, initializers and fresh names."""

    opset: int
    nodes: list[Any] = field(default_factory=list)
    initializers: list[Any] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def fresh(self, hint: str) -> str:
        """A value name not used yet, based on ``hint``."""
        base = "".join(c if c.isalnum() or c in "_." else "_" for c in hint) or "v"
        name, counter = base, 0
        while name in self.used:
            counter += 1
            name = f"{base}_{counter}"
        self.used.add(name)
        return name

    def emit(
        self, op_type: str, inputs: Sequence[str], outputs: int = 1, **attributes: Any
    ) -> list[str]:
        """Append an ONNX node; returns its output names."""

        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        kept = {k: v for k, v in attributes.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **kept))
        return names

    def one(self, op_type: str, inputs: Sequence[str], **attributes: Any) -> str:
        """:meth:`emit` for a single-output node."""
        return self.emit(op_type, inputs, 1, **attributes)[0]

    def constant(self, array: Any, hint: str = "const") -> str:
        """An initializer holding ``array`` (its dtype kept)."""

        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, values: Sequence[int], hint: str = "ints") -> str:
        """A 1-D int64 initializer (shapes, axes, pads)."""
        return self.constant(np.asarray(list(values), dtype=np.int64).reshape(-1), hint)

    def scalar_like(self, value: float | int | bool, node: Node, index: int = 0) -> str:
        """A scalar initializer of the element type of ``node``'s input ``index``."""
        dtype = node.inputs[index].element_type.dtype
        return self.constant(np.asarray(value).astype(dtype), "scalar")


def onnx_type(element_type: Any) -> int:
    """The ONNX data type code of an opgraph element type."""
    return to_onnx(element_type)


def unsupported(node: Node, why: str) -> ConversionError:
    """A ConversionError for a node whose attributes have no ONNX form."""
    return ConversionError(f"cannot export {node.op.name}: {why}")
