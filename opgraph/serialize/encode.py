"""Function -> the ``graph.json`` document and the constant data blobs.

Generic over ops: a node is its op's registry name and version, the op's dataclass fields
encoded by value kind (:mod:`opgraph.serialize.values`), its inputs as ``[node, output]``
positions, its output types, name and provenance. Functions referenced from attributes (a
``Call``'s callee) are stored once each, callees before callers, and referenced by position.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from opgraph._version import __version__
from opgraph.core import element_type as et
from opgraph.core.dim import DimExpr
from opgraph.core.errors import OpTypeError, SerializationError
from opgraph.core.function import Function
from opgraph.core.node import Node
from opgraph.core.op import OP_REGISTRY
from opgraph.core.tensor_type import TensorType, ValueType
from opgraph.serialize.dims import SymbolWriter
from opgraph.serialize.schema import (
    DEFAULT_LIMITS,
    FORMAT_NAME,
    FORMAT_VERSION,
    STATIC_FORMAT_VERSION,
)
from opgraph.serialize.values import ValueProblem, check_text, encode_value, field_specs


@dataclass(frozen=True)
class Encoded:
    """A Function encoded: ``graph.json`` (UTF-8 bytes) and the distinct data blobs (flat uint8
    arrays by the hex SHA-256 of their bytes)."""

    graph: bytes
    blobs: dict[str, np.ndarray]


def encode_function(fn: Function) -> Encoded:
    """Encode ``fn`` and every Function its attributes reference.

    Raises:
        SerializationError: an attribute value of an unsupported kind, an op class that is not
            the one registered under its name, or a name that is not valid Unicode.
    """
    if not isinstance(fn, Function):
        raise TypeError(f"serialize expects a Function, got {type(fn).__name__}")
    writer = _Writer()
    for function in _functions_callees_first(fn):
        writer.add(function)
    symbols = writer.symbols.table  # a static graph is written as format version 1, unchanged
    document: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION if symbols else STATIC_FORMAT_VERSION,
        "producer": f"opgraph {__version__}",
    }
    if symbols:
        document["symbols"] = symbols
    document["functions"] = writer.functions
    return Encoded(_dump(document).encode("utf-8"), writer.blobs)


def _dump(document: dict[str, Any]) -> str:
    """Compact JSON with one node per line, so ``unzip -p model.opgraph graph.json`` reads and
    diffs well (deflate absorbs the newlines)."""

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    header = {k: v for k, v in document.items() if k != "functions"}
    functions = []
    for fn in document["functions"]:
        head = dumps({k: v for k, v in fn.items() if k != "nodes"})[:-1]
        nodes = ",\n".join(dumps(node) for node in fn["nodes"])
        functions.append(f'{head},"nodes":[\n{nodes}]}}')
    return f'{dumps(header)[:-1]},"functions":[\n' + ",\n".join(functions) + "]}\n"


def _functions_callees_first(main: Function) -> list[Function]:
    """Every Function reachable through attributes, each once, callees before callers
    (iterative: call nesting depth is not limited by Python's recursion limit)."""
    order: list[Function] = []
    done: set[Function] = set()
    stack: list[tuple[Function, bool]] = [(main, False)]
    while stack:
        fn, expanded = stack.pop()
        if fn in done:
            continue
        if expanded:
            done.add(fn)
            order.append(fn)
            continue
        stack.append((fn, True))
        stack.extend((callee, False) for callee in _callees(fn) if callee not in done)
    return order


def _callees(fn: Function) -> list[Function]:
    found: list[Function] = []
    for node in fn.nodes:
        values = [getattr(node.op, name) for name in field_specs(type(node.op))]
        while values:
            value = values.pop()
            if isinstance(value, Function):
                found.append(value)
            elif type(value) is tuple:
                values.extend(value)
    return found


class _Writer:
    """Accumulates encoded Functions and data blobs (implements ``values.Encoder``)."""

    def __init__(self) -> None:
        self.functions: list[dict[str, Any]] = []
        self.blobs: dict[str, np.ndarray] = {}
        self._function_index: dict[Function, int] = {}
        self._array_refs: dict[int, tuple[np.ndarray, dict[str, Any]]] = {}
        self.symbols = SymbolWriter()

    def add(self, fn: Function) -> None:
        index_of = {node: i for i, node in enumerate(fn.nodes)}
        label = f"function {fn.name!r}"
        _check_text(fn.name, label, "the function name")
        self.functions.append(
            {
                "name": fn.name,
                "parameters": [index_of[p.node] for p in fn.parameters],
                "results": [[index_of[r.node], r.index] for r in fn.results],
                "nodes": [self._node(node, i, index_of, label) for i, node in enumerate(fn.nodes)],
            }
        )
        self._function_index[fn] = len(self.functions) - 1

    def _node(
        self, node: Node, index: int, index_of: dict[Node, int], label: str
    ) -> dict[str, Any]:
        op = node.op
        cls = type(op)
        name = cls.__name__
        where = f"{label}, node {index} ({name}{f' {node.name!r}' if node.name else ''})"
        if OP_REGISTRY.get(name) is not cls:
            raise SerializationError(
                f"cannot serialize {where}: its class {cls.__module__}.{cls.__qualname__} is not "
                f"the op registered as {name!r}, so the file could not be read back"
            )
        entry: dict[str, Any] = {"op": name, "version": cls.version}
        attributes = {}
        for field in field_specs(cls):
            try:
                attributes[field] = encode_value(getattr(op, field), self, DEFAULT_LIMITS.max_depth)
            except ValueProblem as problem:
                raise SerializationError(
                    f"cannot serialize {where}: attribute {field!r}: {problem}"
                ) from None
        if attributes:
            entry["attributes"] = attributes
        entry["inputs"] = [[index_of[i.node], i.index] for i in node.inputs]
        entry["types"] = [encode_type(t, self.symbols) for t in node.output_types]
        if node.name is not None:
            _check_text(node.name, where, "the node name")
            entry["name"] = node.name
        _check_text(node.provenance, where, "the provenance")
        entry["provenance"] = node.provenance
        return entry

    # ------------------------------------------------------------------ values.Encoder
    def function_ref(self, fn: Function) -> int:
        return self._function_index[fn]  # callees are always added first

    def array_ref(self, array: np.ndarray) -> dict[str, Any]:
        known = self._array_refs.get(id(array))
        if known is not None:
            return known[1]
        try:
            element_type = et.from_dtype(array.dtype)
        except OpTypeError as error:
            raise ValueProblem(str(error)) from None
        data = little_endian_bytes(array)
        digest = hashlib.sha256(data.data).hexdigest()
        self.blobs.setdefault(digest, data)  # identical values are stored once
        ref = {"data": digest, "element_type": element_type.name, "shape": list(array.shape)}
        self._array_refs[id(array)] = (array, ref)  # the array is kept alive with its id
        return ref

    def dim_ref(self, value: DimExpr) -> Any:
        return self.symbols.encode(value)["dim"]


def little_endian_bytes(array: np.ndarray) -> np.ndarray:
    """The array's elements, row-major and little-endian, as a flat uint8 array (no copy on a
    little-endian machine for a C-contiguous array)."""
    flat = np.ascontiguousarray(array).reshape(-1)
    size = flat.dtype.itemsize
    # Viewing as an unsigned int of the same width makes byte order explicit for every dtype,
    # bf16 included (ml_dtypes types carry no byte order of their own).
    words = flat.view(f"=u{size}").astype(f"<u{size}", copy=False)
    return np.ascontiguousarray(words).view(np.uint8)


def encode_type(t: ValueType, symbols: SymbolWriter) -> Any:
    """``["f32", [2, 3]]`` for a tensor type (a symbolic dimension as ``{"dim": ...}``),
    ``{"tuple": [...]}`` for a tuple type."""
    if isinstance(t, TensorType):
        return [t.element_type.name, [symbols.encode(d) for d in t.shape]]
    return {"tuple": [encode_type(e, symbols) for e in t.elements]}


def _check_text(text: str, where: str, what: str) -> None:
    try:
        check_text(text)
    except ValueProblem as problem:
        raise SerializationError(f"cannot serialize {where}: {what}: {problem}") from None
