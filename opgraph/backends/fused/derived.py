"""Arrays that lowerings derive from constants at compile time, made once per constant.

A lowering that transforms or repacks a constant (Winograd-transformed filters, weight
matrices repacked as column panels) pays for it on every compile of the model: in ResNet-18
the Winograd filter transforms took 73 ms and the panel repacks 59 ms of a 0.32 s cached
compile (bench/compile_time.py --profile, 2026-11-26), where gcc does not run at all.
:func:`derived` keeps each result while its source array lives, keyed by the array's
identity and what was derived from it: a constant's value is read-only (``Constant`` freezes
it), so the same array object always yields the same result; a weak reference drops the
entry when the array dies, before its ``id`` can be reused. The results are frozen too (every
program that reads them shares them), and from 2 MiB up they live in a mapping of huge pages
(:func:`~opgraph.backends.fused.pages.huge_page_array`: the generated code streams packed
weights from memory on every call; 2026-11-28, h151). A maker writes its result there itself
(:func:`~opgraph.backends.fused.pages.empty`) or returns a view (a transposition of the
constant, say) that ``huge_page_array`` writes there once (2026-11-28, h159: made in numpy's
memory and copied, a rebuilt compile's derived arrays took 1.3-1.5x the time, the most of it
faults of fresh memory).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable

import numpy as np

from opgraph.backends.fused.pages import huge_page_array

_Entry = tuple[weakref.ref[np.ndarray], np.ndarray]
_DERIVED: dict[tuple[int, Hashable], _Entry] = {}
_LOCK = threading.RLock()  # a weak reference's callback may run while it is held


def derived(source: np.ndarray, kind: Hashable, make: Callable[[], np.ndarray]) -> np.ndarray:
    """``make()``, the array of ``kind`` derived from the read-only ``source``, computed once
    while ``source`` lives (``kind`` must name everything besides ``source``'s values that
    the result depends on), as a C-contiguous array of its own (``make`` may return a view,
    of ``source`` too); read-only. A writable ``source`` is never cached."""
    if source.flags.writeable:
        return _own(source, make())
    key = (id(source), kind)
    with _LOCK:
        entry = _DERIVED.get(key)
    if entry is not None and entry[0]() is source:
        return entry[1]
    value = _own(source, make())
    value.flags.writeable = False
    reference = weakref.ref(source, _forget(key))
    with _LOCK:
        _DERIVED[key] = (reference, value)
    return value


def _own(source: np.ndarray, made: np.ndarray) -> np.ndarray:
    """``made`` as :func:`huge_page_array` places it, copied where that still shares memory
    with ``source`` (a view that is contiguous already: the cache would keep ``source`` alive
    through it)."""
    value = huge_page_array(made)
    return value.copy() if np.may_share_memory(value, source) else value


def _forget(key: tuple[int, Hashable]) -> Callable[[weakref.ref[np.ndarray]], None]:
    def forget(reference: weakref.ref[np.ndarray]) -> None:
        with _LOCK:
            entry = _DERIVED.get(key)
            if entry is not None and entry[0] is reference:
                del _DERIVED[key]

    return forget


def entries() -> int:
    """How many derived arrays are held (tests check that they go with their sources)."""
    with _LOCK:
        return len(_DERIVED)
