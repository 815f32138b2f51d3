"""Where an executable's arena lands: the same place relative to pages in every process.

With ``np.empty`` the arena's address modulo 4 KiB depended on the allocator's history (a
heap chunk at any 16-byte step, or a fresh mapping): each process laid its planes out
differently relative to pages and to each other. ``arena_buffer`` maps each arena on its
own: a 2 MiB boundary (advised for transparent huge pages) from 2 MiB up, a page boundary
below; its pages are touched when it is made, not inside a call (2026-11-26, H89). An
executable's constants (packed weights) share one such mapping (``constant_arena``,
2026-11-28, h151): numpy's arrays of megabytes sat on 4 KiB pages.
"""

import mmap
import os
from pathlib import Path

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config
from opgraph.backends.cpu.native import HUGE_PAGE, ArenaPool, arena_buffer, constant_arena
from opgraph.backends.fused.program import Buffer, BufferKind
from opgraph.core import element_type as et

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


def _constant(index: int, data: np.ndarray | None) -> Buffer:
    size = 0 if data is None else data.size
    return Buffer(index, BufferKind.CONST, et.f32, size, index, f"c{index}", data)


def test_constants_move_into_one_arena_with_their_values() -> None:
    rng = np.random.default_rng(1)
    values = [rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (HUGE_PAGE // 4,), (7,))]
    buffers = [_constant(0, values[0].copy()), _constant(1, None), _constant(2, values[1].copy())]
    buffers.append(_constant(3, values[2].copy()))
    moved = constant_arena(buffers)
    assert moved[1] is None and buffers[1].data is None
    kept = [m for m in moved if m is not None]
    for got, want, b in zip(kept, values, (buffers[0], buffers[2], buffers[3]), strict=True):
        assert got is b.data and got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        assert got.ctypes.data % 64 == 0
    first = kept[0].ctypes.data
    assert first % HUGE_PAGE == 0  # over 2 MiB in all: one huge-page arena
    assert [k.ctypes.data - first for k in kept] == [0, 64, 64 + HUGE_PAGE]


def test_no_constants_no_arena() -> None:
    assert constant_arena([]) == []
    assert constant_arena([_constant(0, None)]) == [None]


def test_an_executables_weights_are_in_its_constant_arena(tmp_path: Path) -> None:
    n = 1024  # a 4 MiB weight: packed into panels, then moved
    a = og.parameter(og.f32, (4, n))
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    fn = og.Function([ops.matmul(a, og.constant(w))], [a])
    backend = CpuBackend(CpuConfig(tmp_path, default_config().compiler, num_threads=1))
    exe = backend.compile(fn)
    x = rng.standard_normal((4, n)).astype(np.float32)
    (got,) = exe(x)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w, rtol=1e-3, atol=1e-3)
    constants = [c for c in exe._constants if c is not None]  # type: ignore[attr-defined]
    assert constants
    starts = sorted(c.ctypes.data for c in constants)
    assert starts[0] % HUGE_PAGE == 0 and all(s % 64 == 0 for s in starts)
