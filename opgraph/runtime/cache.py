"""A bounded, thread-safe, least-recently-used map: the one cache behind every per-binding and
per-signature cache (symbolic CPU plans, specialised executables, ONNX sessions, run-time ONNX
nodes, the PyTorch bridge's compiled graphs).

``functools.lru_cache`` memoises a function by its arguments; these caches are keyed by a
value computed from a call's arguments and filled by code that must sometimes hold its own
lock (a compile that must not run twice), so they need a map with ``get`` and ``put``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from opgraph.core.errors import GraphError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most ``size`` entries; a hit makes its entry the most recently used, an insertion
    past ``size`` drops the least recently used. Every method is atomic."""

    def __init__(self, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise GraphError(f"a cache holds at least one entry: expected size >= 1, got {size!r}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The entry of ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> None:
        """Store ``value`` as the most recently used entry, dropping the oldest past ``size``."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The entry of ``key``, made by ``make()`` (outside the lock, so a slow make does not
        block hits on other keys; two threads missing at once may both make it, the later
        result is kept) and stored when missing."""
        found = self.get(key)
        if found is not None:
            return found
        made = make()
        self.put(key, made)
        return made

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def values(self) -> list[V]:
        """The entries, least recently used first."""
        with self._lock:
            return list(self._entries.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __iter__(self) -> Iterator[K]:
        """The keys as they were at the call, least recently used first."""
        return iter(self.keys())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries
