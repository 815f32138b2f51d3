"""How a bf16 Winograd step's units split between threads (:func:`even_units`).

The lowering sizes a Winograd step's units for OpenBLAS's f32 products
(``lowering/convolution.winograd_layout``: about 128 tiles a unit, and at least two units
per thread): ResNet-18 batch 1 on two threads gets 6 units at 56x56 (five tile rows each)
and 4 at 28x28. The bf16 kernels multiply a unit's tiles as rows of a 12 x 32 micro-kernel
(the rows form) or as 32-tile pair panels, and neither needs large units; but with two units
a thread, a worker that joins a step late (or a unit one tile row longer than another)
leaves the caller waiting for a whole unit at the end, and a unit cannot be shared. So a
bf16 step on two or more threads takes smaller units: at least :data:`UNITS_PER_THREAD` per
thread, in a count the threads divide, each of at least :data:`LEAST_TILES` tiles. The
per-thread scratch the lowering planned for the larger units holds the smaller ones.

Only the units change: every tile's products sum the same values in the same order, so the
results are bit for bit those of one thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from opgraph.backends.fused.program import ConvStep, WinogradStep
from opgraph.backends.fused.views import static_all

#: Units per thread at least, where the step's tiles allow it.
UNITS_PER_THREAD = 4
#: Tiles per unit at least (one micro-kernel tile of rows).
LEAST_TILES = 12
#: The most tiles a thread's home may hold over an even share.
EVEN = 1.05


def threads(step: WinogradStep) -> int:
    """The threads ``step`` was planned for: its scratch holds one row per thread, then
    the shared transform's rows."""
    assert step.scratch is not None
    return int(static_all(step.scratch.shape[:1])[0]) - step.shared


def even_units(step: WinogradStep, keeps: Callable[[WinogradStep], bool]) -> WinogradStep:
    """``step`` with smaller units (fewer tile rows, or fewer images, per unit) when its
    threads would get fewer than :data:`UNITS_PER_THREAD` each (module docstring); as it is
    for one thread, F(4x4) tiles, a symbolic batch, or output-channel blocks (whose units
    already share the tiles out by channels). ``keeps(candidate)``: whether a candidate
    layout runs in the same form as ``step`` (its kernels need units of some size)."""
    if step.x is None or step.out is None or step.tile != 2:
        return step
    n = step.x.shape[0]
    count = threads(step)
    if type(n) is not int or count < 2:
        return step
    if step.channel_blocks > 1:
        return _channel_blocks(step, count, keeps)
    oh, ow = static_all(step.out.shape[2:])
    th, tw = -(-oh // 2), -(-ow // 2)
    if step.images == 1:  # units of tile rows: fewer rows a unit (balanced, as emitted)
        field, most = "block_rows", step.block_rows
        least = -(-LEAST_TILES // tw)
    else:  # units of whole images: fewer images a unit (the last group may be smaller)
        field, most = "images", step.images
        least = -(-LEAST_TILES // (th * tw))
    candidates: list[tuple[int, int, float]] = []
    for size in range(most, max(least, 1) - 1, -1):
        if field == "block_rows":
            blocks = -(-th // size)
            size = -(-th // blocks)  # the largest of the balanced blocks
            tiles = [(th * (b + 1) // blocks - th * b // blocks) * tw for b in range(blocks)] * n
        else:
            tiles = [min(size, n - i) * th * tw for i in range(0, n, size)]
        if candidates and candidates[-1][0] == size:
            continue
        if candidates and not keeps(_with(step, field, size)):
            continue
        candidates.append((size, len(tiles), _span(tiles, count)))
    chosen = _choose(candidates, count)
    return step if chosen is None else _with(step, field, chosen)


def _channel_blocks(
    step: WinogradStep, count: int, keeps: Callable[[WinogradStep], bool]
) -> WinogradStep:
    """``step`` (output-channel blocks over its ``shared`` blocks of tiles, transformed once)
    with its channel blocks halved while there are fewer than :data:`UNITS_PER_THREAD`
    units a thread and the halves stay whole 32-channel panels: each unit reads only its
    block's filters, so smaller blocks cost no more reads."""
    assert step.out is not None
    o = int(static_all(step.out.shape[1:2])[0])
    if not step.shared:
        return step
    while step.shared * step.channel_blocks < UNITS_PER_THREAD * count:
        blocks = 2 * step.channel_blocks
        if o % blocks or (o // blocks) % 32:
            break
        candidate = dataclasses.replace(step, channel_blocks=blocks)
        if not keeps(candidate):
            break
        step = candidate
    return step


def _with(step: WinogradStep, field: str, size: int) -> WinogradStep:
    """``step`` with ``size`` tile rows (``field`` "block_rows") or images a unit."""
    if field == "block_rows":
        return dataclasses.replace(step, block_rows=size)
    return dataclasses.replace(step, images=size)


def _span(tiles: list[int], count: int) -> float:
    """The most tiles a thread's home holds (the runtime's ``og_homes``: participant p's
    home is the p-th run of units) over an even share."""
    units = len(tiles)
    homes = [sum(tiles[units * p // count : units * (p + 1) // count]) for p in range(count)]
    return max(homes) * count / sum(tiles)


def _choose(candidates: list[tuple[int, int, float]], count: int) -> int | None:
    """Of (unit size, units, span) candidates, largest units first (the lowering's first):
    the first with at least :data:`UNITS_PER_THREAD` units a thread and homes within
    :data:`EVEN` of an even share; else the most even one, if more even than the
    lowering's; else None."""
    for size, units, span in candidates:
        if units >= UNITS_PER_THREAD * count and span <= EVEN:
            return size
    best = min(candidates, key=lambda c: c[2], default=None)
    if best is None or not candidates or best[2] >= candidates[0][2]:
        return None
    return best[0]


def even_rows(step: ConvStep) -> ConvStep:
    """An im2col ``step`` of a build for two or more threads with its blocks of output rows
    as even as their count allows (the ResNet-18 stem's 112 rows: 8 blocks of 14, not 7 of 15
    and one of 7, whose homes held 60 and 52 rows); as it is otherwise. The patches of a
    smaller block fit the scratch planned for the larger one."""
    if step.wide or step.direct or step.scratch is None or len(step.images) != 3:
        return step
    n, oh = step.images[0], step.images[1]
    if type(n) is not int or type(oh) is not int:
        return step
    if int(static_all(step.scratch.shape[:1])[0]) < 2:
        return step
    rows = -(-oh // -(-oh // step.block_rows))
    return dataclasses.replace(step, block_rows=rows) if rows < step.block_rows else step
