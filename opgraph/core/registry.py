"""Registries: the one mechanism for per-op behaviour outside an op (kernels, lowerings, …)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from opgraph.core.errors import RegistryError

K = TypeVar("K")
V = TypeVar("V")


def _key_name(key: Any) -> str:
    return getattr(key, "__name__", None) or str(key)


class Registry(Generic[K, V]):
    """A mapping that refuses duplicates and lists what it has on a miss.

    Example:
        >>> KERNELS: Registry[type, Callable] = Registry("interpreter kernel")
        >>> @KERNELS.register(Add)
        ... def _add(op, a, b): return a + b
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[K, V] = {}

    def add(self, key: K, value: V) -> V:
        if key in self._items:
            raise RegistryError(f"{self.what} for {_key_name(key)} is already registered")
        self._items[key] = value
        return value

    def register(self, key: K) -> Callable[[V], V]:
        """Decorator form of :meth:`add`."""

        def decorate(value: V) -> V:
            return self.add(key, value)

        return decorate

    def __getitem__(self, key: K) -> V:
        try:
            return self._items[key]
        except KeyError:
            known = ", ".join(sorted(_key_name(k) for k in self._items)) or "none"
            raise RegistryError(
                f"no {self.what} is registered for {_key_name(key)}; registered: {known}"
            ) from None

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._items.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[K, V]]:
        return list(self._items.items())


class VersionedRegistry(Generic[K, V]):
    """Registrations keyed by ``(key, since)``: the one used for a version is the newest whose
    ``since`` is at most that version (ONNX opsets; the bridges' converters and exporters).

    Duplicates of ``(key, since)`` are refused; :meth:`require` says what is registered on a
    miss. A registry whose entries do not depend on a version registers everything at the
    default ``since`` and looks up without a version.

    Args:
        what: what an entry is, for messages ("ONNX converter").
        version: what a version is called, for messages ("opset"); None for a registry
            whose entries do not depend on a version (messages then name no version).
        name: how a key is printed in messages and listings.

    Example:
        >>> CONVERTERS: VersionedRegistry[str, Callable] = VersionedRegistry("converter", "opset")
        >>> @CONVERTERS.register("Relu", since=14)
        ... def _relu(ctx): ...
        >>> CONVERTERS.lookup("Relu", 18) is _relu
        True
    """

    def __init__(
        self, what: str, version: str | None = None, name: Callable[[K], str] = _key_name
    ) -> None:
        self.what = what
        self.version = version
        self.name = name
        self._items: dict[K, list[tuple[int, V]]] = {}

    def add(self, key: K, value: V, since: int = 0) -> V:
        """Register ``value`` for ``key`` from version ``since`` on.

        Raises:
            RegistryError: ``key`` already has an entry from ``since``.
        """
        versions = self._items.setdefault(key, [])
        if any(v == since for v, _ in versions):
            when = f" since {self.version} {since}" if self.version else ""
            raise RegistryError(f"{self.what} for {self.name(key)}{when} is already registered")
        versions.append((since, value))
        versions.sort(key=lambda item: item[0])
        return value

    def register(self, *keys: K, since: int = 0) -> Callable[[V], V]:
        """Decorator form of :meth:`add`, for one or more keys."""

        def decorate(value: V) -> V:
            for key in keys:
                self.add(key, value, since)
            return value

        return decorate

    def lookup(self, key: K, version: int | None = None) -> V | None:
        """The entry for ``key`` at ``version`` (the newest when None), or None.

        An unhashable key has no entry.
        """
        try:
            versions = self._items.get(key, [])
        except TypeError:
            return None
        chosen = None
        for since, value in versions:
            if version is None or since <= version:
                chosen = value
        return chosen

    def require(self, key: K, version: int | None = None) -> V:
        """:meth:`lookup` that raises on a miss.

        Raises:
            RegistryError: naming the versions ``key`` has, or the registered keys.
        """
        found = self.lookup(key, version)
        if found is not None:
            return found
        where = f" at {self.version or 'version'} {version}" if version is not None else ""
        if key in self:
            sinces = ", ".join(str(v) for v in self.versions(key))
            known = f"{self.name(key)} has entries since {self.version or 'version'} {sinces}"
        else:
            known = "registered: " + (", ".join(sorted({self.name(k) for k in self})) or "none")
        raise RegistryError(f"no {self.what} is registered for {self.name(key)}{where}; {known}")

    def versions(self, key: K) -> list[int]:
        """The ``since`` versions registered for ``key``, ascending."""
        return [since for since, _ in self._items.get(key, [])]

    def entries(self) -> list[tuple[K, int, V]]:
        """Every ``(key, since, value)``, in registration order of the keys."""
        return [(k, since, v) for k, versions in self._items.items() for since, v in versions]

    def __contains__(self, key: object) -> bool:
        try:
            return key in self._items
        except TypeError:
            return False

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
