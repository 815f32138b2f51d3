"""Liveness analysis: which temporary values each node creates and which die after it.

The analysis nGraph's ``Liveness`` pass ran before memory layout, as a pure function. Values
are *persistent* when the caller or the graph owns their storage — outputs of Parameters and
Constants, and the Function's results — and are never planned. Every other value is a
*temporary*: born at the node that produces it, it dies after its last user runs (or after its
own node, when nothing uses it — a multi-output node's unused output still needs storage while
its node runs).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from opgraph.core.function import Function
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Node, Output

__all__ = ["Liveness", "live_ranges", "liveness"]

Step = TypeVar("Step", bound=Hashable)
Value = TypeVar("Value", bound=Hashable)


@dataclass(frozen=True)
class Liveness:
    """The result of :func:`liveness`.

    Attributes:
        order: every node of the Function in execution (topological) order, Parameters
            included; ``index[node]`` is a node's position.
        born: per node, its temporary outputs, which must be allocated before it runs.
        dying: per node, the temporaries whose last use is this node; their storage may be
            reused once the node has run.
        persistent: outputs of Parameters and Constants, and the results; never planned.
        index: position of each node in ``order``.
        last_use: per temporary, the position in ``order`` of the node after which it dies.
    """

    order: tuple[Node, ...]
    born: Mapping[Node, tuple[Output, ...]]
    dying: Mapping[Node, tuple[Output, ...]]
    persistent: frozenset[Output]
    index: Mapping[Node, int]
    last_use: Mapping[Output, int]

    @property
    def temporaries(self) -> tuple[Output, ...]:
        """Every temporary value, in birth order."""
        return tuple(v for node in self.order for v in self.born[node])

    def interval(self, value: Output) -> tuple[int, int]:
        """``(first, last)`` positions in ``order`` between which a temporary is live.

        Raises:
            KeyError: ``value`` is persistent or not in the Function.
        """
        if value not in self.last_use:
            raise KeyError(f"{value} is not a temporary of this Function")
        return self.index[value.node], self.last_use[value]


def persistent_values(fn: Function) -> frozenset[Output]:
    """Outputs whose storage is owned by the caller or the graph: parameters, constants,
    results."""
    values = set(fn.results) | set(fn.parameters)
    for node in fn.nodes:
        if isinstance(node.op, Parameter | Constant):
            values.update(node.outputs)
    return frozenset(values)


def liveness(fn: Function) -> Liveness:
    """Compute, for every node of ``fn``, the temporaries it creates and those that die after it.

    Walks the nodes backwards keeping a live set (as nGraph did): the first time a temporary is
    seen from the end, its user is the last one, so it dies after that node.

    Needs: nothing (run ``unbox_tuples`` first if the memory plan is wanted: tuple values have
    no byte size). Guarantees: each temporary is born exactly once and dies exactly once, at or
    after its birth; persistent values appear in neither list.

    Args:
        fn: the Function to analyse (not changed).

    Returns:
        A frozen :class:`Liveness`.
    """
    persistent = persistent_values(fn)
    order = fn.nodes
    born, dying = live_ranges(order, lambda n: n.inputs, lambda n: n.outputs, persistent)
    index = {n: i for i, n in enumerate(order)}
    last_use = {value: index[node] for node in order for value in dying[node]}
    return Liveness(
        order=order,
        born=MappingProxyType(born),
        dying=MappingProxyType(dying),
        persistent=persistent,
        index=MappingProxyType(index),
        last_use=MappingProxyType(last_use),
    )


def live_ranges(
    order: Sequence[Step],
    inputs: Callable[[Step], Sequence[Value]],
    outputs: Callable[[Step], Sequence[Value]],
    persistent: Collection[Value],
) -> tuple[dict[Step, tuple[Value, ...]], dict[Step, tuple[Value, ...]]]:
    """The temporaries each step of a schedule creates and those that die after it: the walk
    behind :func:`liveness`, for any steps (graph nodes, a backend's program steps) that read
    ``inputs(step)`` and write ``outputs(step)``.

    Walks the steps backwards keeping a live set (as nGraph did): the first time a temporary
    is seen from the end, its reader is the last one, so it dies after that step; an output
    nothing reads dies right after its own step. Values in ``persistent`` are never listed.

    Returns:
        ``(born, dying)``: per step, in ``order``.
    """
    dying: dict[Step, tuple[Value, ...]] = {}
    seen: set[Value] = set()
    for step in reversed(order):
        dead_here = [o for o in outputs(step) if o not in persistent and o not in seen]
        seen.update(outputs(step))
        for value in inputs(step):
            if value not in persistent and value not in seen and value not in dead_here:
                dead_here.append(value)
            seen.add(value)
        dying[step] = tuple(dead_here)
    born = {step: tuple(o for o in outputs(step) if o not in persistent) for step in order}
    return born, {step: dying[step] for step in order}
