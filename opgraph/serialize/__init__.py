"""Saving and loading Functions: a zip of versioned JSON plus raw constant data.

``save(fn, path)`` / ``load(path)`` for files, ``serialize(fn)`` / ``deserialize(data)`` for bytes.
The format is generic over op dataclass fields, keyed by op registry name and version; it is
specified in ``docs/format.md``. Loading rebuilds every node through its op, so a loaded graph
is type-checked again, and loading a file can only ever build ops (no pickle, no eval).
"""

from opgraph.serialize.api import MissingDirectoryError, deserialize, load, save, serialize
from opgraph.serialize.schema import DEFAULT_LIMITS, FORMAT_VERSION, Limits
from opgraph.serialize.upgrades import UPGRADES, register_upgrade

__all__ = [
    "DEFAULT_LIMITS",
    "FORMAT_VERSION",
    "UPGRADES",
    "Limits",
    "MissingDirectoryError",
    "deserialize",
    "load",
    "register_upgrade",
    "save",
    "serialize",
]
