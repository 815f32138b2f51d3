"""The static memory plan of a Program, made by the shared planner
(:func:`opgraph.passes.plan_memory.assign_offsets`: liveness intervals, one arena, first-fit
reuse, in-place).

The steps are scheduled first: a depth-first post-order from the result buffers, each step
after the steps writing what it reads (a step whose writes reach no result is dropped). Each
buffer a step writes is a value born at that step and dying after its last reader; arguments,
constants, results and buffers no step writes are persistent (never planned).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from opgraph.backends.fused.program import BufferKind, Program, Step
from opgraph.core.dim import Dim
from opgraph.passes.liveness import live_ranges
from opgraph.passes.plan_memory import assign_offsets


@dataclass(frozen=True)
class MemoryPlan:
    """Where each arena buffer lives.

    Attributes:
        offsets: byte offset in the arena, by buffer id.
        sizes: byte size, by buffer id.
        peak: the arena size in bytes (the high-water mark).
        inplace: (input buffer, output buffer) pairs that share a block.
        labels: the value each buffer holds (``%7``), by buffer id.
        intervals: ``(first, last)`` positions in ``program.steps`` between which each
            planned buffer is live.
    """

    offsets: dict[int, int]
    sizes: dict[int, int]
    peak: int
    inplace: tuple[tuple[int, int], ...] = ()
    labels: dict[int, str] = field(default_factory=dict)
    intervals: dict[int, tuple[int, int]] = field(default_factory=dict)


def _unique(ids: list[int]) -> list[int]:
    return list(dict.fromkeys(ids))


def reads(step: Step) -> list[int]:
    """The buffers ``step`` reads, each once, in order."""
    return _unique([v.buffer for v in step.reads()])


def writes(step: Step) -> list[int]:
    """The buffers ``step`` writes, each once, in order."""
    return _unique([v.buffer for v in step.writes()])


def schedule(program: Program) -> list[Step]:
    """The steps in execution order: depth-first post-order from the result buffers (in
    buffer order), each step's readers visited after the writers of its reads (in order)."""
    writer: dict[int, Step] = {}
    for step in program.steps:
        for b in writes(step):
            assert b not in writer, "a buffer written by two steps (a fused compiler bug)"
            writer[b] = step
    order: list[Step] = []
    done: set[int] = set()
    roots = [
        writer[b.id] for b in program.buffers if b.kind is BufferKind.RESULT and b.id in writer
    ]
    for root in roots:
        if id(root) in done:
            continue
        stack: list[tuple[Step, list[Step]]] = [(root, _producers(root, writer))]
        on_stack = {id(root)}
        while stack:
            step, pending = stack[-1]
            if pending:
                child = pending.pop(0)
                if id(child) not in done and id(child) not in on_stack:
                    stack.append((child, _producers(child, writer)))
                    on_stack.add(id(child))
                continue
            stack.pop()
            on_stack.discard(id(step))
            done.add(id(step))
            order.append(step)
    return order


def _producers(step: Step, writer: dict[int, Step]) -> list[Step]:
    return [writer[b] for b in reads(step) if b in writer]


@dataclass(frozen=True)
class Lifetimes:
    """What the arena plan needs besides the byte sizes, computed once per Program: each
    step's new and dying buffers, and the in-place pairs it allows.

    ``sizes`` are byte sizes, expressions of the symbols in a symbolic Program; in-place pairs
    of a symbolic Program are those whose sizes are equal expressions (so every binding's plan
    shares a subset of :attr:`inplace`).
    """

    steps: tuple[Step, ...]
    born: Mapping[Step, Sequence[int]]
    dying: Mapping[Step, Collection[int]]
    sizes: Mapping[int, Dim]
    pairs: dict[Step, list[tuple[int, int]]]

    @property
    def inplace(self) -> tuple[tuple[int, int], ...]:
        """Every (input, output) pair some binding may place in one block."""
        found = []
        for step in self.steps:
            for dst, src in self.pairs[step]:
                if dst in self.born[step] and src in self.dying[step]:
                    found.append((src, dst))
        return tuple(found)


def lifetimes(program: Program) -> Lifetimes:
    """Schedule the steps of ``program`` (in place: :func:`schedule`) and find each arena
    buffer's interval."""
    program.steps = schedule(program)
    written = {b for step in program.steps for b in writes(step)}
    persistent = {
        b.id for b in program.buffers if b.kind is not BufferKind.ARENA or b.id not in written
    }
    born, dying = live_ranges(program.steps, reads, writes, persistent)
    sizes = {b: program.buffers[b].nbytes for step in program.steps for b in born[step]}
    pairs = {
        step: [
            (dst, src)
            for src, dst in step.inplace_pairs()
            if program.buffers[src].kind is BufferKind.ARENA
            and (type(sizes.get(src)) is int or sizes.get(src) == sizes.get(dst))
        ]
        for step in program.steps
    }
    return Lifetimes(tuple(program.steps), born, dying, sizes, pairs)


def place(program: Program, live: Lifetimes, sizes: dict[int, int]) -> MemoryPlan:
    """The arena plan of ``live`` for concrete byte ``sizes`` (one binding's)."""
    offsets, shared, peak = assign_offsets(
        live.steps, live.born, live.dying, sizes, lambda step: live.pairs[step]
    )
    first = {b: i for i, step in enumerate(live.steps) for b in live.born[step]}
    last = {b: i for i, step in enumerate(live.steps) for b in live.dying[step]}
    inplace = tuple((src, dst) for dst, src in shared.items())
    labels = {b: program.buffers[b].label for b in offsets}
    intervals = {b: (first[b], last[b]) for b in offsets}
    return MemoryPlan(offsets, dict(sizes), peak, inplace, labels, intervals)


def plan_memory(program: Program) -> MemoryPlan:
    """Schedule the steps of ``program`` (in place: :func:`schedule`) and plan its arena
    (static sizes)."""
    live = lifetimes(program)
    sizes = {b: int(n) for b, n in live.sizes.items()}
    return place(program, live, sizes)
