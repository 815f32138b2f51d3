"""The one bounded LRU map behind the per-binding and per-signature caches."""

import threading

import pytest

from opgraph.core.errors import GraphError
from opgraph.runtime.cache import LruCache


def test_a_hit_keeps_an_entry_and_the_least_recently_used_is_dropped() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.values() == [1, 3]
    assert "b" not in cache and len(cache) == 2


def test_get_or_make_makes_once_per_missing_key() -> None:
    made: list[str] = []
    cache: LruCache[str, str] = LruCache(4)

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    assert [cache.get_or_make(k, lambda k=k: make(k)) for k in "abab"] == ["A", "B", "A", "B"]
    assert made == ["a", "b"]


def test_a_failing_make_stores_nothing() -> None:
    cache: LruCache[str, int] = LruCache(1)

    def fail() -> int:
        raise GraphError("no")

    with pytest.raises(GraphError):
        cache.get_or_make("x", fail)
    assert len(cache) == 0


@pytest.mark.parametrize("size", [0, -1, 1.5])
def test_a_size_below_one_is_a_clear_error(size: object) -> None:
    with pytest.raises(GraphError, match="expected size >= 1"):
        LruCache(size)  # type: ignore[arg-type]


def test_threads_never_see_more_than_size_entries() -> None:
    cache: LruCache[int, int] = LruCache(8)
    seen: list[int] = []

    def work(offset: int) -> None:
        for i in range(500):
            cache.put(offset * 1000 + i, i)
            seen.append(len(cache))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(seen) <= 8 and len(cache) == 8
