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
