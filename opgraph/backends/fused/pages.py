"""Host memory laid out for the generated code: anonymous mappings aligned to pages, and to
2 MiB (advised for transparent huge pages) from 2 MiB up.

Executables' arenas come from :func:`arena_buffer` (2026-11-26, H89: with ``np.empty`` an
arena's offset within a page depended on the allocator's history). Arrays that lowerings derive
from constants (packed weights: :mod:`~opgraph.backends.fused.derived`) live in such a mapping
(:func:`huge_page_array`; 2026-11-28, h151): a numpy array of megabytes sat on 4 KiB pages,
where a product that streams its weights from memory on every call takes a TLB miss (a nested
one in a virtual machine) per 4 KiB and the hardware prefetchers stop at every page's end.
Lowerings write them there directly (:func:`empty`, or a view that :func:`huge_page_array`
writes once; 2026-11-28, h159): made in numpy's memory and copied, each array cost a rebuilt
compile two more passes over its bytes (the copy and the separate first touch of the mapping)
and the faults of a second, 4 KiB-paged, allocation.
"""

from __future__ import annotations

import contextlib
import math
import mmap

import numpy as np
import numpy.typing as npt

#: Arenas of at least this many bytes start on a 2 MiB boundary and ask for transparent huge
#: pages; smaller ones start on a page. Either way the arena's address modulo 4 KiB (and its
#: offset within a huge page) is the same in every process: with ``np.empty`` it depended on
#: the allocator's history (brk or mmap, 16-byte steps; 2026-11-26, H89).
HUGE_PAGE = 2 << 20
PAGE = mmap.PAGESIZE


def arena_buffer(
    nbytes: int, whole_huge_pages: bool = False, touch: bool = True
) -> tuple[np.ndarray, int]:
    """A fresh arena of ``nbytes`` (at least one byte) from its own anonymous mapping: (the
    array that keeps it alive, the arena's address). The address is a multiple of 2 MiB for
    arenas of 2 MiB or more (the mapping is advised ``MADV_HUGEPAGE`` where the system has
    it: the whole mapping, or with ``whole_huge_pages`` only the huge pages that the arena
    fills, so that its last part does not take a whole one), else of the page size. Every page
    is touched here, so no call faults on it later; without ``touch`` none is (for an arena
    that its maker writes whole at once: the write is the first touch)."""
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
    if touch:
        arena[::PAGE] = 0  # first touch now, not inside the first call
    return arena, start + skip


def empty(shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialised C-contiguous array (``np.empty``'s), from 2 MiB up at the start of an
    :func:`arena_buffer` of its own (2 MiB-aligned; huge pages, where the system has them, for
    every whole 2 MiB of it, small pages after them) whose pages are not touched yet: for an
    array its maker writes whole."""
    kind = np.dtype(dtype)
    nbytes = math.prod(shape) * kind.itemsize
    if nbytes < HUGE_PAGE:
        return np.empty(shape, kind)
    arena, _ = arena_buffer(nbytes, whole_huge_pages=True, touch=False)
    return arena.view(kind).reshape(shape)


def huge_page_array(array: np.ndarray) -> np.ndarray:
    """``array``'s values as a C-contiguous array, from 2 MiB up on huge pages: ``array``
    itself where it already is one (from :func:`empty`), else written once into
    :func:`empty`'s array (the same shape and dtype); under 2 MiB
    ``np.ascontiguousarray(array)``."""
    if array.nbytes < HUGE_PAGE:
        return np.ascontiguousarray(array)
    if _at_a_mapping_start(array):
        return array
    placed = empty(array.shape, array.dtype)
    placed[...] = array
    return placed


def _at_a_mapping_start(array: np.ndarray) -> bool:
    """Whether ``array`` is C-contiguous, 2 MiB-aligned, in an anonymous mapping of ours."""
    if not array.flags.c_contiguous or array.ctypes.data % HUGE_PAGE:
        return False
    base = array.base  # numpy keeps a view's base one step from the buffer's owner
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
