"""The static memory plan of a Program, made by the shared planner
(:func:`opgraph.passes.plan_memory`: liveness, one arena, first-fit reuse, in-place).

The planner works on Functions, so the program is presented as one: a node per step, whose
inputs are the buffers the step reads and whose outputs are the buffers it writes; arguments
and constants are parameters and the result buffers are the results, so neither is planned.
The steps then run in that Function's order (a topological order of the same dependencies),
which is the order the liveness was computed for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opgraph.backends.fused.program import BufferKind, Program, Step
from opgraph.core.function import Function
from opgraph.core.literals import Parameter
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.core.tensor_type import TensorType
from opgraph.passes.plan_memory import plan_memory as shared_plan_memory


@dataclass(frozen=True)
class MemoryPlan:
    """Where each arena buffer lives.

    Attributes:
        offsets: byte offset in the arena, by buffer id.
        sizes: byte size, by buffer id.
        peak: the arena size in bytes (the high-water mark).
        inplace: (input buffer, output buffer) pairs that share a block.
        labels: the value each buffer holds (``%7``), by buffer id.
    """

    offsets: dict[int, int]
    sizes: dict[int, int]
    peak: int
    inplace: tuple[tuple[int, int], ...] = ()
    labels: dict[int, str] = field(default_factory=dict)


class StepOp(Op):
    """A program step seen as an op by the shared planner (never registered or executed)."""

    __slots__ = ("step", "types")
    step: Step
    types: tuple[TensorType, ...]
    num_inputs = None
    multi_output = True

    def __init__(self, step: Step, types: tuple[TensorType, ...]) -> None:
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "types", types)

    def infer(self, *inputs: Any) -> tuple[TensorType, ...]:
        return self.types


def _unique(ids: list[int]) -> list[int]:
    return list(dict.fromkeys(ids))


def step_function(program: Program) -> tuple[Function, dict[int, Output]]:
    """The program as a Function of :class:`StepOp` nodes, and each buffer's value."""
    values: dict[int, Output] = {}
    parameters: list[Output] = []

    def placeholder(buffer_id: int) -> Output:
        b = program.buffers[buffer_id]
        out = Parameter(b.element_type, (b.size,)).build(provenance="cpu").outputs[0]
        parameters.append(out)
        values[buffer_id] = out
        return out

    def empty(buffer_id: int) -> Output:  # an empty value no step needs to write
        assert program.buffers[buffer_id].size == 0, "a buffer read before it is written"
        return placeholder(buffer_id)

    for buffer in program.buffers:
        if buffer.kind in (BufferKind.ARG, BufferKind.CONST):
            placeholder(buffer.id)
    for step in program.steps:
        reads = _unique([v.buffer for v in step.reads()])
        writes = _unique([v.buffer for v in step.writes()])
        types = tuple(
            TensorType(program.buffers[b].element_type, (program.buffers[b].size,)) for b in writes
        )
        inputs = [values[b] if b in values else empty(b) for b in reads]
        node = StepOp(step, types).build(*inputs, provenance="cpu")
        for b, out in zip(writes, node.outputs, strict=True):
            assert b not in values, "a buffer written by two steps (a CPU backend bug)"
            values[b] = out
    results = [
        values[r.id] if r.id in values else placeholder(r.id)
        for r in program.buffers
        if r.kind is BufferKind.RESULT
    ]
    return Function(results, parameters, name="cpu_steps"), values


def plan_memory(program: Program) -> MemoryPlan:
    """Plan the arena of ``program`` and put its steps in the planned order (in place)."""
    fn, values = step_function(program)

    def in_place(node: Node) -> list[tuple[int, int]]:
        assert isinstance(node.op, StepOp)
        reads = _unique([v.buffer for v in node.op.step.reads()])
        writes = _unique([v.buffer for v in node.op.step.writes()])
        return [
            (writes.index(dst), reads.index(src))
            for src, dst in node.op.step.inplace_pairs()
            if program.buffers[src].kind is BufferKind.ARENA
        ]

    plan = shared_plan_memory(fn, in_place=in_place)
    program.steps = [n.op.step for n in fn.nodes if isinstance(n.op, StepOp)]
    buffer_of = {value: b for b, value in values.items()}
    offsets = {buffer_of[v]: o for v, o in plan.offsets.items()}
    sizes = {buffer_of[v]: s for v, s in plan.sizes.items()}
    inplace = tuple((buffer_of[src], buffer_of[dst]) for dst, src in plan.in_place.items())
    labels = {b: program.buffers[b].label for b in offsets}
    return MemoryPlan(offsets, sizes, plan.peak, inplace, labels)
