"""Which elements a symbolic Program touches at one binding: every view must stay inside its
buffer (the check a new binding of a symbolic Function gets before anything runs).

A type rule that cannot decide a check on symbols defers it (a slice inside a symbolic axis:
``docs/dynamic-shapes.md``); at a binding that fails it, some view reaches outside its buffer.
Evaluating every symbolic view's lowest and highest element is a few microseconds each, far
cheaper than re-running every type rule, so a backend checks this per new binding and re-runs
the type rules only to word the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from opgraph.backends.fused.program import GemmStep, LoopStep, Program, Step
from opgraph.backends.fused.views import View
from opgraph.core.dim import Dim, DimExpr, evaluate


@dataclass(frozen=True)
class Reach:
    """A view some step reads or writes; ``shifts`` are element offsets added to it (a GEMM's
    listed batch entries), ``extent`` more (size, stride) axes it is read along: a gather's
    indexed axes, or a GEMM's batch grid."""

    step: Step
    view: View
    size: Dim  # the buffer's element count
    shifts: tuple[Dim, ...] = (0,)
    extent: tuple[tuple[Dim, Dim], ...] = ()  # (axis size, stride) of further axes


def symbolic_reaches(program: Program) -> list[Reach]:
    """The accesses of ``program`` whose bounds depend on the symbols (static ones are in
    bounds by construction)."""
    found: list[Reach] = []
    for step in program.steps:
        for view, shifts, extent in _accesses(step):
            size = program.buffers[view.buffer].size
            reach = Reach(step, view, size, shifts, extent)
            if _symbolic(reach):
                found.append(reach)
    return found


Access = tuple[View, tuple[Dim, ...], tuple[tuple[Dim, Dim], ...]]


def _accesses(step: Step) -> list[Access]:
    if isinstance(step, GemmStep):
        assert step.a is not None and step.b is not None and step.out is not None
        columns: list[tuple[Dim, ...]] = [tuple(c) for c in zip(*step.batch, strict=True)]
        own = [(step.a, columns[0]), (step.b, columns[1]), (step.out, columns[2])]
        rest = [v for v in step.reads() + step.writes() if v not in (step.a, step.b, step.out)]
        grids = [tuple((g[0], g[1 + i]) for g in step.grid) for i in range(3)]
        found: list[Access] = [(v, s, grid) for (v, s), grid in zip(own, grids, strict=True)]
        return found + [(v, (0,), ()) for v in rest]
    if isinstance(step, LoopStep):
        out: list[Access] = []
        for kernel in step.kernels:
            for node in kernel.nodes:
                if isinstance(node.operand, View):
                    out.append((node.operand, (0,), ()))
                if isinstance(node.table, View):
                    terms = tuple((t.size, t.stride) for t in node.terms)
                    out.append((node.table, (0,), terms))
            out += [(view, (0,), ()) for _, view in kernel.stores]
        return out
    return [(v, (0,), ()) for v in step.reads() + step.writes()]


def _symbolic(reach: Reach) -> bool:
    v = reach.view
    dims = (*v.shape, *v.strides, v.offset, reach.size, *reach.shifts)
    dims += tuple(d for pair in reach.extent for d in pair)
    return any(isinstance(d, DimExpr) for d in dims)


def first_outside(reaches: list[Reach], binding: Mapping[str, int]) -> Reach | None:
    """The first access that leaves its buffer at ``binding`` (None: all inside)."""
    for reach in reaches:
        if not _inside(reach, binding):
            return reach
    return None


def _inside(reach: Reach, binding: Mapping[str, int]) -> bool:
    v = reach.view
    shape = [_int(d, binding) for d in v.shape]
    extent = [(_int(n, binding), _int(s, binding)) for n, s in reach.extent]
    if 0 in shape or any(n == 0 for n, _ in extent):
        return True  # nothing is accessed (an empty batch grid, an empty gathered axis)
    low = high = _int(v.offset, binding)
    pairs = list(zip(shape, (_int(s, binding) for s in v.strides), strict=True)) + extent
    for d, s in pairs:
        span = (d - 1) * s if d > 0 else 0
        low, high = low + min(span, 0), high + max(span, 0)
    shifts = [_int(s, binding) for s in reach.shifts]
    return low + min(shifts) >= 0 and high + max(shifts) < _int(reach.size, binding)


def _int(d: Dim, binding: Mapping[str, int]) -> int:
    value = evaluate(d, binding) if isinstance(d, DimExpr) else d
    assert isinstance(value, int), f"{d} has a symbol outside the binding"
    return value
