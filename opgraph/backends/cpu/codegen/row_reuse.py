"""Values a row kernel's loops share, computed once per element.

A row kernel (``codegen/loops.py``) runs one inner loop per reduction phase and one for its
stored values, and each loop computes the full-level values it needs. Two things repeat
work there, and this plan removes both:

* **Early stores.** A stored value that a reduction phase computes anyway (the SiLU output
  that a global-average pool sums and a later step reads) is stored by that phase's loop,
  not recomputed by the store loop.
* **Saved values.** A value that an earlier loop computes and a later loop needs again, and
  whose computation calls a math function (softmax's ``exp(x - max)``: summed by one phase,
  divided by the sum in the store loop), is saved in a stack buffer of one row by the first
  loop and loaded by the later ones. Only rows of at most :data:`SAVE_LIMIT` elements of
  static length are saved (the buffers live on the worker's stack).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opgraph.backends.fused.program import KKind, KNode, Level, LoopKernel

#: The most elements of saved row values per kernel (all buffers together): 64 KiB of f32.
SAVE_LIMIT = 16384
#: A saved value's computation must cost at least this much (one math call: ``EXPENSIVE``
#: in ``fused/loops.py`` plus the op) for a store and a load to beat recomputing it.
SAVE_COST = 9


def full_closure(kernel: LoopKernel, targets: list[int]) -> set[int]:
    """The full-level nodes the values ``targets`` need (reductions' results are row values:
    the traversal stops there)."""
    found: set[int] = set()
    stack = list(targets)
    while stack:
        k = stack.pop()
        node = kernel.nodes[k]
        if k in found or node.level is not Level.FULL:
            continue
        found.add(k)
        stack.extend(node.args)
    return found


@dataclass
class RowReuse:
    """Which stores move into a reduction phase's loop and which values are saved.

    Attributes:
        early: by phase number, the full-level stores ``(slot, node)`` its loop writes.
        candidates: by phase number, the nodes its loop computes that a later loop needs
            (saved when their computation in that loop costs at least :data:`SAVE_COST`).
        saved: nodes whose values are in a row buffer ``w<k>`` (filled in while emitting).
        budget: elements of row buffers still available.
    """

    early: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    candidates: dict[int, list[int]] = field(default_factory=dict)
    saved: set[int] = field(default_factory=set)
    budget: int = 0


def plan_row_reuse(
    kernel: LoopKernel, phases: list[list[KNode]], full_stores: list[tuple[int, int]], length: int
) -> RowReuse:
    """Plan the reuse for a row kernel whose reduction phases are ``phases`` (in order) and
    whose full-level stores are ``full_stores`` ``(slot, node)``; ``length`` is the static
    row length (0 when it is symbolic: nothing is saved)."""
    plan = RowReuse(budget=SAVE_LIMIT if 0 < length <= SAVE_LIMIT else 0)
    closures = [full_closure(kernel, [r.args[0] for r in phase]) for phase in phases]
    late: list[tuple[int, int]] = []
    for slot, k in full_stores:
        first = next((i for i, c in enumerate(closures) if k in c), None)
        if first is None:
            late.append((slot, k))
        else:
            plan.early.setdefault(first, []).append((slot, k))
    stores = [k for _, k in late]
    reduced = [[r.args[0] for r in phase] for phase in phases]
    later_loops = list(zip(closures, reduced, strict=True))[1:]
    if late:
        later_loops.append((full_closure(kernel, stores), stores))
    for i, closure in enumerate(closures):
        wanted: set[int] = set()
        for later, roots in later_loops[i:]:
            wanted |= _frontier(kernel, later, closure, roots)
        plan.candidates[i] = sorted(wanted)
    return plan


def _frontier(kernel: LoopKernel, later: set[int], earlier: set[int], roots: list[int]) -> set[int]:
    """Nodes of ``earlier`` that the loop computing ``later`` reads directly: as an argument
    of one of its own nodes, or as one of its ``roots`` (what it stores or reduces)."""
    found = {k for k in roots if k in earlier}
    for k in later - earlier:
        found.update(a for a in kernel.nodes[k].args if a in earlier)
    return {k for k in found if kernel.nodes[k].kind is not KKind.LOAD}
