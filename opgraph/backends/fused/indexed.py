"""Program steps whose positions depend on the data: index searches (ArgMax/ArgMin), per-row
selection (TopK) and indexed stores (ScatterElements/ScatterND).

Each is a :class:`NodeStep`: it computes one graph node, and keeps the node's inputs and
outputs as operands of the node's own shapes, so that a target without a kernel for the step
(the GPU backend: ``gpu/host.py``) runs the node's reference kernel on exactly those operands,
as it runs a fallback. The other fields are the target-neutral layout the CPU's generated C
reads (``cpu/codegen/selection.py``, ``cpu/codegen/scatter.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from opgraph.backends.fused.program import Step
from opgraph.backends.fused.views import Operand, View
from opgraph.core.node import Node
from opgraph.ops.indexing import ScatterReduction


@dataclass(eq=False)
class NodeStep(Step):
    """A step computing ``node``; ``inputs``/``outputs`` in the node's shapes."""

    node: Node | None = None
    inputs: tuple[Operand, ...] = ()
    outputs: tuple[View, ...] = ()

    def reads(self) -> list[View]:
        return [x for x in (*self.inputs, *self.layout()) if isinstance(x, View)]

    def layout(self) -> tuple[Operand | None, ...]:
        """The operands the target's kernel reads (copies of the inputs, re-views)."""
        return ()

    def writes(self) -> list[View]:
        return list(self.outputs)


@dataclass(eq=False)
class ArgStep(NodeStep):
    """The index of the extreme element along the middle axis of ``x`` (outer, n, inner),
    written to the dense ``out`` (outer, inner): the first one (``last``: the last one), a
    NaN ranking above every number (the first NaN found wins)."""

    x: View | None = None
    out: View | None = None
    largest: bool = True
    last: bool = False

    def layout(self) -> tuple[Operand | None, ...]:
        return (self.x,)


@dataclass(eq=False)
class TopKStep(NodeStep):
    """The ``k`` best elements of each row along the middle axis of ``x`` (outer, n, inner)
    into the dense ``values`` and ``indices`` (outer, k, inner): best first, ties by lower
    index (``ordered`` False: in index order); NaN ranks above every number."""

    x: View | None = None
    values: View | None = None
    indices: View | None = None
    k: int = 0
    largest: bool = True
    ordered: bool = True

    def layout(self) -> tuple[Operand | None, ...]:
        return (self.x,)


@dataclass(eq=False)
class ScatterStep(NodeStep):
    """``out`` (dense, the data's shape) = ``data``, then each update combined in at its
    target, in row-major order of the updates (duplicates: the last write wins, or the
    reduction accumulates in order; 16-bit floats accumulate in f32 and round once).

    ``axis`` >= 0: ScatterElements along that axis (``index`` and ``updates`` of one shape);
    ``axis`` -1: ScatterND (``index`` (J..., k), ``updates`` (J..., R...)).
    """

    data: Operand | None = None
    index: View | None = None
    updates: Operand | None = None
    out: View | None = None
    axis: int = -1
    reduction: ScatterReduction = ScatterReduction.NONE

    def layout(self) -> tuple[Operand | None, ...]:
        return (self.data, self.index, self.updates)

    def inplace_pairs(self) -> list[tuple[int, int]]:
        """The output may take the data's buffer (the copy is then skipped at run time),
        unless the indices or updates read that buffer too."""
        data, out = self.data, self.out
        if not isinstance(data, View) or out is None or not data.is_whole:
            return []
        others = {x.buffer for x in (self.index, self.updates) if isinstance(x, View)}
        same = data.element_type is out.element_type and data.shape == out.shape
        return [(data.buffer, out.buffer)] if same and data.buffer not in others else []
