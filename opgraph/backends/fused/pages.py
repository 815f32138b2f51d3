"""Host memory laid out for the generated code: anonymous mappings aligned to pages, and to
2 MiB (advised for transparent huge pages) from 2 MiB up.

Executables' arenas come from :func:`arena_buffer` (2026-11-26, H89: with ``np.empty`` an
arena's offset within a page depended on the allocator's history). Arrays that lowerings derive
from constants (packed weights: :mod:`~opgraph.backends.fused.derived`) are moved into such a
mapping by :func:`huge_page_copy` (2026-11-28, h151): a numpy array of megabytes sat on 4 KiB
pages, where a product that streams its weights from memory on every call takes a TLB miss
(a nested one in a virtual machine) per 4 KiB and the hardware prefetchers stop at every
page's end.
"""

from __future__ import annotations

import contextlib
import mmap

import numpy as np

#: Arenas of at least this many bytes start on a 2 MiB boundary and ask for transparent huge
#: pages; smaller ones start on a page. Either way the arena's address modulo 4 KiB (and its
#: offset within a huge page) is the same in every process: with ``np.empty`` it depended on
#: the allocator's history (brk or mmap, 16-byte steps; 2026-11-26, H89).
HUGE_PAGE = 2 << 20
PAGE = mmap.PAGESIZE


def arena_buffer(nbytes: int, whole_huge_pages: bool = False) -> tuple[np.ndarray, int]:
    """A fresh arena of ``nbytes`` (at least one byte) from its own anonymous mapping: (the
    array that keeps it alive, the arena's address). The address is a multiple of 2 MiB for
    arenas of 2 MiB or more (the mapping is advised ``MADV_HUGEPAGE`` where the system has
    it: the whole mapping, or with ``whole_huge_pages`` only the huge pages that the arena
    fills, so that its last part does not take a whole one), else of the page size. Every page
    is touched here, so no call faults on it later."""
    nbytes = max(int(nbytes), 1)
    align = HUGE_PAGE if nbytes >= HUGE_PAGE else PAGE
    length = -(-nbytes // PAGE) * PAGE + (align - PAGE)
    region = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = np.frombuffer(region, np.uint8)
    start: int = whole.__array_interface__["data"][0]
    skip = -start % align
    if align == HUGE_PAGE and hasattr(mmap, "MADV_HUGEPAGE"):
        with contextlib.suppress(OSError):  # no transparent huge pages: small pages it is
            advised = nbytes // HUGE_PAGE * HUGE_PAGE if whole_huge_pages else length - skip
            region.madvise(mmap.MADV_HUGEPAGE, skip, advised)
    arena = whole[skip : skip + nbytes]
    arena[::PAGE] = 0  # first touch now, not inside the first call
    return arena, start + skip


def huge_page_copy(array: np.ndarray) -> np.ndarray:
    """``array`` itself under 2 MiB; from 2 MiB up a C-contiguous copy of it at the start of
    an :func:`arena_buffer` of its own (2 MiB-aligned; huge pages, where the system has
    them, for every whole 2 MiB of it, small pages after them; the same values, shape and
    dtype)."""
    if array.nbytes < HUGE_PAGE:
        return array
    arena, _ = arena_buffer(array.nbytes, whole_huge_pages=True)
    copy = arena.view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy
