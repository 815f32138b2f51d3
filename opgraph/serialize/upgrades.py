"""Op version upgrades: how a file written with an older version of an op is still read.

When an op's attributes change meaning, its class bumps ``version`` and registers one upgrade
per step, keyed by ``(op name, from version)``. An upgrade receives the node's attributes as
they are in the file (the JSON form of :mod:`opgraph.serialize.values`, a fresh dict it may
change) and returns the attributes for ``from version + 1``. Reading chains the steps up to the
op's current version and then decodes as usual, so the rebuilt node is re-validated.

The file format itself is upgraded the same way, one step per format version
(:data:`FORMAT_UPGRADES`, keyed by the version a step reads): reading a file first chains the
document from its format version to the current one, then reads it as current.

Example:
    >>> @register_upgrade("Pad", from_version=1)
    ... def _pad_v1(attributes):
    ...     attributes["mode"] = {"enum": ["PadMode", "CONSTANT"]}  # v2 added a mode
    ...     return attributes
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.core.registry import Registry

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]

#: Upgrade steps by ``(op name, from version)``.
UPGRADES: Registry[tuple[str, int], Upgrade] = Registry("op upgrade")


def register_upgrade(op_name: str, from_version: int) -> Callable[[Upgrade], Upgrade]:
    """Register the upgrade of ``op_name``'s attributes from ``from_version`` to the next.

    Args:
        op_name: the op's registry name (its class name, e.g. ``"Pad"``).
        from_version: the version the upgrade reads; it returns attributes for the next one.

    Returns:
        A decorator that registers the upgrade function and returns it unchanged.

    Raises:
        RegistryError: an upgrade for this op and version is already registered.
    """
    return UPGRADES.register((op_name, from_version))


DocumentUpgrade = Callable[[dict[str, Any]], dict[str, Any]]

#: Upgrade steps of the whole ``graph.json`` document, by the format version they read.
FORMAT_UPGRADES: Registry[int, DocumentUpgrade] = Registry("format upgrade")


def register_format_upgrade(from_version: int) -> Callable[[DocumentUpgrade], DocumentUpgrade]:
    """Register the upgrade of a ``graph.json`` document from ``from_version`` to the next.

    Raises:
        RegistryError: a step from this version is already registered.
    """
    return FORMAT_UPGRADES.register(from_version)


def upgrade_document(document: dict[str, Any], version: int, current: int) -> dict[str, Any]:
    """``document`` (of format ``version``) upgraded step by step to format ``current``.

    Raises:
        UpgradeMissing: a step is not registered.
        ValueError: a step found something the older format cannot hold.
    """
    while version < current:
        step = FORMAT_UPGRADES.get(version)
        if step is None:
            raise UpgradeMissing(f"no upgrade from format version {version} is registered")
        document = step(dict(document))
        version += 1
    return document


@register_format_upgrade(1)
def _format_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added symbolic dimensions (the ``symbols`` table and ``{"dim": ...}`` values);
    every version-1 document is a version-2 document without them."""
    if "symbols" in document:
        raise ValueError("a format-version-1 file has no 'symbols' (format version 2 added them)")
    document["format_version"] = 2
    return document


class UpgradeMissing(Exception):
    """No upgrade step is registered for ``(op_name, version)``."""


def upgrade_attributes(
    op_name: str, version: int, current: int, attributes: dict[str, Any]
) -> dict[str, Any]:
    """``attributes`` of ``op_name`` at ``version`` upgraded step by step to ``current``.

    Raises:
        UpgradeMissing: a step is not registered (the message names it).
        TypeError: an upgrade returned something other than a dict.
        Exception: whatever an upgrade function raises (the reader wraps it).
    """
    while version < current:
        step = UPGRADES.get((op_name, version))
        if step is None:
            raise UpgradeMissing(
                f"op {op_name} version {version} is older than this opgraph's version {current} "
                f"and no upgrade from version {version} is registered"
            )
        attributes = step(dict(attributes))
        if not isinstance(attributes, dict):
            raise TypeError(
                f"the upgrade of {op_name} from version {version} returned "
                f"{type(attributes).__name__}, not a dict of attributes"
            )
        version += 1
    return attributes
