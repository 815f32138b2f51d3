"""Epilogue fusion: an elementwise kernel that consumes a GEMM's or a convolution's result runs
inside that step, on each block right after the block is computed (while it is in cache).

The kernel qualifies when it is pointwise, reads the product whole and nowhere else reads it,
and everything else it reads is ready before the product. When one of its results has the
product's type and shape, the product is written straight into that result's buffer and the
kernel updates it in place, so the product needs no buffer of its own (bias, batch-norm
scale and shift, activation, residual add: one pass over cache-hot data).

Before that, a bottleneck's ``(y + b1) + (r + b2)`` of two 1x1 products is split so that each
product's step takes one part in registers (:func:`split_shifted_residuals`).
"""

from __future__ import annotations

import dataclasses

from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep
from opgraph.backends.fused.lowering.row_padding import padded_output
from opgraph.backends.fused.program import (
    Buffer,
    BufferKind,
    ConvStep,
    GemmStep,
    KKind,
    KNode,
    LoopKernel,
    LoopStep,
    Program,
    Step,
    WinogradStep,
)
from opgraph.backends.fused.views import View
from opgraph.core import element_type as et
from opgraph.ops import elementwise as ew

Producer = GemmStep | ConvStep | WinogradStep


class _Index:
    """Which steps read and write each buffer, and the steps' relative order, computed once
    and updated as steps merge or move (a scan of every step per question made the pass
    quadratic: ``_consumer`` was a quarter of a large model's compile)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.readers: dict[int, dict[int, Step]] = {}
        self.writers: dict[int, dict[int, Step]] = {}
        self.seen: dict[int, tuple[set[int], set[int]]] = {}
        self.key: dict[int, float] = {id(s): float(i) for i, s in enumerate(program.steps)}
        for step in program.steps:
            self.add(step)

    def add(self, step: Step) -> None:
        reads, writes = {v.buffer for v in step.reads()}, {v.buffer for v in step.writes()}
        self.seen[id(step)] = (reads, writes)
        for table, buffers in ((self.readers, reads), (self.writers, writes)):
            for b in buffers:
                table.setdefault(b, {})[id(step)] = step

    def drop(self, step: Step) -> None:
        reads, writes = self.seen.pop(id(step))
        for table, buffers in ((self.readers, reads), (self.writers, writes)):
            for b in buffers:
                del table[b][id(step)]

    def changed(self, step: Step) -> None:
        self.drop(step)
        self.add(step)

    def remove(self, step: Step) -> None:
        """``step`` leaves the program (merged into another)."""
        self.drop(step)
        self.program.steps.remove(step)

    def written_before(self, buffer: int, step: Step) -> bool:
        at = self.key[id(step)]
        return any(self.key[w] < at for w in self.writers.get(buffer, {}))

    def first_writer_from(self, buffer: int, step: Step) -> Step | None:
        """The first step at or after ``step`` that writes ``buffer``."""
        at = self.key[id(step)]
        later = [w for w in self.writers.get(buffer, {}).values() if self.key[id(w)] >= at]
        return min(later, key=lambda w: self.key[id(w)], default=None)

    def insert_before(self, step: Step, anchor: Step) -> None:
        """``step``, new to the program, runs just before ``anchor``."""
        self.program.steps.append(step)
        self.add(step)
        self.move_before(step, anchor)

    def move_before(self, step: Step, anchor: Step) -> None:
        steps = self.program.steps
        steps.remove(step)
        at = steps.index(anchor)
        steps.insert(at, step)
        below = self.key[id(steps[at - 1])] if at > 0 else self.key[id(anchor)] - 1.0
        self.key[id(step)] = (below + self.key[id(anchor)]) / 2


def fuse_epilogues(program: Program) -> None:
    """Move qualifying consumers of products into the producing steps (in place)."""
    index = _Index(program)
    merge_pointwise_steps(program, index)
    split_shifted_residuals(program, index)
    producers = [s for s in program.steps if isinstance(s, GemmStep | ConvStep | WinogradStep)]
    for producer in producers:
        out = producer.out
        if out is None or not _fusable_output(program, producer):
            continue
        consumer = _consumer(program, out.buffer, index)
        if consumer is None:
            continue
        _hoist_inputs(program, consumer, producer, index)
        if not _ready(program, consumer, out.buffer, producer, index):
            continue
        kernel = consumer.kernels[0]
        _redirect(producer, kernel, out)
        producer.epilogue = kernel
        producer.label += "; epilogue: " + consumer.label
        producer.nodes = producer.nodes + consumer.nodes
        index.remove(consumer)
        index.changed(producer)


def _hoist_inputs(
    program: Program, consumer: Step, producer: Step, index: _Index, depth: int = 2
) -> None:
    """Move the steps computing the consumer's other inputs before the producer when they
    depend only on earlier steps (a residual branch computed after the main one), or on
    steps that can move there too, ``depth`` steps deep (a shortcut's convolution, then
    its shift: :func:`split_shifted_residuals`)."""
    for view in consumer.reads():
        writer = index.first_writer_from(view.buffer, producer)
        if writer is None or writer is consumer or writer is producer:
            continue
        needs = {v.buffer for v in writer.reads()}
        arena = {
            b for b in needs if program.buffers[b].kind in (BufferKind.ARENA, BufferKind.RESULT)
        }
        if depth > 1 and not _written_before(arena, producer, index):
            _hoist_inputs(program, writer, producer, index, depth - 1)
        if _written_before(arena, producer, index):
            index.move_before(writer, producer)


def _written_before(buffers: set[int], step: Step, index: _Index) -> bool:
    return all(index.written_before(b, step) for b in buffers)


def merge_pointwise_steps(program: Program, index: _Index | None = None) -> None:
    """A pointwise kernel whose only reader is another pointwise kernel of the same shape
    (a layout copy made by a lowering, then its consumer) becomes part of that kernel."""
    index = index or _Index(program)
    for first in [s for s in program.steps if _pointwise(s)]:
        assert isinstance(first, LoopStep)
        kernel = first.kernels[0]
        if len(kernel.stores) != 1:
            continue
        stored, view = kernel.stores[0]
        if program.buffers[view.buffer].kind is not BufferKind.ARENA or not view.is_whole:
            continue
        second = _consumer(program, view.buffer, index)
        if second is None or second.kernels[0].shape != kernel.shape:
            continue
        _inline(kernel, stored, second.kernels[0], view.buffer)
        second.label = first.label + "; " + second.label
        second.nodes = first.nodes + second.nodes
        index.remove(first)
        index.changed(second)


def split_shifted_residuals(program: Program, index: _Index) -> None:
    """``(y + b1) + (r + b2)`` (then ReLU or not) of two 1x1 convolutions' products ``y``
    and ``r`` and per-channel shifts (ResNet's first block of a stage: the main branch and
    the downsampling shortcut, each with its batch norm's shift) becomes two kernels:
    ``r' = r + b2`` (a new buffer), then ``(y + b1) + r'``. Each is then one producer's
    epilogue in registers (``channel_bias``: a bias; a bias and a residual), not one
    epilogue pass over ``y`` that reads ``r``; and the residual step may write its output
    over ``r'`` (``PointwiseConvStep.inplace_pairs``). The same additions in the same
    order: the same bits."""
    for step in [s for s in program.steps if _pointwise(s)]:
        assert isinstance(step, LoopStep)
        shift = _second_shift(program, step.kernels[0], index)
        if shift is not None:
            _split_shift(program, step, shift, index)


def _second_shift(program: Program, kernel: LoopKernel, index: _Index) -> int | None:
    """The node of ``r + b2`` in ``kernel`` when it is ``[Relu]((y + b1) + (r + b2))`` as
    :func:`split_shifted_residuals` describes; else None."""
    if len(kernel.stores) != 1:
        return None
    nodes = kernel.nodes
    top = nodes[kernel.stores[0][0]]
    add = nodes[top.args[0]] if isinstance(top.op, ew.Relu) else top
    if not isinstance(add.op, ew.Add) or len(add.args) != 2:
        return None
    if not all(_shifted_product(program, kernel, nodes[a], index) for a in add.args):
        return None
    return add.args[1]


def _shifted_product(program: Program, kernel: LoopKernel, node: KNode, index: _Index) -> bool:
    """Whether ``node`` adds a per-channel view to a whole product of a 1x1 convolution
    that only this kernel reads."""
    if not isinstance(node.op, ew.Add) or len(node.args) != 2 or node.element_type != et.f32:
        return False  # (f32: the stored sum is the sum the kernel would compute)
    views = [kernel.nodes[a].operand for a in node.args]
    if not all(
        isinstance(v, View) and kernel.nodes[a].kind is KKind.LOAD
        for a, v in zip(node.args, views, strict=True)
    ):
        return False
    channel = tuple(1 if axis == 1 else 0 for axis in range(len(kernel.shape)))
    shifts = [v for v in views if isinstance(v, View) and v.strides == channel]
    products = [v for v in views if isinstance(v, View) and v.is_whole]
    if len(shifts) != 1 or len(products) != 1 or products[0].shape != kernel.shape:
        return False
    buffer = products[0].buffer
    writers = list(index.writers.get(buffer, {}).values())
    return (
        program.buffers[buffer].kind is BufferKind.ARENA
        and len(index.readers.get(buffer, {})) == 1
        and len(writers) == 1
        and isinstance(writers[0], PointwiseConvStep)
    )


def _split_shift(program: Program, step: LoopStep, shift: int, index: _Index) -> None:
    """Move node ``shift`` (``r + b2``) of ``step``'s kernel into a kernel of its own that
    stores it to a new arena buffer, which ``step`` then loads."""
    kernel = step.kernels[0]
    add = kernel.nodes[shift]
    loaded = [kernel.nodes[a].operand for a in add.args]
    product = next(v for v in loaded if isinstance(v, View) and v.is_whole)
    old = program.buffers[product.buffer]
    buffer = Buffer(len(program.buffers), BufferKind.ARENA, old.element_type, old.size)
    buffer.label = old.label
    program.buffers.append(buffer)
    view = View.dense(buffer.id, old.element_type, kernel.shape)
    loads = [dataclasses.replace(kernel.nodes[a], index=i) for i, a in enumerate(add.args)]
    moved = dataclasses.replace(add, index=2, args=(0, 1))
    own = LoopKernel(kernel.shape, (), [*loads, moved], [(2, view)])
    kernel.nodes[shift] = KNode(
        shift, KKind.LOAD, add.level, add.element_type, add.shape, operand=view
    )
    _drop_unreached(kernel)
    source = tuple(n for n in step.nodes if n is add.source)
    split = LoopStep(f"{old.label} + shift", source, kernels=(own,))
    index.insert_before(split, step)
    index.changed(step)


def _drop_unreached(kernel: LoopKernel) -> None:
    """Remove the nodes no store reaches, the rest renumbered in order."""
    reached: set[int] = set()
    stack = [k for k, _ in kernel.stores]
    while stack:
        k = stack.pop()
        if k not in reached:
            reached.add(k)
            stack.extend(kernel.nodes[k].args)
    renumber = {k: i for i, k in enumerate(sorted(reached))}
    kept = [kernel.nodes[k] for k in sorted(reached)]
    for node in kept:
        node.index = renumber[node.index]
        node.args = tuple(renumber[a] for a in node.args)
    kernel.stores[:] = [(renumber[k], v) for k, v in kernel.stores]
    kernel.nodes[:] = kept


def _pointwise(step: Step) -> bool:
    return isinstance(step, LoopStep) and len(step.kernels) == 1 and not step.kernels[0].axes


def _inline(source: LoopKernel, value: int, target: LoopKernel, buffer: int) -> None:
    """Replace ``target``'s load of ``buffer`` by ``source``'s computation of ``value``
    (source nodes first, then target nodes renumbered densely)."""
    load = next(
        n for n in target.nodes if isinstance(n.operand, View) and n.operand.buffer == buffer
    )
    nodes = [dataclasses.replace(n) for n in source.nodes]
    renumber = {load.index: value}
    for node in target.nodes:
        if node is not load:
            renumber[node.index] = len(nodes)
            node.args = tuple(renumber[a] for a in node.args)
            node.index = len(nodes)
            nodes.append(node)
    target.stores[:] = [(renumber[k], v) for k, v in target.stores]
    target.nodes[:] = nodes


def _fusable_output(program: Program, producer: Producer) -> bool:
    out = producer.out
    assert out is not None
    if program.buffers[out.buffer].kind is not BufferKind.ARENA or not out.is_whole:
        return False
    # a wide convolution of several images writes a (O, N·OH·OW) plane: not the layout read
    return not (isinstance(producer, ConvStep) and producer.wide and producer.images[0] != 1)


def _consumer(program: Program, buffer: int, index: _Index) -> LoopStep | None:
    readers = list(index.readers.get(buffer, {}).values())
    if len(readers) != 1 or not isinstance(readers[0], LoopStep):
        return None
    step = readers[0]
    if len(step.kernels) != 1 or step.kernels[0].axes:
        return None
    if any(isinstance(n.table, View) and n.table.buffer == buffer for n in step.kernels[0].nodes):
        return None  # gathered at any position: the whole product must be ready first
    loads = [n for n in step.kernels[0].nodes if isinstance(n.operand, View)]
    of_product = [n.operand for n in loads if n.operand.buffer == buffer]  # type: ignore[union-attr]
    if len(of_product) != 1:
        return None
    view = of_product[0]
    assert isinstance(view, View)
    size = program.buffers[buffer].size
    if not view.is_whole or view.size != size or view.shape != step.kernels[0].shape:
        return None
    return step


def _target(producer: Producer, store: View, out: View) -> View | None:
    """Where the product goes so that the kernel's ``store`` updates it in place, or None."""
    if store.is_whole and store.element_type is out.element_type:
        return View(store.buffer, out.element_type, out.shape, out.strides, 0)
    return padded_output(producer, store) if isinstance(producer, GemmStep) else None


def _ready(program: Program, consumer: Step, product: int, producer: Step, index: _Index) -> bool:
    """Every other input of ``consumer`` is written before ``producer`` (or is an argument)."""
    for view in consumer.reads():
        kind = program.buffers[view.buffer].kind
        if (
            view.buffer != product
            and kind in (BufferKind.ARENA, BufferKind.RESULT)
            and not index.written_before(view.buffer, producer)
        ):
            return False
    return True


def _redirect(producer: Producer, kernel: LoopKernel, out: View) -> None:
    """Write the product into a same-typed result of the kernel, which then works in place
    (a result with padded rows too, for a panel product: ``row_padding.padded_output``)."""
    for _, store in kernel.stores:
        target = _target(producer, store, out) if store.shape == kernel.shape else None
        if target is not None:
            producer.out = target
            in_place = store
            for node in kernel.nodes:
                source = node.operand
                if (
                    node.kind is KKind.LOAD
                    and isinstance(source, View)
                    and source.buffer == out.buffer
                ):
                    node.operand = in_place
            return
