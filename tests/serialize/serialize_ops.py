"""Test-only op classes and helpers for the serialization tests.

The ops are frozen slotted dataclasses like ``@opclass`` makes, but they are *not* registered at
import (so the coverage test never sees them): the ``test_ops`` fixture puts them into
``OP_REGISTRY`` for the duration of one test.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import json
import zipfile
from typing import Any

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.op import Op, require, set_attr
from opgraph.core.tensor_type import TensorType
from opgraph.serialize import register_upgrade


def unregistered_opclass(cls: type) -> Any:
    return dataclasses.dataclass(frozen=True, slots=True)(cls)


class Rounding(enum.Enum):
    HALF_EVEN = "half_even"
    HALF_UP = "half_up"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@unregistered_opclass
class Kitchen(Op):
    """Identity with one attribute of every kind the format encodes."""

    scale: float
    rounding: Rounding
    windows: tuple[tuple[int, int], ...]
    level: Level = Level.LOW
    limit: int | None = None
    label: str = ""
    exact: bool = False
    accumulate: ElementType = et.f32
    mixed: tuple[int | None, ...] = ()
    pads: tuple[float, ...] = ()
    num_inputs = 1

    def infer(self, x: TensorType) -> TensorType:
        return x


@unregistered_opclass
class Split2(Op):
    """Two outputs: the input and its element type converted to ``to`` (a multi-output op)."""

    to: ElementType
    num_inputs = 1
    multi_output = True

    def __post_init__(self) -> None:
        set_attr(self, "to", et.as_element_type(self.to))

    def infer(self, x: TensorType) -> tuple[TensorType, TensorType]:
        return x, TensorType(self.to, x.shape)


@unregistered_opclass
class Picky(Op):
    """Rejects ``n == 0`` in its type rule; ``n == 13`` makes its constructor fail badly."""

    n: int
    num_inputs = 1

    def __post_init__(self) -> None:
        if self.n == 13:
            raise ZeroDivisionError("unlucky")

    def infer(self, x: TensorType) -> TensorType:
        require(self.n != 0, "n must not be 0")
        return x


@unregistered_opclass
class Listy(Op):
    """Holds a list: a kind the format refuses to store (not hashable, not exact)."""

    values: Any
    num_inputs = 1

    def infer(self, x: TensorType) -> TensorType:
        return x


@unregistered_opclass
class Scaled(Op):
    """Version 3. v1 had ``factor: int``; v2 renamed it ``scale: float``; v3 added ``bias``."""

    scale: float
    bias: float
    num_inputs = 1
    version = 3

    def infer(self, x: TensorType) -> TensorType:
        if not x.element_type.is_real:
            raise OpTypeError("needs a float input")
        return x


@register_upgrade("Scaled", from_version=1)
def _scaled_v1(attributes: dict[str, Any]) -> dict[str, Any]:
    attributes["scale"] = float(attributes.pop("factor"))
    return attributes


@register_upgrade("Scaled", from_version=2)
def _scaled_v2(attributes: dict[str, Any]) -> dict[str, Any]:
    attributes["bias"] = 0.0
    return attributes


@unregistered_opclass
class Stuck(Op):
    """Version 2 with no upgrade from version 1."""

    num_inputs = 1
    version = 2

    def infer(self, x: TensorType) -> TensorType:
        return x


@unregistered_opclass
class Broken(Op):
    """Version 2 whose upgrade from version 1 raises."""

    num_inputs = 1
    version = 2

    def infer(self, x: TensorType) -> TensorType:
        return x


@register_upgrade("Broken", from_version=1)
def _broken_v1(attributes: dict[str, Any]) -> dict[str, Any]:
    raise KeyError("factor")


@unregistered_opclass
class Grown(Op):
    """An op that gained ``extra`` (with a default) and ``needed`` (without) after v1 files."""

    needed: int
    extra: int = 7
    num_inputs = 1

    def infer(self, x: TensorType) -> TensorType:
        return x


@unregistered_opclass
class Loose(Op):
    """An attribute whose annotation cannot be evaluated: values decode by tag, unchecked, and
    enum tags resolve by class name in this module."""

    setting: NotImportedAnywhere  # noqa: F821
    num_inputs = 1

    def infer(self, x: TensorType) -> TensorType:
        return x


TEST_OPS = (Kitchen, Split2, Picky, Listy, Scaled, Stuck, Broken, Grown, Loose)


# ------------------------------------------------------------------------ archive surgery
def members(data: bytes) -> dict[str, bytes]:
    """Every member of an archive, by name, in order."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def data_members(data: bytes) -> dict[str, bytes]:
    """The constant data members of an archive, by name."""
    return {n: b for n, b in members(data).items() if n != "graph.json"}


def document(data: bytes) -> dict[str, Any]:
    """The parsed graph.json of an archive."""
    return json.loads(members(data)["graph.json"])


def node(doc: dict[str, Any], op: str, function: int = -1) -> dict[str, Any]:
    """The first node of ``op`` in a document's function (the main one by default)."""
    return next(n for n in doc["functions"][function]["nodes"] if n["op"] == op)


def rezip(
    graph: dict[str, Any] | bytes | str,
    data_members: dict[str, bytes] | None = None,
    compression: int = zipfile.ZIP_STORED,
) -> bytes:
    """An archive from a document (or raw graph.json bytes) and data members."""
    if isinstance(graph, dict):
        graph = json.dumps(graph)
    if isinstance(graph, str):
        graph = graph.encode("utf-8")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        archive.writestr("graph.json", graph)
        for name, blob in (data_members or {}).items():
            archive.writestr(name, blob)
    return buffer.getvalue()


def with_document(data: bytes, doc: dict[str, Any]) -> bytes:
    """``data`` with its graph.json replaced by ``doc`` (data members kept)."""
    return rezip(doc, data_members(data))


def patch_directory(data: bytes, name: str, **fields: int) -> bytes:
    """``data`` with central-directory fields of member ``name`` overwritten (crafting sizes,
    flags and methods a normal writer never produces). Fields: flags, method, compressed_size,
    file_size, header_offset."""
    offsets = {"flags": (8, 2), "method": (10, 2), "compressed_size": (20, 4)}
    offsets |= {"file_size": (24, 4), "header_offset": (42, 4)}
    blob = bytearray(data)
    start = 0
    encoded = name.encode()
    while True:
        start = blob.index(b"PK\x01\x02", start)
        name_length = int.from_bytes(blob[start + 28 : start + 30], "little")
        if bytes(blob[start + 46 : start + 46 + name_length]) == encoded:
            break
        start += 4
    for field, value in fields.items():
        offset, width = offsets[field]
        blob[start + offset : start + offset + width] = value.to_bytes(width, "little")
    return bytes(blob)
