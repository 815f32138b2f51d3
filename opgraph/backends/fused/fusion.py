"""Partition a lowered Function into fused groups.

Elementwise ops (anything with a scalar renderer) of one shape fuse into one loop kernel. A
reduction turns the kernel that computes its input into a *row kernel*: rows are the kept
axes, and each row runs its reductions as phases over the reduced axes, then the elementwise
tail — softmax and layer norm become one kernel. Movement ops are views (no node computes
them) except *bridges* (a row value broadcast back over the reduced axes), which live inside
row kernels. Everything else (BLAS steps, fallbacks) is a group of one node.

Fusion never creates a cycle between groups: a node joins a kernel only if none of its other
inputs depends on that kernel through a node outside it.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, field

from opgraph.backends.fused.lowering import (
    BRIDGES,
    GATHERS,
    REDUCTIONS,
    SCALAR_OPS,
    STEP_OPS,
    VIEW_OPS,
)
from opgraph.backends.fused.lowering.registry import reduction_axes
from opgraph.backends.fused.program import Level
from opgraph.core.function import Function
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Node
from opgraph.core.shape import DimShape
from opgraph.core.tensor_type import TensorType


class Kind(enum.Enum):
    LEAF = "leaf"
    POINTWISE = "pointwise"
    REDUCE = "reduce"
    VIEW = "view"
    GATHER = "gather"
    STEP = "step"
    FALLBACK = "fallback"


def classify(node: Node) -> Kind:
    """How the fused compiler runs ``node``."""
    cls = type(node.op)
    if cls in (Parameter, Constant):
        return Kind.LEAF
    if not all(isinstance(t, TensorType) for t in node.output_types):
        return Kind.FALLBACK
    if cls in SCALAR_OPS:
        return Kind.POINTWISE
    if cls in REDUCTIONS:
        return Kind.REDUCE
    if cls in VIEW_OPS:
        return Kind.VIEW
    if cls in GATHERS:
        return Kind.GATHER
    if cls in STEP_OPS:
        return Kind.STEP
    return Kind.FALLBACK


class GroupKind(enum.Enum):
    LOOP = "loop"
    STEP = "step"
    FALLBACK = "fallback"


@dataclass(eq=False)
class Group:
    """Nodes executed together. Loop groups have a full ``shape`` and reduced ``axes``
    (None while the kernel is pointwise only)."""

    id: int
    kind: GroupKind
    nodes: list[Node] = field(default_factory=list)
    shape: DimShape = ()
    axes: tuple[int, ...] | None = None
    levels: dict[Node, Level] = field(default_factory=dict)
    external: set[Node] = field(default_factory=set)
    gathered: set[Node] = field(default_factory=set)  # inputs of its gathers: stored first

    def outer_forms(self) -> tuple[DimShape, ...]:
        axes = self.axes or ()
        dropped = tuple(d for i, d in enumerate(self.shape) if i not in axes)
        kept = tuple(1 if i in axes else d for i, d in enumerate(self.shape))
        return (dropped, kept)


@dataclass
class Partition:
    """Groups in execution order; ``virtual`` view nodes belong to no group."""

    groups: list[Group]
    group_of: dict[Node, Group]
    virtual: set[Node]


def partition(fn: Function) -> Partition:
    """Fuse ``fn``'s nodes into groups (see the module docstring)."""
    return _Partitioner(fn).run()


class _Partitioner:
    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.parent: dict[int, int] = {}
        self.groups: dict[int, Group] = {}
        self.node_group: dict[Node, int] = {}
        # the groups each node depends on (itself included), as a bit set over group ids at
        # creation; ``members`` holds, per root group, the bits of every id merged into it,
        # so a dependency test is one AND however long the graph (no walk over ids)
        self.deps: dict[Node, int] = {}
        self.members: dict[int, int] = {}
        self.virtual: set[Node] = set()

    # ------------------------------------------------------------------ union-find
    def find(self, gid: int) -> int:
        while self.parent[gid] != gid:
            self.parent[gid] = self.parent[self.parent[gid]]
            gid = self.parent[gid]
        return gid

    def group(self, node: Node) -> Group | None:
        gid = self.node_group.get(node)
        return None if gid is None else self.groups[self.find(gid)]

    def depends(self, node: Node, group: Group) -> bool:
        return bool(self.deps.get(node, 0) & self.members[group.id])

    def new_group(self, kind: GroupKind, node: Node, level: Level = Level.FULL) -> Group:
        gid = len(self.parent)
        self.parent[gid] = gid
        self.members[gid] = 1 << gid
        group = Group(gid, kind)
        self.groups[gid] = group
        self.add(group, node, level)
        return group

    def add(self, group: Group, node: Node, level: Level) -> None:
        group.nodes.append(node)
        group.levels[node] = level
        self.node_group[node] = group.id
        for x in node.inputs:
            if self.group(x.node) is not group:
                group.external.add(x.node)

    # ---------------------------------------------------------------------- driver
    def run(self) -> Partition:
        handlers = {
            Kind.LEAF: lambda node: None,
            Kind.POINTWISE: self.pointwise,
            Kind.REDUCE: self.reduce,
            Kind.VIEW: self.view,
            Kind.GATHER: self.gather,
            Kind.STEP: lambda node: self.new_group(GroupKind.STEP, node),
            Kind.FALLBACK: lambda node: self.new_group(GroupKind.FALLBACK, node),
        }
        for node in self.fn.nodes:
            handlers[classify(node)](node)
            own = self.node_group.get(node)
            deps = 0 if own is None else 1 << own
            for x in node.inputs:
                deps |= self.deps[x.node]
            self.deps[node] = deps
        return self.ordered()

    # ------------------------------------------------------------------- pointwise
    def pointwise(self, node: Node) -> None:
        shape = node.outputs[0].shape
        candidates: dict[int, Level | None] = {}
        for x in node.inputs:
            group = self.group(x.node)
            if group is not None and group.kind is GroupKind.LOOP:
                level = group.levels[x.node]
                if candidates.setdefault(group.id, level) != level:
                    candidates[group.id] = None  # inputs at two levels: never join
        chosen = self.choose(node, shape, candidates)
        if not chosen:
            self.new_group(GroupKind.LOOP, node).shape = shape
            return
        level = next((lvl for g, lvl in chosen if g.axes is not None), Level.FULL)
        target = chosen[0][0]
        for other, _ in chosen[1:]:
            target = self.merge(target, other, level)
        self.add(target, node, level)

    def fits(self, group: Group, shape: DimShape, level: Level) -> bool:
        if group.axes is None:
            return level is Level.FULL and group.shape == shape
        if level is Level.FULL:
            return group.shape == shape
        return shape in group.outer_forms()

    def choose(
        self, node: Node, shape: DimShape, candidates: dict[int, Level | None]
    ) -> list[tuple[Group, Level]]:
        chosen: list[tuple[Group, Level]] = []
        for gid, level in candidates.items():
            group = self.groups[gid]
            if level is None or not self.fits(group, shape, level):
                continue
            if self.compatible(chosen, group, level) and all(
                self.mergeable(group, other) for other, _ in chosen
            ):
                chosen.append((group, level))
        while chosen:  # drop groups that another input reaches through an outside node
            inside = {g.id for g, _ in chosen}
            blocked = {
                g.id
                for x in node.inputs
                if self.group_id(x.node) not in inside
                for g, _ in chosen
                if self.depends(x.node, g)
            }
            if not blocked:
                break
            chosen = [(g, lvl) for g, lvl in chosen if g.id not in blocked]
        return chosen

    def group_id(self, node: Node) -> int | None:
        group = self.group(node)
        return None if group is None else group.id

    def compatible(self, chosen: list[tuple[Group, Level]], group: Group, level: Level) -> bool:
        for other, other_level in chosen:
            if group.axes is not None and other.axes is not None:
                if (group.shape, group.axes) != (other.shape, other.axes):
                    return False
                if level != other_level:
                    return False
        return True

    def mergeable(self, a: Group, b: Group) -> bool:
        """No path from one to the other through a node outside both."""
        for first, second in ((a, b), (b, a)):
            if any(first.id in self.producers(x) for x in second.gathered):
                return False  # a gather reads its inputs from memory, at any position
            for x in second.external:
                if self.group(x) is not first and self.depends(x, first):
                    return False
        return True

    def merge(self, target: Group, other: Group, level: Level) -> Group:
        if target.axes is None and other.axes is not None:
            target, other = other, target
        relevel = other.axes is None and target.axes is not None
        for node in other.nodes:
            target.nodes.append(node)
            target.levels[node] = level if relevel else other.levels[node]
        target.nodes.sort(key=lambda n: n.id)
        self.parent[other.id] = target.id
        self.members[target.id] |= self.members.pop(other.id)
        del self.groups[other.id]
        target.gathered |= other.gathered
        target.external = {
            x for x in target.external | other.external if self.group(x) is not target
        }
        return target

    # ------------------------------------------------------------------ reductions
    def reduce(self, node: Node) -> None:
        x = node.inputs[0]
        axes = reduction_axes(node.op)
        group = self.group(x.node)
        if (
            group is not None
            and group.kind is GroupKind.LOOP
            and group.levels[x.node] is Level.FULL
            and group.shape == x.shape
            and group.axes in (None, axes)
        ):
            group.axes = axes
            self.add(group, node, Level.OUTER)
            return
        new = self.new_group(GroupKind.LOOP, node, Level.OUTER)
        new.shape, new.axes = x.shape, axes

    # --------------------------------------------------------------------- gathers
    def gather(self, node: Node) -> None:
        """A gather starts a loop kernel over its output (its consumers may join it); it
        never joins the kernels computing its inputs, which it reads from memory."""
        group = self.new_group(GroupKind.LOOP, node)
        group.shape = node.outputs[0].shape
        group.gathered.update(x.node for x in node.inputs)

    # ----------------------------------------------------------------------- views
    def view(self, node: Node) -> None:
        x = node.inputs[0]
        group = self.group(x.node)
        bridge = BRIDGES.get(type(node.op))
        if group is not None and group.axes is not None and bridge is not None:
            level = bridge(
                node.op,
                x.shape,
                node.outputs[0].shape,
                group.shape,
                group.axes,
                int(group.levels[x.node]),
            )
            if level is not None:
                self.add(group, node, Level(level))
                return
        self.virtual.add(node)

    # -------------------------------------------------------------------- ordering
    def ordered(self) -> Partition:
        position = {node: i for i, node in enumerate(self.fn.nodes)}
        roots = list(self.groups.values())
        for group in roots:
            group.nodes.sort(key=position.__getitem__)
        preds: dict[int, set[int]] = {g.id: set() for g in roots}
        for group in roots:
            for x in group.external:
                preds[group.id] |= self.producers(x) - {group.id}
        succs: dict[int, list[int]] = {g.id: [] for g in roots}
        for gid, ps in preds.items():
            for p in ps:
                succs[p].append(gid)
        first = {g.id: position[g.nodes[0]] for g in roots}
        heap = [(first[gid], gid) for gid, ps in preds.items() if not ps]
        heapq.heapify(heap)
        order: list[Group] = []
        waiting = {gid: len(ps) for gid, ps in preds.items()}
        while heap:
            _, gid = heapq.heappop(heap)
            order.append(self.groups[gid])
            for s in succs[gid]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    heapq.heappush(heap, (first[s], s))
        assert len(order) == len(roots), "fusion produced a cycle (a fused compiler bug)"
        group_of = {n: g for g in order for n in g.nodes}
        return Partition(order, group_of, self.virtual)

    def producers(self, node: Node) -> set[int]:
        group = self.group(node)
        if group is not None:
            return {group.id}
        if node in self.virtual:
            return self.producers(node.inputs[0].node)
        return set()
