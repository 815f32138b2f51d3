"""Edits of JSON documents for the serializer fuzzers: every path into a value, and one
replace/delete/insert/duplicate applied at a path (shared by ``tests/serialize`` and
``tests/reliability``)."""

from __future__ import annotations

import copy
from typing import Any

#: What :func:`apply_edit` can do at a path.
ACTIONS = ("replace", "delete", "insert", "duplicate")


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (the root, ``()``, included)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += paths(item, (*prefix, i))
    return found


def apply_edit(doc: Any, path: tuple[Any, ...], action: str, value: Any, key: str) -> Any:
    """``doc`` with ``action`` applied at ``path`` (in place where ``path`` is not the root):
    replace the item by ``value``, delete it, insert ``value`` before it (under ``key`` in a
    dict), or duplicate it (in a list). Returns the edited document."""
    value = copy.deepcopy(value)  # drawn values may be shared: never alias them into ``doc``
    if not path:
        return value if action == "replace" else doc
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif action == "insert" and isinstance(parent, dict):
        parent[key] = value
    elif action == "insert":
        parent.insert(last, value)
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    return doc
