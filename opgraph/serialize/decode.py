"""The ``graph.json`` document and the archive's data -> a Function, every node rebuilt.

Each node is rebuilt through its op class and ``op.build``, so the loaded graph is
re-validated by the same type rules that built the original; the output types the file records
must then equal the ones the rules infer. Everything the file says is checked before use and
every problem raises :class:`SerializationError` naming the function, node index, op and name.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

import opgraph.ops  # noqa: F401 - registers every op family, so the file's ops can be found
from opgraph.core.dim import Dim
from opgraph.core.errors import GraphError, OpTypeError
from opgraph.core.function import Function
from opgraph.core.node import Node, Output
from opgraph.core.op import OP_REGISTRY, Op
from opgraph.core.tensor_type import TensorType, TupleType, ValueType
from opgraph.serialize.container import Archive
from opgraph.serialize.dims import DimReader, read_symbols
from opgraph.serialize.schema import FORMAT_NAME, FORMAT_VERSION, Limits, fail
from opgraph.serialize.upgrades import UpgradeMissing, upgrade_attributes, upgrade_document
from opgraph.serialize.values import (
    ValueProblem,
    check_text,
    conform,
    decode_value,
    element_type_named,
    field_specs,
)

_DIGEST = re.compile(r"[0-9a-f]{64}")
_TOP_KEYS = {"format", "format_version", "producer", "symbols", "functions"}
_FUNCTION_KEYS = {"name", "parameters", "results", "nodes"}
_NODE_REQUIRED = {"op", "version", "types"}
_NODE_OPTIONAL = {"attributes", "inputs", "name", "provenance"}
_ARRAY_KEYS = {"data", "element_type", "shape"}
_DEFAULT_PROVENANCE = "<deserialized>"
#: numpy's limit on an array's element count (the product of its non-zero dimensions).
_MAX_ELEMENTS = int(np.iinfo(np.intp).max)


@dataclass(frozen=True)
class Loaded:
    """A read archive: the Function and what ``opgraph info`` reports about the file."""

    function: Function
    functions: tuple[Function, ...]
    format_version: int
    producer: str | None
    constants: int
    constant_bytes: int
    stored_bytes: int


def read_archive(archive: Archive, limits: Limits) -> Loaded:
    """Parse, check and rebuild the archive's graph (the last stored Function)."""
    document = parse_json(archive.graph(), archive.source)
    version = check_header(document, archive.source)
    try:
        document = upgrade_document(document, version, FORMAT_VERSION)
    except (UpgradeMissing, ValueError) as error:
        raise fail(archive.source, "format_version", str(error)) from None
    try:
        symbols = read_symbols(document.get("symbols"))
    except ValueProblem as problem:
        raise fail(archive.source, "symbols", str(problem)) from None
    reader = _Reader(archive, limits, DimReader(symbols, limits.max_depth))
    for index, raw in enumerate(document["functions"]):
        reader.functions.append(reader.read_function(raw, index))
    producer = document.get("producer")
    return Loaded(
        reader.functions[-1],
        tuple(reader.functions),
        version,
        producer,
        reader.constants,
        reader.constant_bytes,
        archive.data_bytes,
    )


# ----------------------------------------------------------------------------- the document
def parse_json(data: bytes, source: str) -> Any:
    """Strict JSON: UTF-8 only, no duplicate keys, no NaN/Infinity literals or overflowing
    numbers (JSON has none; opgraph tags them)."""
    where = "graph.json"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise fail(source, where, f"is not valid UTF-8 ({error})") from None
    try:
        return json.loads(
            text,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise fail(source, where, "is nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, the hooks, over-long integers
        raise fail(source, where, f"is not valid JSON: {error}") from None


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r:.60} in an object")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (non-finite floats are written as tagged values)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text:.40} overflows a float")
    return value


def check_header(document: Any, source: str) -> int:
    """The format version, after checking the top level of the document."""
    if type(document) is not dict:
        raise fail(source, "graph.json", f"must be an object, got {_kind(document)}")
    version = document.get("format_version")
    if type(version) is not int:
        raise fail(source, "format_version", f"must be an integer, got {_kind(version)}")
    if version > FORMAT_VERSION:
        raise fail(
            source,
            "format_version",
            f"the file has format version {version}, newer than this opgraph reads (up to "
            f"{FORMAT_VERSION}); upgrade opgraph to read it",
        )
    if version < 1:
        raise fail(source, "format_version", f"must be >= 1, got {version}")
    if document.get("format") != FORMAT_NAME:
        raise fail(source, "format", f"must be {FORMAT_NAME!r}, got {document.get('format')!r:.60}")
    _check_keys(
        document, {"format", "format_version", "functions"}, _TOP_KEYS, source, "graph.json"
    )
    producer = document.get("producer")
    if producer is not None and type(producer) is not str:
        raise fail(source, "producer", f"must be a string, got {_kind(producer)}")
    functions = document["functions"]
    if type(functions) is not list or not functions:
        raise fail(source, "functions", f"must be a non-empty array, got {_kind(functions)}")
    return version


def _check_keys(
    raw: dict[str, Any], required: set[str], allowed: set[str], source: str, where: str
) -> None:
    missing = sorted(required - raw.keys())
    if missing:
        raise fail(source, where, f"missing key(s) {', '.join(missing)}")
    extra = sorted(raw.keys() - allowed)
    if extra:
        shown = ", ".join(repr(k)[:40] for k in extra[:5])
        raise fail(source, where, f"unknown key(s) {shown} (allowed: {', '.join(sorted(allowed))})")


def _kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return kinds.get(type(value), f"{type(value).__name__} {value!r:.40}")


# ------------------------------------------------------------------------------- the reader
class _Reader:
    """Rebuilds Functions in file order (implements ``values.Decoder``)."""

    def __init__(self, archive: Archive, limits: Limits, dims: DimReader) -> None:
        self.archive = archive
        self.dims = dims
        self.source = archive.source
        self.limits = limits
        self.functions: list[Function] = []
        self.constants = 0
        self.constant_bytes = 0

    def read_function(self, raw: Any, index: int) -> Function:
        where = f"functions[{index}]"
        if type(raw) is not dict:
            raise fail(self.source, where, f"must be an object, got {_kind(raw)}")
        _check_keys(raw, _FUNCTION_KEYS, _FUNCTION_KEYS, self.source, where)
        name = raw["name"]
        if type(name) is not str or not _is_text(name):
            raise fail(self.source, f"{where}.name", f"must be a string, got {_kind(name)}")
        label = f"function {index} {name!r:.60}"
        nodes = raw["nodes"]
        if type(nodes) is not list:
            raise fail(self.source, label, f"nodes must be an array, got {_kind(nodes)}")
        values: list[tuple[Output, ...]] = []
        for i, raw_node in enumerate(nodes):
            values.append(self.read_node(raw_node, i, values, label).outputs)
        parameters = self._parameters(raw["parameters"], values, label)
        results = [
            self._reference(ref, len(values), values, f"{label}, result {k}")
            for k, ref in enumerate(_array(raw["results"], self.source, f"{label}, results"))
        ]
        try:
            return Function(results, parameters, name=name)
        except GraphError as error:
            raise fail(self.source, label, f"is not a valid Function: {error}") from error

    def _parameters(self, raw: Any, values: list[tuple[Output, ...]], label: str) -> list[Output]:
        parameters = []
        for k, ref in enumerate(_array(raw, self.source, f"{label}, parameters")):
            where = f"{label}, parameter {k}"
            if type(ref) is not int or not 0 <= ref < len(values):
                raise fail(
                    self.source, where, f"{ref!r:.40} is not a node index (0..{len(values) - 1})"
                )
            if len(values[ref]) != 1:
                raise fail(self.source, where, f"node {ref} is not a Parameter")
            parameters.append(values[ref][0])
        return parameters

    def _reference(
        self, ref: Any, limit: int, values: list[tuple[Output, ...]], where: str
    ) -> Output:
        """An ``[node, output]`` pair naming an output of one of the first ``limit`` nodes."""
        if not (type(ref) is list and len(ref) == 2 and all(type(x) is int for x in ref)):
            raise fail(self.source, where, f"must be [node index, output index], got {ref!r:.60}")
        node, output = ref
        if not 0 <= node < limit:
            raise fail(
                self.source,
                where,
                f"refers to node {node}, which is not an earlier node (0..{limit - 1}); nodes are "
                "stored in topological order, so forward references and cycles are not allowed",
            )
        if not 0 <= output < len(values[node]):
            raise fail(
                self.source,
                where,
                f"refers to output {output} of node {node}, which has "
                f"{len(values[node])} output(s)",
            )
        return values[node][output]

    # --------------------------------------------------------------------------- nodes
    def read_node(
        self, raw: Any, index: int, values: list[tuple[Output, ...]], function: str
    ) -> Node:
        where = f"{function}, node {index}"
        if type(raw) is not dict:
            raise fail(self.source, where, f"must be an object, got {_kind(raw)}")
        op_name = raw.get("op")
        if type(op_name) is not str or not _is_text(op_name):
            raise fail(self.source, where, f"op must be a string, got {_kind(op_name)}")
        name = raw.get("name")
        if name is not None and (type(name) is not str or not _is_text(name)):
            raise fail(self.source, where, f"name must be a string, got {_kind(name)}")
        label = f"{where} ({op_name:.60}{f' {name!r:.60}' if name is not None else ''})"
        _check_keys(raw, _NODE_REQUIRED, _NODE_REQUIRED | _NODE_OPTIONAL, self.source, label)
        cls = self._op_class(op_name, label)
        attributes = self._attributes(raw, cls, label)
        inputs = [
            self._reference(ref, index, values, f"{label}, input {k}")
            for k, ref in enumerate(_array(raw.get("inputs", []), self.source, f"{label}, inputs"))
        ]
        provenance = raw.get("provenance", _DEFAULT_PROVENANCE)
        if type(provenance) is not str or not _is_text(provenance):
            raise fail(self.source, label, f"provenance must be a string, got {_kind(provenance)}")
        node = self._build(cls, attributes, inputs, name, provenance, label)
        self._check_types(raw["types"], node, label)
        return node

    def _op_class(self, op_name: str, label: str) -> type[Op]:
        cls = OP_REGISTRY.get(op_name)
        if cls is None:
            close = difflib.get_close_matches(op_name, list(OP_REGISTRY), n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise fail(
                self.source,
                label,
                f"unknown op {op_name!r:.60}{hint} ({len(OP_REGISTRY)} ops are registered; is "
                "the module that defines it imported?)",
            )
        return cls

    def _attributes(self, raw: dict[str, Any], cls: type[Op], label: str) -> dict[str, Any]:
        version = raw["version"]
        if type(version) is not int or version < 1:
            raise fail(self.source, label, f"version must be an integer >= 1, got {_kind(version)}")
        if version > cls.version:
            raise fail(
                self.source,
                label,
                f"op version {version} is newer than this opgraph's "
                f"{cls.__name__} (version {cls.version}); upgrade opgraph to read it",
            )
        encoded = raw.get("attributes", {})
        if type(encoded) is not dict:
            raise fail(self.source, label, f"attributes must be an object, got {_kind(encoded)}")
        try:
            encoded = upgrade_attributes(cls.__name__, version, cls.version, encoded)
        except UpgradeMissing as error:
            raise fail(self.source, label, str(error)) from None
        except Exception as error:  # an upgrade function failed on this file's attributes
            raise fail(
                self.source, label, f"upgrading from version {version} failed: {error}"
            ) from error
        return self._decode_attributes(encoded, cls, label)

    def _decode_attributes(
        self, encoded: dict[str, Any], cls: type[Op], label: str
    ) -> dict[str, Any]:
        specs = field_specs(cls)
        unknown = sorted(encoded.keys() - specs.keys())
        if unknown:
            known = ", ".join(specs) or "none"
            shown = ", ".join(repr(k)[:40] for k in unknown[:5])
            raise fail(
                self.source,
                label,
                f"unknown attribute(s) {shown} for {cls.__name__} (its attributes: {known})",
            )
        decoded = {}
        for name, spec in specs.items():
            if name not in encoded:
                if spec.required:
                    raise fail(
                        self.source, label, f"missing attribute {name!r} (it has no default)"
                    )
                continue  # added to the op after the file was written: the default applies
            try:
                value = decode_value(encoded[name], self, self.limits.max_depth)
                decoded[name] = conform(value, spec)
            except ValueProblem as problem:
                raise fail(self.source, label, f"attribute {name!r}: {problem}") from None
        return decoded

    def _build(
        self,
        cls: type[Op],
        attributes: dict[str, Any],
        inputs: list[Output],
        name: str | None,
        provenance: str,
        label: str,
    ) -> Node:
        try:
            return cls(**attributes).build(*inputs, name=name, provenance=provenance)
        except OpTypeError as error:
            raise fail(self.source, label, f"the graph is ill-typed: {error}") from error
        except Exception as error:  # op code given values it never expected: the file is bad
            raise fail(
                self.source, label, f"cannot build the op: {type(error).__name__}: {error}"
            ) from error

    def _check_types(self, raw: Any, node: Node, label: str) -> None:
        try:
            recorded = tuple(
                self._decode_type(t, 0) for t in _array(raw, self.source, f"{label}, types")
            )
        except ValueProblem as problem:
            raise fail(self.source, label, f"types: {problem}") from None
        if recorded != node.output_types:
            shown = ", ".join(str(t) for t in recorded)
            inferred = ", ".join(str(t) for t in node.output_types)
            raise fail(
                self.source,
                label,
                f"the file records output type(s) ({shown}) but the op "
                f"infers ({inferred}); the file is corrupt or the op's type rule changed",
            )

    def _decode_type(self, raw: Any, depth: int) -> ValueType:
        if depth > self.limits.max_depth:
            raise ValueProblem(f"type is nested deeper than {self.limits.max_depth} levels")
        if type(raw) is list and len(raw) == 2 and type(raw[0]) is str and type(raw[1]) is list:
            return TensorType(element_type_named(raw[0]), tuple(map(self.dims.decode, raw[1])))
        if type(raw) is dict and raw.keys() == {"tuple"} and type(raw["tuple"]) is list:
            return TupleType(tuple(self._decode_type(e, depth + 1) for e in raw["tuple"]))
        raise ValueProblem(f'a type is ["f32", [2, 3]] or {{"tuple": [...]}}, got {raw!r:.60}')

    # ------------------------------------------------------------------ values.Decoder
    def function(self, payload: Any) -> Function:
        if type(payload) is not int or not 0 <= payload < len(self.functions):
            raise ValueProblem(
                f"function reference {payload!r:.40} does not name an earlier function "
                f"(0..{len(self.functions) - 1}; callees are stored before their callers)"
            )
        return self.functions[payload]

    def dim(self, payload: Any) -> Dim:
        return self.dims.expression(payload)

    def array(self, payload: Any) -> np.ndarray:
        if type(payload) is not dict or payload.keys() != _ARRAY_KEYS:
            raise ValueProblem(f"an array is {{data, element_type, shape}}, got {payload!r:.80}")
        digest = payload["data"]
        if type(digest) is not str or not _DIGEST.fullmatch(digest):
            raise ValueProblem(f"array data must be a sha256 hex digest, got {digest!r:.80}")
        element_type = element_type_named(payload["element_type"])
        shape = _shape(payload["shape"])
        if math.prod(d for d in shape if d) > _MAX_ELEMENTS:
            raise ValueProblem(
                f"array shape {list(shape)!s:.80} has more elements than an array can index "
                f"(at most {_MAX_ELEMENTS}, not counting empty dimensions)"
            )
        nbytes = math.prod(shape) * element_type.itemsize
        declared = self.archive.data_size(digest)
        if declared is None:
            raise ValueProblem(f"array data member data/{digest}.bin is missing from the archive")
        if declared != nbytes:
            raise ValueProblem(
                f"{element_type.name}{list(shape)} needs {nbytes} bytes, data member "
                f"data/{digest}.bin has {declared}"
            )
        if self.constant_bytes + nbytes > self.limits.max_data_bytes:
            raise ValueProblem(
                f"{element_type.name}{list(shape)!s:.80} takes the file's constants to "
                f"{self.constant_bytes + nbytes} bytes (each Constant holds its own copy), more "
                f"than the limit of {self.limits.max_data_bytes} (Limits.max_data_bytes; to "
                "accept it, load with limits=opgraph.serialize.Limits(max_data_bytes=...))"
            )
        data = self.archive.data(digest)
        size = element_type.itemsize
        words = np.frombuffer(data, dtype=f"<u{size}").astype(f"=u{size}", copy=False)
        if element_type.is_boolean and words.size and int(words.max()) > 1:
            raise ValueProblem(f"boolean array data/{digest}.bin holds bytes other than 0 and 1")
        self.constants += 1
        self.constant_bytes += nbytes
        return words.view(element_type.dtype).reshape(shape)


def _shape(raw: Any) -> tuple[int, ...]:
    if type(raw) is not list or not all(type(d) is int and d >= 0 for d in raw):
        raise ValueProblem(f"a shape is an array of non-negative integers, got {raw!r:.60}")
    return tuple(raw)


def _array(raw: Any, source: str, where: str) -> list[Any]:
    if type(raw) is not list:
        raise fail(source, where, f"must be an array, got {_kind(raw)}")
    return raw


def _is_text(text: str) -> bool:
    try:
        check_text(text)
    except ValueProblem:
        return False
    return True
