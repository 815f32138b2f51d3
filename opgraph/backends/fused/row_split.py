"""Split a row kernel into its elementwise head and its reductions, so that the head can be a
product's epilogue.

A row kernel whose reductions read a value it also stores whole (a convolution's bias and
activation, stored for a later reader and summed over the plane for a squeeze-excite block)
computes the elementwise part once per element and reduces the stored value. When the kernel
reads a product, the elementwise part can run inside the producing step while its blocks are
in cache (:mod:`~opgraph.backends.fused.epilogues`), and the reductions become a row kernel of
their own that loads the stored value back: the product's own store and its second read are
gone, and the reductions read data just written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from opgraph.backends.fused.builder import assign_phases
from opgraph.backends.fused.program import KKind, KNode, Level, LoopKernel
from opgraph.backends.fused.views import View


@dataclass(frozen=True)
class RowSplit:
    """``head``: the elementwise kernel with every full-level store; ``rows``: the reductions
    and what follows them, loading the head's stored values where they used its nodes."""

    head: LoopKernel
    rows: LoopKernel


def split_rows(kernel: LoopKernel, product: int) -> RowSplit | None:
    """The split of row kernel ``kernel`` around buffer ``product`` (read by the head only),
    or None when its full-level stores depend on a reduction or the reductions need a head
    value that is not stored."""
    head = _elementwise(kernel)
    full = [(k, v) for k, v in kernel.stores if kernel.nodes[k].level is Level.FULL]
    if not full or any(k not in head for k, _ in full):
        return None
    stored = {k: v for k, v in full if v.is_whole and v.shape == kernel.shape}
    loads: dict[int, KNode] = {}
    for node in kernel.nodes:
        for a in node.args:
            if node.index not in head and a in head and a not in loads:
                load = _load_back(kernel.nodes[a], stored.get(a), product)
                if load is None:
                    return None
                loads[a] = load
    reads_product = (_reads(n, product) for n in kernel.nodes if n.index in head)
    if not any(reads_product):
        return None
    return RowSplit(_head(kernel, head, full), _rows(kernel, head, loads))


def _elementwise(kernel: LoopKernel) -> set[int]:
    """The full-level loads and scalar ops that depend on no reduction."""
    head: set[int] = set()
    for node in kernel.nodes:
        elementwise = node.kind in (KKind.LOAD, KKind.OP) and node.level is Level.FULL
        if elementwise and all(a in head for a in node.args):
            head.add(node.index)
    return head


def _reads(node: KNode, buffer: int) -> bool:
    return isinstance(node.operand, View) and node.operand.buffer == buffer


def _load_back(node: KNode, stored: View | None, product: int) -> KNode | None:
    """How the reductions see head node ``node``: a load of where the head stores it, the
    same load when it is one (not of the product, which the epilogue overwrites), else None."""
    if stored is not None:
        return dataclasses.replace(node, kind=KKind.LOAD, args=(), op=None, operand=stored)
    if node.kind is KKind.LOAD and not _reads(node, product):
        return dataclasses.replace(node)
    return None


def _head(kernel: LoopKernel, head: set[int], full: list[tuple[int, View]]) -> LoopKernel:
    renumber: dict[int, int] = {}
    nodes: list[KNode] = []
    for node in kernel.nodes:
        if node.index in head:
            renumber[node.index] = len(nodes)
            args = tuple(renumber[a] for a in node.args)
            nodes.append(dataclasses.replace(node, index=len(nodes), args=args, phase=0))
    stores = [(renumber[k], v) for k, v in full]
    return LoopKernel(kernel.shape, (), nodes, stores)


def _rows(kernel: LoopKernel, head: set[int], loads: dict[int, KNode]) -> LoopKernel:
    renumber: dict[int, int] = {}
    nodes: list[KNode] = []

    def place(index: int, node: KNode) -> None:
        renumber[index] = len(nodes)
        args = tuple(renumber[a] for a in node.args)
        nodes.append(dataclasses.replace(node, index=len(nodes), args=args))

    for node in kernel.nodes:
        if node.index in head:
            continue
        for a in node.args:
            if a in loads and a not in renumber:
                place(a, loads[a])
        place(node.index, node)
    stores = [(renumber[k], v) for k, v in kernel.stores if k not in head]
    rows = LoopKernel(kernel.shape, kernel.axes, nodes, stores)
    assign_phases(rows)
    return rows
