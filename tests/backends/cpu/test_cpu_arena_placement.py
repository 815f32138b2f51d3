"""Where an executable's arena lands: the same place relative to pages in every process.

With ``np.empty`` the arena's address modulo 4 KiB depended on the allocator's history (a
heap chunk at any 16-byte step, or a fresh mapping): each process laid its planes out
differently relative to pages and to each other. ``arena_buffer`` maps each arena on its
own: a 2 MiB boundary (advised for transparent huge pages) from 2 MiB up, a page boundary
below; its pages are touched when it is made, not inside a call (2026-11-26, H89). Packed
weights of 2 MiB and more are moved into such a mapping (``huge_page_array``, 2026-11-28,
h151): numpy's arrays of megabytes sat on 4 KiB pages.
"""

import gc
import mmap
import os
import weakref
from pathlib import Path

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config
from opgraph.backends.cpu.native import HUGE_PAGE, ArenaPool, arena_buffer
from opgraph.backends.fused.derived import derived, entries
from opgraph.backends.fused.pages import empty, huge_page_array

PAGE = mmap.PAGESIZE


def _mapping(address: int) -> dict[str, str]:
    """The /proc/self/smaps fields of the mapping holding ``address``."""
    fields: dict[str, str] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if inside:
                break
            inside = lo <= address < hi
        elif inside:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


@pytest.mark.parametrize("nbytes", [1, 100, PAGE, 3 * PAGE + 5, HUGE_PAGE - 1])
def test_small_arenas_start_on_a_page(nbytes: int) -> None:
    arena, start = arena_buffer(nbytes)
    assert start % PAGE == 0
    assert arena.size == nbytes and arena.ctypes.data == start
    arena[:] = 7  # all of it is writable
    assert int(arena[-1]) == 7


@pytest.mark.parametrize("nbytes", [HUGE_PAGE, 6_081_280])
def test_large_arenas_start_on_a_huge_page(nbytes: int) -> None:
    arena, start = arena_buffer(nbytes)
    assert start % HUGE_PAGE == 0
    assert arena.size == nbytes and arena.ctypes.data == start
    arena[-1] = 1


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc/self/smaps")
def test_arena_pages_are_touched_when_made() -> None:
    arena, start = arena_buffer(5 * PAGE)
    fields = _mapping(start)
    assert int(fields["Rss"].split()[0]) * 1024 >= 5 * PAGE, fields


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(
    not THP.exists() or "[never]" in THP.read_text(), reason="no transparent huge pages here"
)
def test_large_arenas_ask_for_huge_pages() -> None:
    _, start = arena_buffer(HUGE_PAGE + PAGE)
    assert "hg" in _mapping(start).get("VmFlags", "").split()


def _compiled(tmp_path: Path, n: int) -> og.Executable:
    """tanh(a @ b) @ b: the first product's result lives in the arena (n*n*4 bytes)."""
    a, b = og.parameter(og.f32, (n, n)), og.parameter(og.f32, (n, n))
    fn = og.Function([ops.matmul(ops.tanh(ops.matmul(a, b)), b)], [a, b])
    backend = CpuBackend(CpuConfig(tmp_path, default_config().compiler, num_threads=1))
    return backend.compile(fn)


@pytest.mark.parametrize("n", [64, 1024])  # arenas of 16 KiB and 4 MiB
def test_an_executables_arena_is_aligned_and_results_are_right(tmp_path: Path, n: int) -> None:
    exe = _compiled(tmp_path, n)
    peak = exe.memory_plan().peak  # type: ignore[attr-defined]
    assert peak >= n * n * 4
    rng = np.random.default_rng(0)
    a, b = ((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32) for _ in range(2))
    (got,) = exe(a, b)
    want = np.tanh(a.astype(np.float64) @ b) @ b
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    slot = exe._pool.take()  # type: ignore[attr-defined]
    start = int(slot[1].value or 0)
    assert start == slot[2].ctypes.data and slot[2].size >= peak
    assert start % (HUGE_PAGE if peak >= HUGE_PAGE else PAGE) == 0


def test_a_grown_arena_is_aligned_too() -> None:
    pool = ArenaPool(100, 1, [])
    table, pointer, arena = pool.take_at_least(3 * HUGE_PAGE)
    assert arena.size >= 3 * HUGE_PAGE and int(pointer.value or 0) % HUGE_PAGE == 0
    pool.give((table, pointer, arena))
    _, again, kept = pool.take_at_least(HUGE_PAGE)  # big enough already: kept
    assert kept is arena and again is pointer


def test_small_derived_arrays_stay_where_they_are() -> None:
    small = np.arange(10, dtype=np.float32)
    assert huge_page_array(small) is small


def test_large_derived_arrays_move_to_huge_pages_with_their_values() -> None:
    rng = np.random.default_rng(1)
    big = rng.standard_normal((HUGE_PAGE // 4 + 5, 3)).astype(np.float32)[:, 1]  # strided
    moved = huge_page_array(big)
    assert moved.ctypes.data % HUGE_PAGE == 0 and moved.flags.c_contiguous
    assert moved.shape == big.shape and moved.dtype == big.dtype
    assert np.array_equal(moved.view(np.uint32), big.view(np.uint32))


@pytest.mark.skipif(
    not THP.exists() or "[never]" in THP.read_text(), reason="no transparent huge pages here"
)
def test_an_executables_packed_weights_are_on_huge_pages(tmp_path: Path) -> None:
    n = 1024  # a 4 MiB weight, packed into panels (a derived array), then moved
    a = og.parameter(og.f32, (4, n))
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    fn = og.Function([ops.matmul(a, og.constant(w))], [a])
    backend = CpuBackend(CpuConfig(tmp_path, default_config().compiler, num_threads=1))
    exe = backend.compile(fn)
    x = rng.standard_normal((4, n)).astype(np.float32)
    (got,) = exe(x)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w, rtol=1e-3, atol=1e-3)
    big = [c for c in exe._constants if c is not None and c.nbytes >= HUGE_PAGE]  # type: ignore[attr-defined]
    assert big
    for c in big:
        assert c.ctypes.data % HUGE_PAGE == 0
        assert "hg" in _mapping(c.ctypes.data).get("VmFlags", "").split()


def _resident(array: np.ndarray) -> list[bool]:
    """For each page of ``array``'s bytes, whether it is in memory (``/proc/self/pagemap``'s
    present bit, which an unprivileged process may read for itself)."""
    first = array.ctypes.data // PAGE
    last = (array.ctypes.data + array.nbytes - 1) // PAGE
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(first * 8)
        entries = np.frombuffer(pagemap.read((last - first + 1) * 8), np.uint64)
    return [bool(e >> np.uint64(63)) for e in entries]


def test_empty_places_large_arrays_on_untouched_huge_page_mappings() -> None:
    assert isinstance(empty((3, 5), np.float32), np.ndarray)
    placed = empty((HUGE_PAGE // 8 + 3, 2), np.float32)
    assert placed.ctypes.data % HUGE_PAGE == 0 and placed.flags.c_contiguous
    assert not any(_resident(placed))  # the maker's write is the first touch
    placed[...] = 1.5
    assert all(_resident(placed))
    assert huge_page_array(placed) is placed  # already in place: not copied again


def test_a_view_is_written_into_its_huge_page_mapping_once() -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((64, HUGE_PAGE // 64 + 16)).astype(np.float32)
    view = rows.reshape(4, 16, -1).transpose(0, 2, 1)  # panels, as packed_filters makes them
    placed = huge_page_array(view)
    assert placed.ctypes.data % HUGE_PAGE == 0 and placed.flags.c_contiguous
    assert placed.shape == view.shape and all(_resident(placed))
    assert np.array_equal(placed.view(np.uint32), np.ascontiguousarray(view).view(np.uint32))


def _derive_a_contiguous_view() -> weakref.ref[np.ndarray]:
    """A derived array that is a contiguous view of its read-only source (a weak reference
    to that source back): the value is a copy of it."""
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    source.flags.writeable = False
    value = derived(source, "a contiguous view", lambda: source.reshape(4, 3))
    assert not np.shares_memory(value, source) and not value.flags.writeable
    assert np.array_equal(value, source.reshape(4, 3))
    return weakref.ref(source)


def test_a_derived_view_of_its_source_is_copied_and_dropped_with_it() -> None:
    gc.collect()  # other tests' dead constants go first
    held = entries()
    alive = _derive_a_contiguous_view()
    gc.collect()
    assert alive() is None and entries() == held  # the value did not keep its source alive
