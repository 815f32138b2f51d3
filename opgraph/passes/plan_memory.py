"""Static memory planning: one arena for every temporary value of a Function.

nGraph's ``MemoryLayout`` as a pure function. Walking the nodes in order, each node's new
temporaries are allocated (first fit, sizes rounded up to the alignment), then the temporaries
that die after it are freed, and freed neighbours coalesce. Where an op declares that its
kernel may write an output over an input (:data:`IN_PLACE`), and that input dies at this node
and has the same byte size, the output takes the input's block instead of a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from opgraph.core.dim import evaluate, free_symbols, is_symbolic
from opgraph.core.errors import GraphError
from opgraph.core.function import Function
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.core.registry import Registry
from opgraph.core.tensor_type import TupleType
from opgraph.ops.activation import Activation
from opgraph.ops.conversion import Convert
from opgraph.ops.elementwise import BinaryElementwise, Select, UnaryElementwise
from opgraph.passes.liveness import Liveness, liveness

__all__ = [
    "IN_PLACE",
    "InPlaceRule",
    "MemoryPlan",
    "assign_offsets",
    "in_place_pairs",
    "plan_memory",
]

Step = TypeVar("Step", bound=Hashable)
Value = TypeVar("Value", bound=Hashable)

#: ``(output index, input index)`` pairs: the output may be written over that input, tried in
#: order.
InPlacePairs = tuple[tuple[int, int], ...]

#: A backend's own in-place declaration: the pairs for one node.
InPlaceRule = Callable[[Node], Sequence[tuple[int, int]]]

#: Which outputs of an op class's kernels may overwrite which inputs. Looked up along the class's
#: MRO, so a family base covers its members. Elementwise kernels read element ``i`` of each
#: input before writing element ``i`` of the output, so sharing the buffer is safe.
IN_PLACE: Registry[type, InPlacePairs] = Registry("in-place declaration")
IN_PLACE.add(UnaryElementwise, ((0, 0),))
IN_PLACE.add(BinaryElementwise, ((0, 0), (0, 1)))
IN_PLACE.add(Select, ((0, 1), (0, 2)))
IN_PLACE.add(Activation, ((0, 0),))
IN_PLACE.add(Convert, ((0, 0),))  # only ever taken with equal byte sizes: equal item sizes


def in_place_pairs(node: Node) -> InPlacePairs:
    """The ``(output, input)`` pairs the default declarations (:data:`IN_PLACE`) allow for
    ``node``'s op, most specific class first; ``()`` when none."""
    for cls in type(node.op).__mro__:
        if cls is Op:
            break
        pairs = IN_PLACE.get(cls)
        if pairs is not None:
            return pairs
    return ()


@dataclass(frozen=True)
class MemoryPlan:
    """Where every temporary value lives in one arena.

    Attributes:
        offsets: byte offset of each temporary in the arena (a multiple of ``alignment``).
        sizes: each temporary's size in bytes (exact; its block is rounded up to the alignment).
        peak: the arena size in bytes (high-water mark).
        alignment: the alignment the plan was made with.
        in_place: outputs that reuse an input's block, mapped to that input.
        liveness: the analysis the plan was made from.
    """

    offsets: Mapping[Output, int]
    sizes: Mapping[Output, int]
    peak: int
    alignment: int
    in_place: Mapping[Output, Output]
    liveness: Liveness


class _Arena:
    """First-fit allocator over a growable list of ``[offset, size, free]`` blocks."""

    def __init__(self) -> None:
        self.blocks: list[list[int]] = []  # [offset, size, free (0/1)], sorted by offset
        self.peak = 0

    def allocate(self, size: int) -> int:
        for i, (offset, block_size, free) in enumerate(self.blocks):
            if free and block_size >= size:
                if block_size > size:
                    self.blocks.insert(i + 1, [offset + size, block_size - size, 1])
                self.blocks[i] = [offset, size, 0]
                return offset
        if self.blocks and self.blocks[-1][2]:
            # The free tail grows to the size needed instead of leaving a hole before a new
            # block.
            offset = self.blocks[-1][0]
            self.blocks[-1] = [offset, size, 0]
        else:
            offset = self.blocks[-1][0] + self.blocks[-1][1] if self.blocks else 0
            self.blocks.append([offset, size, 0])
        self.peak = max(self.peak, offset + size)
        return offset

    def free(self, offset: int) -> None:
        i = next(k for k, block in enumerate(self.blocks) if block[0] == offset and not block[2])
        self.blocks[i][2] = 1
        if i + 1 < len(self.blocks) and self.blocks[i + 1][2]:
            self.blocks[i][1] += self.blocks.pop(i + 1)[1]
        if i > 0 and self.blocks[i - 1][2]:
            self.blocks[i - 1][1] += self.blocks.pop(i)[1]


def plan_memory(
    fn: Function,
    alignment: int = 64,
    in_place: bool | InPlaceRule = True,
    live: Liveness | None = None,
    binding: Mapping[str, int] | None = None,
) -> MemoryPlan:
    """Assign every temporary of ``fn`` an offset in one arena.

    Needs: no tuple-typed values (run ``unbox_tuples``) — every temporary must be a tensor.
    Guarantees: two temporaries that are live at the same time never overlap, except an output
    written in place over an input that dies at its node (recorded in ``in_place``); offsets
    are multiples of ``alignment``; ``peak`` is at most the sum of the rounded sizes.
    Parameters, constants and results are not planned (see :func:`liveness`).

    Args:
        fn: the Function (not changed).
        alignment: block alignment in bytes, a positive power of two.
        in_place: True for the default declarations (:data:`IN_PLACE`), False for none, or a
            callable giving ``(output index, input index)`` pairs for a node (for a backend's
            own kernels).
        live: a precomputed :func:`liveness` of ``fn``, to avoid recomputing it.
        binding: symbol values (``{"batch": 8}``) for a Function with symbolic dimensions:
            the plan is made for those sizes (one Function, one liveness, a plan per binding).

    Returns:
        A frozen :class:`MemoryPlan`.

    Raises:
        GraphError: bad alignment, a temporary is tuple-typed, or a temporary's size is
            symbolic and ``binding`` does not give its symbols.
    """
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
        raise GraphError(f"plan_memory: alignment must be a positive int, got {alignment!r}")
    if alignment & (alignment - 1):
        raise GraphError(f"plan_memory: alignment must be a power of two, got {alignment}")
    live = live if live is not None else liveness(fn)
    rule = _rule(in_place)
    sizes = {v: _nbytes(v, fn, binding or {}) for v in live.temporaries}

    def pairs(node: Node) -> list[tuple[Output, Output]]:
        n_in, n_out = len(node.inputs), len(node.outputs)
        return [
            (node.outputs[o], node.inputs[i])
            for o, i in rule(node)
            if 0 <= i < n_in and 0 <= o < n_out
        ]

    offsets, shared, peak = assign_offsets(
        live.order, live.born, live.dying, sizes, pairs, alignment
    )
    return MemoryPlan(
        offsets=MappingProxyType(offsets),
        sizes=MappingProxyType(sizes),
        peak=peak,
        alignment=alignment,
        in_place=MappingProxyType(shared),
        liveness=live,
    )


def assign_offsets(
    order: Sequence[Step],
    born: Mapping[Step, Sequence[Value]],
    dying: Mapping[Step, Collection[Value]],
    sizes: Mapping[Value, int],
    in_place: Callable[[Step], Sequence[tuple[Value, Value]]],
    alignment: int = 64,
) -> tuple[dict[Value, int], dict[Value, Value], int]:
    """The arena allocation behind :func:`plan_memory`, for any schedule of steps (graph nodes,
    a backend's program steps) whose temporaries live over intervals of the schedule.

    Walking ``order``, each step's new temporaries (``born``) are placed first fit, sizes
    rounded up to ``alignment``; then those in ``dying`` are freed and free neighbours
    coalesce. An ``(output, input)`` pair of ``in_place(step)`` (tried in order) lets the
    output take the input's block when the input dies at that step, is not born there, has
    the same byte size and was not taken by another output.

    Returns:
        ``(offsets, shared, peak)``: each temporary's byte offset, the outputs placed over an
        input (mapped to it), and the arena size.
    """
    arena = _Arena()
    offsets: dict[Value, int] = {}
    shared: dict[Value, Value] = {}
    for step in order:
        taken: set[Value] = set()
        pairs = in_place(step) if born[step] else ()
        for out in born[step]:
            source = _in_place_source(step, out, pairs, born, dying, sizes, taken)
            if source is not None:
                offsets[out] = offsets[source]
                shared[out] = source
                taken.add(source)
            elif sizes[out] == 0:
                offsets[out] = 0  # no bytes: nothing to place, nothing can overlap it
            else:
                offsets[out] = arena.allocate(-(-sizes[out] // alignment) * alignment)
        for value in dying[step]:
            if value not in taken and sizes[value] > 0:
                arena.free(offsets[value])
    return offsets, shared, arena.peak


def _in_place_source(
    step: Step,
    out: Value,
    pairs: Sequence[tuple[Value, Value]],
    born: Mapping[Step, Sequence[Value]],
    dying: Mapping[Step, Collection[Value]],
    sizes: Mapping[Value, int],
    taken: set[Value],
) -> Value | None:
    for output, candidate in pairs:
        if (
            output == out
            and candidate in dying[step]
            and candidate not in taken
            and candidate not in born[step]
            and sizes.get(candidate, -1) == sizes[out] > 0
        ):
            return candidate
    return None


def _rule(in_place: bool | InPlaceRule) -> InPlaceRule:
    if in_place is True:
        return in_place_pairs
    if in_place is False:
        return lambda node: ()
    if callable(in_place):
        return in_place
    raise GraphError(
        f"plan_memory: in_place must be True, False or a callable(node) -> pairs, "
        f"got {type(in_place).__name__}"
    )


def _nbytes(value: Output, fn: Function, binding: Mapping[str, int]) -> int:
    if isinstance(value.type, TupleType):
        raise GraphError(
            f"plan_memory: {fn.name} has a tuple-typed value {value.type} made by "
            f"{value.node.op.name} (built at {value.node.provenance}); run unbox_tuples first"
        )
    nbytes = evaluate(value.tensor_type.nbytes, binding)
    if is_symbolic(nbytes):
        missing = ", ".join(sorted(s.name for s in free_symbols(nbytes)))
        raise GraphError(
            f"plan_memory: {value.node.op.name} (built at {value.node.provenance}) in "
            f"{fn.name} has the symbolic size {value.tensor_type}; give binding= values for "
            f"{missing} (a plan is made per binding)"
        )
    return int(nbytes)
