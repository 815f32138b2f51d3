"""Turn a partitioned Function into a :class:`~opgraph.backends.fused.program.Program`.

Values computed by a group and needed outside it are stored: into the caller's result buffer
when the value is a result (the first time it is returned), else into an arena buffer. Views
(movement ops) cost nothing; a view that strides cannot express, or an operand a BLAS call
cannot read, is copied first. Results that are parameters, constants, views or repeats are
copied into their result buffers at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from opgraph.backends.fused.fusion import Group, GroupKind, Kind, Partition, classify, partition
from opgraph.backends.fused.lowering import GATHERS, STEP_OPS, SYMBOLIC_STEP_OPS, VIEW_OPS
from opgraph.backends.fused.program import (
    Buffer,
    BufferKind,
    FallbackStep,
    KKind,
    KNode,
    Level,
    LoopKernel,
    LoopStep,
    Program,
    Step,
)
from opgraph.backends.fused.views import Literal, Operand, View, shape_size
from opgraph.core.element_type import ElementType
from opgraph.core.function import Function
from opgraph.core.graph import readers
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.core.printing import format_node, value_names
from opgraph.core.shape import DimShape
from opgraph.passes.fold_quantized_chains import MIN_PLANE
from opgraph.passes.specialize_shapes import is_symbolic


@dataclass(frozen=True)
class TargetFeatures:
    """Target-specific steps the lowering may choose (the default: all, as the CPU has).

    Attributes:
        panels: products by constant f32 matrices read them repacked as column panels
            (``GemmStep.panel``: the CPU's generated GEMV/GEMM); else plain strided matrices.
        winograd: 3x3 stride-1 convolutions with constant filters may become a
            ``WinogradStep``, and their filter gradients a ``WinogradFilterGradientStep``;
            else a ``ConvStep`` and a ``ConvFilterGradientStep``.
        winograd_f4: Winograd steps may use F(4x4, 3x3) tiles (``WinogradStep.tile``);
            else F(2x2, 3x3) only (bf16 products: the larger tile's transforms lose too
            much in bf16).
        padded_rows: a panel product's left operand whose rows alias in L1 is read from a
            copy with padded rows (``lowering/row_padding.py``); else in place (bf16
            products round their left operand into a buffer of their own anyway; the
            CPU's half panels, whose 6-row tile does not alias, read it in place).
        patches: convolutions with larger kernels (not Winograd's, not direct) may run as
            a ``PointwiseConvStep`` on their patch matrix (``lowering/pointwise.py``); else
            a ``ConvStep`` (bf16 mode: its products convert to bf16 ones, the patch step's
            do not).
        panel_halves: the 32-column panels of products by constant matrices (``GemmStep.panel``
            32, ``PanelConvStep``) are stored as two 16-column halves, ``K x 16`` each, one
            after the other (the CPU's AVX2 tile: ``CpuConfig.panel_halves()``); else
            ``K x 32``.
        vector_lanes: the f32 lanes of the vectors the target's kernels compute with (the
            CPU: 8 for AVX2 builds, 16 for AVX-512 and the portable build,
            ``CpuConfig.vector_lanes()``): layout costs that count vector passes read it
            (``lowering/pointwise.py``).
        l2_bytes: one core's level-2 cache in bytes (the CPU: ``config.l2_cache_bytes()``);
            the ``pixels`` layout of patch and pointwise convolutions sizes its units by it
            (``lowering/pointwise.py``, :func:`unit_floats`).
        channel_table_plane: the fewest elements a channel's plane needs for a batch norm
            between two quantizations to become a per-channel table lookup
            (``fold_quantized_chains``' ``min_plane``: where the target's lookup of a plane
            measures faster than its batch norm chain); None: per-tensor tables only.
    """

    panels: bool = True
    winograd: bool = True
    winograd_f4: bool = True
    padded_rows: bool = True
    patches: bool = True
    panel_halves: bool = False
    vector_lanes: int = 16
    l2_bytes: int = 1 << 20
    channel_table_plane: int | None = MIN_PLANE


class ProgramBuilder:
    """Builds the Program of a lowered Function; step lowerings (``STEP_OPS``) call back
    into :meth:`operand`, :meth:`home`, :meth:`materialize` and :meth:`add_step`."""

    def __init__(
        self, fn: Function, threads: int = 1, features: TargetFeatures | None = None
    ) -> None:
        self.fn = fn
        self.threads = threads
        self.features = features or TargetFeatures()
        self.symbolic = is_symbolic(fn)
        self.names = value_names(fn)
        self.partition: Partition = partition(fn)
        self.buffers: list[Buffer] = []
        self.steps: list[Step] = []
        self.operands: dict[Output, Operand] = {}
        self.consumers: dict[Output, list[Node]] = readers(fn.nodes)
        self.result_slot: dict[Output, int] = {}
        for j, r in enumerate(fn.results):
            self.result_slot.setdefault(r, j)
        self.taken: set[int] = set()
        self.args = [
            self.new_buffer(BufferKind.ARG, p.element_type, p.shape, i, p)
            for i, p in enumerate(fn.parameters)
        ]
        self.results = [
            self.new_buffer(BufferKind.RESULT, r.element_type, r.shape, j, r)
            for j, r in enumerate(fn.results)
        ]

    # ------------------------------------------------------------------------ buffers
    def new_buffer(
        self,
        kind: BufferKind,
        element_type: ElementType,
        shape: DimShape,
        index: int = -1,
        value: Output | None = None,
        data: np.ndarray | None = None,
    ) -> Buffer:
        label = self.names.get(value, "") if value is not None else ""
        buffer = Buffer(
            len(self.buffers), kind, element_type, shape_size(shape), index, label, data
        )
        self.buffers.append(buffer)
        return buffer

    def describe(self, node: Node) -> str:
        return format_node(node, self.names)

    # ----------------------------------------------------------------------- operands
    def operand(self, value: Output) -> Operand:
        """How steps read ``value`` (it must be computed by an earlier step, or a leaf)."""
        found = self.operands.get(value)
        if found is not None:
            return found
        node = value.node
        if isinstance(node.op, Parameter):
            buffer = self.args[self.fn.parameters.index(value)]
            found = View.dense(buffer.id, value.element_type, value.shape)
        elif isinstance(node.op, Constant):
            found = self.constant(node.op, value)
        elif type(node.op) in VIEW_OPS:
            found = self.view(node, self.operand(node.inputs[0]))
        else:
            raise AssertionError(f"{self.describe(node)} read before it was computed")
        self.operands[value] = found
        return found

    def view(self, node: Node, source: Operand) -> Operand:
        return VIEW_OPS[type(node.op)](node.op, source, self.materialize)

    def constant(self, op: Constant, value: Output) -> Operand:
        data = op.value
        flat = data.reshape(-1)
        bits = flat.view(f"u{data.dtype.itemsize}") if data.dtype.itemsize in (1, 2, 4, 8) else None
        if flat.size == 0 or (bits is not None and bool(np.all(bits == bits[0]))):
            first = flat[0].item() if flat.size else 0
            scalar = float(first) if op.element_type.is_real else first
            return Literal(scalar, op.element_type, value.shape)
        buffer = self.new_buffer(
            BufferKind.CONST, op.element_type, value.shape, len(self.constants()), value, data
        )
        return View.dense(buffer.id, value.element_type, value.shape)

    def constants(self) -> list[Buffer]:
        return [b for b in self.buffers if b.kind is BufferKind.CONST]

    def home(self, value: Output) -> View:
        """A fresh buffer for ``value`` (its result buffer when it is a result), recorded as
        how later steps read it."""
        slot = self.result_slot.get(value)
        if slot is not None and slot not in self.taken:
            self.taken.add(slot)
            buffer = self.results[slot]
        else:
            buffer = self.new_buffer(BufferKind.ARENA, value.element_type, value.shape, -1, value)
        view = View.dense(buffer.id, value.element_type, value.shape)
        self.operands[value] = view
        return view

    def scratch(self, element_type: ElementType, shape: DimShape) -> View:
        buffer = self.new_buffer(BufferKind.ARENA, element_type, shape)
        return View.dense(buffer.id, element_type, shape)

    def copy_kernel(self, source: Operand, target: View, op: Op | None = None) -> LoopKernel:
        """A kernel copying ``source`` into ``target`` (converted by ``op`` when given)."""
        kernel = LoopKernel(source.shape, ())
        load = KNode(0, KKind.LOAD, Level.FULL, source.element_type, source.shape, operand=source)
        kernel.nodes.append(load)
        if op is not None:
            kernel.nodes.append(
                KNode(1, KKind.OP, Level.FULL, target.element_type, source.shape, (0,), op)
            )
        kernel.stores.append((len(kernel.nodes) - 1, target))
        return kernel

    def materialize(
        self,
        source: Operand,
        element_type: ElementType | None = None,
        op: Op | None = None,
        into: View | None = None,
    ) -> View:
        """A dense copy of ``source`` (converted by ``op`` when given) in a new buffer."""
        target = into or self.scratch(element_type or source.element_type, source.shape)
        self.add_step(LoopStep("copy", (), (self.copy_kernel(source, target, op),)))
        return target

    def add_step(self, step: Step) -> None:
        self.steps.append(step)

    # ------------------------------------------------------------------------- groups
    def build(self) -> Program:
        builders: dict[GroupKind, Callable[[Group], None]] = {
            GroupKind.LOOP: self.loop_group,
            GroupKind.STEP: self.step_group,
            GroupKind.FALLBACK: self.fallback_group,
        }
        for group in self.partition.groups:
            builders[group.kind](group)
        self.finish_results()
        return Program(self.buffers, self.steps, len(self.args), len(self.results))

    def step_group(self, group: Group) -> None:
        (node,) = group.nodes
        if self.symbolic and type(node.op) not in SYMBOLIC_STEP_OPS:
            self.fallback(node)  # no symbolic lowering yet: reference kernel, per-call shapes
            return
        STEP_OPS[type(node.op)](self, node)

    def fallback_group(self, group: Group) -> None:
        (node,) = group.nodes
        self.fallback(node)

    def fallback(self, node: Node) -> None:
        """Run ``node`` through its reference kernel (step lowerings use this for the cases
        they do not generate code for)."""
        inputs = tuple(self.operand(x) for x in node.inputs)
        outputs = tuple(self.home(o) for o in node.outputs)
        self.add_step(FallbackStep(self.describe(node), (node,), node, inputs, outputs))

    def escapes(self, value: Output, group: Group) -> bool:
        """Whether ``value`` must be stored: a result, or read outside ``group``."""
        if value in self.result_slot:
            return True
        for consumer in self.consumers.get(value, ()):
            if self.partition.group_of.get(consumer) is not group:
                return True
            if classify(consumer) is Kind.VIEW and self.escapes(consumer.outputs[0], group):
                return True
        return False

    def loop_group(self, group: Group) -> None:
        kernel = LoopKernel(group.shape, group.axes or ())
        index: dict[Output, int] = {}
        loads: dict[tuple[Operand, Level], int] = {}
        members = set(group.nodes)

        def arg(x: Output, level: Level) -> int:
            if x.node in members:
                return index[x]
            operand = self.operand(x)
            key = (operand, level)
            if key not in loads:
                loads[key] = self._add(kernel, KKind.LOAD, level, x, operand=operand)
            return loads[key]

        for node in group.nodes:
            level, value = group.levels[node], node.outputs[0]
            kind = classify(node)
            if kind is Kind.VIEW:
                index[value] = self._add(
                    kernel, KKind.ALIAS, level, value, (index[node.inputs[0]],), node=node
                )
            elif kind is Kind.GATHER:
                index[value] = self._gather(kernel, node, level, loads)
            elif kind is Kind.REDUCE:
                index[value] = self._add(
                    kernel,
                    KKind.REDUCE,
                    level,
                    value,
                    (arg(node.inputs[0], Level.FULL),),
                    node=node,
                )
            else:
                args = tuple(arg(x, level) for x in node.inputs)
                index[value] = self._add(kernel, KKind.OP, level, value, args, node=node)
        for node in group.nodes:
            value = node.outputs[0]
            if classify(node) is not Kind.VIEW and self.escapes(value, group):
                kernel.stores.append((index[value], self.home(value)))
        assign_phases(kernel)
        label = "; ".join(self.describe(n) for n in group.nodes)
        self.add_step(LoopStep(label, tuple(group.nodes), (kernel,)))

    def _gather(
        self, kernel: LoopKernel, node: Node, level: Level, loads: dict[tuple[Operand, Level], int]
    ) -> int:
        """A GATHER node reading ``node``'s data at the positions its indices give (the
        index operands become loads of the kernel)."""
        x, indices = node.inputs
        value = node.outputs[0]
        read = GATHERS[type(node.op)](node.op, self.operand(x), self.operand(indices), value.shape)
        args = []
        for operand in read.indices:
            key = (operand, level)
            if key not in loads:
                t = operand.element_type
                load = KNode(len(kernel.nodes), KKind.LOAD, level, t, value.shape, operand=operand)
                kernel.nodes.append(load)
                loads[key] = load.index
            args.append(loads[key])
        k = self._add(kernel, KKind.GATHER, level, value, tuple(args), node=node)
        kernel.nodes[k].table = read.table
        kernel.nodes[k].terms = read.terms
        return k

    @staticmethod
    def _add(
        kernel: LoopKernel,
        kind: KKind,
        level: Level,
        value: Output,
        args: tuple[int, ...] = (),
        operand: Operand | None = None,
        node: Node | None = None,
    ) -> int:
        k = KNode(
            len(kernel.nodes),
            kind,
            level,
            value.element_type,
            value.shape,
            args,
            node.op if node is not None else None,
            operand,
            node,
        )
        kernel.nodes.append(k)
        return k.index

    # ------------------------------------------------------------------------ results
    def finish_results(self) -> None:
        for j, value in enumerate(self.fn.results):
            if j in self.taken:
                continue
            target = View.dense(self.results[j].id, value.element_type, value.shape)
            self.materialize(self.operand(value), into=target)


def assign_phases(kernel: LoopKernel) -> None:
    """Number the reductions of a row kernel: a reduction's phase is the number of reduction
    phases its input waits for; reductions of one phase share one loop over the row."""
    after: list[int] = []
    for node in kernel.nodes:
        ready = max((after[a] for a in node.args), default=0)
        if node.kind is KKind.REDUCE:
            node.phase = ready
            ready += 1
        after.append(ready)


def build_program(
    fn: Function, threads: int = 1, features: TargetFeatures | None = None
) -> Program:
    """The Program of a Function already lowered (:func:`~opgraph.backends.fused.pipeline.lower`;
    ``threads``: how many threads steps may split their work between, for per-thread
    scratch; ``features``: the target-specific steps it may use, default all)."""
    return ProgramBuilder(fn, threads, features).build()
