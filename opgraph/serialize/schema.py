"""Constants of the file format and the limits a reader enforces (see ``docs/format.md``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from opgraph.core.errors import SerializationError

#: The newest format version this opgraph reads and writes. Readers accept every version up to
#: it (older ones through ``upgrades.FORMAT_UPGRADES``) and refuse newer ones.
FORMAT_VERSION = 2

#: The version a writer puts in a file without symbolic dimensions: such a file is exactly a
#: version-1 file, so opgraph releases that read only version 1 still read it.
STATIC_FORMAT_VERSION = 1

#: The value of the top-level ``format`` key: tells an opgraph file from any other zip of JSON.
FORMAT_NAME = "opgraph"

#: The zip member holding the graph.
GRAPH_MEMBER = "graph.json"

#: Constant data members: ``data/<sha256 of the bytes>.bin``, raw little-endian elements.
DATA_MEMBER = re.compile(r"data/([0-9a-f]{64})\.bin")

#: What every zip archive starts with (a local file header).
ZIP_SIGNATURE = b"PK\x03\x04"

_MiB = 1 << 20
_GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Caps a reader enforces before it reads or allocates anything, so a hostile or corrupt file
    fails with :class:`SerializationError` instead of exhausting memory.

    Attributes:
        max_graph_bytes: the largest ``graph.json`` (uncompressed) accepted. A 100k-node chain
            takes about 15 MiB.
        max_data_bytes: the most constant data a file may make this process hold: checked
            against the stored data members together (before reading), and against every
            constant value the graph builds, counted once per Constant that refers to it (each
            holds its own copy). Raise it to load a larger model.
        max_graph_compression: how many times its compressed size ``graph.json`` may inflate to
            (beyond its first MiB): the writer's JSON deflates about 10 to 40 fold, a deflate
            bomb about 1000 fold.
        max_members: the most zip members accepted.
        max_depth: the deepest nesting of attribute values and tuple types.
    """

    max_graph_bytes: int = 512 * _MiB
    max_data_bytes: int = 4 * _GiB
    max_graph_compression: int = 200
    max_members: int = 1_000_000
    max_depth: int = 64

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if type(value) is not int or value < 0:
                raise SerializationError(
                    f"Limits.{name} must be a non-negative int, got {value!r:.60}"
                )


DEFAULT_LIMITS = Limits()


def fail(source: str, where: str, problem: str) -> SerializationError:
    """The error every check raises: ``"<source>: <where>: <problem>"``."""
    location = f"{source}: {where}" if where else source
    return SerializationError(f"{location}: {problem}")
