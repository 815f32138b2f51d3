"""Placement: which side (GPU or host) runs each step of a program, and the transfers that
make every step's inputs present where it runs (nGraph's HYBRID backend, on the fused
program rather than on single ops).

The program is the CPU backend's (same fusion groups, same memory plan); placement only adds
sides and transfers, so both sides use the plan's offsets: a buffer lives at the same offset
of the device arena and of the host arena, and a transfer copies it between them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from opgraph.backends.fused.program import BufferKind, FallbackStep, LoopStep, Program, Step
from opgraph.backends.fused.views import static, static_all


class Side(enum.Enum):
    """Where a step runs or a value lives."""

    HOST = "host"
    DEVICE = "device"

    @property
    def other(self) -> Side:
        return Side.HOST if self is Side.DEVICE else Side.DEVICE


@dataclass(frozen=True)
class Transfer:
    """Copy ``buffer`` from ``source`` to ``target`` (same offset on both sides)."""

    buffer: int
    source: Side
    target: Side
    label: str = ""

    @property
    def direction(self) -> str:
        return "H2D" if self.target is Side.DEVICE else "D2H"


@dataclass(frozen=True)
class Placed:
    """A step and where it runs (a transfer "runs" on its target side)."""

    step: Step | Transfer
    side: Side


@dataclass
class Placement:
    """The placed program.

    Attributes:
        steps: steps and transfers in execution order.
        arg_sides: the sides each argument buffer is read on (the call stages an argument
            to every such side it does not already live on).
        const_sides: the sides each constant buffer is read on (uploaded once, at compile).
        result_sides: the sides holding each result buffer's final value (the call copies it
            out when the caller's tensor lives elsewhere).
        written_on: the side that writes each written buffer.
    """

    steps: list[Placed]
    arg_sides: dict[int, frozenset[Side]] = field(default_factory=dict)
    const_sides: dict[int, frozenset[Side]] = field(default_factory=dict)
    result_sides: dict[int, frozenset[Side]] = field(default_factory=dict)
    written_on: dict[int, Side] = field(default_factory=dict)

    def transfers(self) -> list[Transfer]:
        return [p.step for p in self.steps if isinstance(p.step, Transfer)]

    def count(self, side: Side) -> int:
        """Program steps (not transfers) placed on ``side``."""
        return sum(1 for p in self.steps if not isinstance(p.step, Transfer) and p.side is side)


def work(step: Step) -> int:
    """Elements a loop step computes (its kernels' domains); other steps count as large."""
    if isinstance(step, LoopStep):
        return sum(math.prod(static_all(k.shape)) for k in step.kernels)
    return 1 << 62


def _buffers(views: list) -> list[int]:  # type: ignore[type-arg]
    return list(dict.fromkeys(v.buffer for v in views))


def place_steps(
    program: Program, on_device: Callable[[Step], bool], host_limit: int = 0
) -> Placement:
    """Place ``program``'s steps and insert the transfers between sides.

    Steps the device can run (``on_device``) run there, except that a loop step of at most
    ``host_limit`` elements whose inputs all come from host steps (or constants) and whose
    results only host steps read moves to the host: that saves at least one transfer each
    way. Then each step that reads a buffer not present on its side gets one transfer right
    before it; a buffer transferred once stays valid on both sides until it is rewritten, so
    no value crosses twice in the same direction.

    Needs: ``program.steps`` in their final (memory-planned) order. Guarantees: every read
    finds its buffer on its side, given that arguments are staged to ``arg_sides`` and
    constants uploaded to ``const_sides``; results are valid on ``result_sides``.
    """
    sides = [Side.DEVICE if on_device(s) else Side.HOST for s in program.steps]
    _sink_small_steps(program, sides, host_limit)
    return _insert_transfers(program, sides)


def _sink_small_steps(program: Program, sides: list[Side], host_limit: int) -> None:
    """Move small device loop steps sandwiched between host steps to the host (in place)."""
    if host_limit <= 0:
        return
    writer: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    for i, step in enumerate(program.steps):
        for b in _buffers(step.writes()):
            writer[b] = i
        for b in _buffers(step.reads()):
            readers.setdefault(b, []).append(i)

    def movable(i: int) -> bool:
        step = program.steps[i]
        if sides[i] is Side.HOST or not isinstance(step, LoopStep) or work(step) > host_limit:
            return False
        producers = [writer[b] for b in _buffers(step.reads()) if b in writer]
        if not producers or any(sides[p] is Side.DEVICE for p in producers):
            return False
        for b in _buffers(step.writes()):
            users = readers.get(b, [])
            if program.buffers[b].kind is BufferKind.RESULT or not users:
                return False
            if any(sides[u] is Side.DEVICE for u in users):
                return False
        return True

    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(sides))):
            if movable(i):
                sides[i] = Side.HOST
                changed = True


def _insert_transfers(program: Program, sides: list[Side]) -> Placement:
    valid: dict[int, set[Side]] = {}
    placement = Placement([])
    arg_sides: dict[int, set[Side]] = {}
    const_sides: dict[int, set[Side]] = {}
    for buffer in program.buffers:
        if buffer.kind in (BufferKind.ARG, BufferKind.CONST):
            valid[buffer.id] = {Side.HOST, Side.DEVICE}
    for step, side in zip(program.steps, sides, strict=True):
        for b in _buffers(step.reads()):
            kind = program.buffers[b].kind
            if kind is BufferKind.ARG:
                arg_sides.setdefault(b, set()).add(side)
            elif kind is BufferKind.CONST:
                const_sides.setdefault(b, set()).add(side)
            elif side not in valid.setdefault(b, set()) and valid[b]:
                label = program.buffers[b].label or f"buffer {b}"
                placement.steps.append(Placed(Transfer(b, side.other, side, label), side))
                valid[b].add(side)
        placement.steps.append(Placed(step, side))
        for b in _buffers(step.writes()):
            valid[b] = {side}
            placement.written_on[b] = side
    placement.arg_sides = {b: frozenset(s) for b, s in arg_sides.items()}
    placement.const_sides = {b: frozenset(s) for b, s in const_sides.items()}
    placement.result_sides = {
        b.id: frozenset(valid.get(b.id, set()))
        for b in program.buffers
        if b.kind is BufferKind.RESULT
    }
    return placement


def describe(program: Program, placement: Placement) -> str:
    """The placement as text: one line per step or transfer, then totals."""
    lines = []
    moved = 0
    for i, placed in enumerate(placement.steps):
        step = placed.step
        if isinstance(step, Transfer):
            nbytes = static(program.buffers[step.buffer].nbytes)
            moved += nbytes
            lines.append(f"{i:4d}  {step.direction:<6}  transfer {step.label} ({nbytes} bytes)")
            continue
        kind = "fallback" if isinstance(step, FallbackStep) else type(step).__name__
        where = "GPU" if placed.side is Side.DEVICE else "CPU"
        lines.append(f"{i:4d}  {where:<6}  {kind}: {step.label[:160]}")
    transfers = placement.transfers()
    lines.append(
        f"placement: {placement.count(Side.DEVICE)} step(s) on the GPU, "
        f"{placement.count(Side.HOST)} on the CPU, {len(transfers)} transfer(s) inside the "
        f"call ({moved} bytes); arguments in and results out are copied only when the "
        "caller's tensor lives on the other side"
    )
    return "\n".join(lines)
