"""The fused compiler's executable plan: buffers and the steps that read and write them.

A lowered Function becomes a :class:`Program`: an ordered list of steps (generated loop
kernels, BLAS contractions, fallbacks to reference kernels) over buffers that are either the
caller's arguments and results, constants, or slices of one arena laid out by the memory
plan. Values flow between steps as :class:`~opgraph.backends.fused.views.View` s of buffers.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

from opgraph.backends.fused.views import Operand, View
from opgraph.core.dim import Dim
from opgraph.core.element_type import ElementType
from opgraph.core.node import Node
from opgraph.core.op import Op
from opgraph.core.shape import DimShape


class BufferKind(enum.Enum):
    ARG = "arg"
    RESULT = "result"
    CONST = "const"
    ARENA = "arena"


@dataclass(eq=False)
class Buffer:
    """Storage for ``size`` elements of ``element_type``."""

    id: int
    kind: BufferKind
    element_type: ElementType
    size: Dim  # an expression of the symbols in a symbolic Program
    index: int = -1
    label: str = ""
    data: np.ndarray | None = None  # constants

    @property
    def nbytes(self) -> Dim:
        return self.size * self.element_type.itemsize


class Level(enum.IntEnum):
    """Where a kernel node is computed: once per row (outer) or per element (full)."""

    OUTER = 0
    FULL = 1


class KKind(enum.Enum):
    LOAD = "load"  # read an operand (a view or a literal)
    OP = "op"  # a scalar op (SCALAR_OPS)
    REDUCE = "reduce"  # a reduction over the kernel's inner axes (REDUCTIONS)
    ALIAS = "alias"  # a bridge: the same value seen at another shape (broadcast back, …)
    GATHER = "gather"  # an indexed load of ``table`` at positions given by index nodes


@dataclass(eq=False)
class KNode:
    """One value computed inside a loop kernel."""

    index: int
    kind: KKind
    level: Level
    element_type: ElementType
    shape: DimShape
    args: tuple[int, ...] = ()
    op: Op | None = None
    operand: Operand | None = None
    source: Node | None = None
    phase: int = 0
    table: Operand | None = None  # GATHER: the data read at indexed positions
    terms: tuple[IndexTerm, ...] = ()  # GATHER: one per index argument


@dataclass(frozen=True)
class IndexTerm:
    """One indexed axis of a GATHER node: the index argument ``i`` (wrapped when negative,
    checked against ``size``) adds ``i * stride`` elements to the table's position;
    ``what`` names the axis in the error message (``"axis 1"``)."""

    size: Dim
    stride: Dim
    what: str


def node_reads(node: KNode) -> list[View]:
    """The views a kernel node reads: its loaded operand, or a gather's table."""
    return [x for x in (node.operand, node.table) if isinstance(x, View)]


@dataclass(eq=False)
class LoopKernel:
    """A fused loop nest over ``shape`` (the full domain) whose ``axes`` are reduced by the
    kernel's REDUCE nodes (empty for a pointwise kernel).

    Rows are the non-reduced axes; a REDUCE node turns a full-level value into a row value.
    ``stores`` write node values into destination views (the shape of the stored node).
    """

    shape: DimShape
    axes: tuple[int, ...]
    nodes: list[KNode] = field(default_factory=list)
    stores: list[tuple[int, View]] = field(default_factory=list)

    @property
    def outer_shape(self) -> DimShape:
        return tuple(d for i, d in enumerate(self.shape) if i not in self.axes)

    @property
    def inner_shape(self) -> DimShape:
        return tuple(self.shape[a] for a in self.axes)


@dataclass(eq=False)
class Step:
    """One unit of execution. ``nodes`` are the graph nodes it computes (for messages)."""

    label: str
    nodes: tuple[Node, ...]

    def reads(self) -> list[View]:
        return []

    def writes(self) -> list[View]:
        return []

    def inplace_pairs(self) -> list[tuple[int, int]]:
        """(input buffer, output buffer) pairs the output may share when the input dies
        here."""
        return []


@dataclass(eq=False)
class LoopStep(Step):
    """Generated loop kernels run one after the other (several for a concat)."""

    kernels: tuple[LoopKernel, ...] = ()

    def reads(self) -> list[View]:
        return [view for k in self.kernels for n in k.nodes for view in node_reads(n)]

    def writes(self) -> list[View]:
        return [view for k in self.kernels for _, view in k.stores]

    def inplace_pairs(self) -> list[tuple[int, int]]:
        return loop_inplace_pairs(self.kernels[0]) if len(self.kernels) == 1 else []


@dataclass(eq=False)
class GemmStep(Step):
    """``out = a @ b`` on 2-D views (``rows x cols`` with any strides BLAS accepts), once per
    batch entry: ``batch`` lists element offsets added to (a, b, out).

    ``panel``: when not 0, ``b`` is a constant repacked as column panels of that width (a
    ``(cols/panel, inner, panel)`` array, zero-padded), read by the generated GEMV (16) or
    GEMM (32) kernel instead of BLAS.

    ``grid`` (symbolic Programs only): a batch whose entries cannot be listed (a symbolic
    batch size) as one ``(size, stride in a, stride in b, stride in out)`` per batch axis;
    every grid position is an entry, its offsets added to ``batch``'s single entry."""

    a: View | None = None
    b: View | None = None
    out: View | None = None
    batch: tuple[tuple[Dim, Dim, Dim], ...] = ((0, 0, 0),)
    epilogue: LoopKernel | None = None
    panel: int = 0
    grid: tuple[tuple[Dim, Dim, Dim, Dim], ...] = ()

    def reads(self) -> list[View]:
        assert self.a is not None and self.b is not None and self.out is not None
        return [self.a, self.b, *epilogue_reads(self.epilogue, self.out)]

    def writes(self) -> list[View]:
        assert self.out is not None
        return [self.out, *epilogue_writes(self.epilogue)]


@dataclass(eq=False)
class FallbackStep(Step):
    """A node run by its reference kernel, called back from the native code."""

    node: Node | None = None
    inputs: tuple[Operand, ...] = ()
    outputs: tuple[View, ...] = ()

    def reads(self) -> list[View]:
        return [x for x in self.inputs if isinstance(x, View)]

    def writes(self) -> list[View]:
        return list(self.outputs)


@dataclass
class Program:
    """Steps in execution order over buffers; results map to RESULT buffers."""

    buffers: list[Buffer]
    steps: list[Step]
    num_args: int
    num_results: int

    def buffer(self, view: View) -> Buffer:
        return self.buffers[view.buffer]

    def constants(self) -> list[Buffer]:
        return [b for b in self.buffers if b.kind is BufferKind.CONST]


def loop_inplace_pairs(kernel: LoopKernel) -> list[tuple[int, int]]:
    """A stored full-level value may overwrite an input buffer that the kernel reads only at
    the same element (same whole dense view) — each element is read before it is written."""
    if kernel.axes:
        return []
    reads: dict[int, set[View]] = {}
    gathered = {n.table.buffer for n in kernel.nodes if isinstance(n.table, View)}
    for node in kernel.nodes:
        if isinstance(node.operand, View) and node.operand.buffer not in gathered:
            reads.setdefault(node.operand.buffer, set()).add(node.operand)
    pairs = []
    for _, out in kernel.stores:
        if not out.is_whole:
            continue
        for buffer, seen in reads.items():
            view = next(iter(seen))
            same_layout = view.is_whole and view.shape == out.shape
            same_width = view.element_type.itemsize == out.element_type.itemsize
            if len(seen) == 1 and same_layout and same_width:
                pairs.append((buffer, out.buffer))
    return pairs


def epilogue_reads(epilogue: LoopKernel | None, out: View) -> list[View]:
    """What an epilogue kernel reads besides the producer's output (updated in place)."""
    if epilogue is None:
        return []
    return [view for n in epilogue.nodes for view in node_reads(n) if view.buffer != out.buffer]


def epilogue_writes(epilogue: LoopKernel | None) -> list[View]:
    return [] if epilogue is None else [view for _, view in epilogue.stores]


def nbytes(element_type: ElementType, shape: DimShape) -> Dim:
    return math.prod(shape) * element_type.itemsize


@dataclass(eq=False)
class ConvStep(Step):
    """2-D convolution by im2col and GEMM (f32/f64). ``x`` (N, C, H, W) is read through its
    strides; ``w`` is the dense (O, C/groups·kh·kw) filter matrix.

    ``wide`` False: ``out`` is dense (N, O, OH, OW); each unit builds the patches of a block
    of output rows in its thread's slice of ``scratch`` and multiplies them. ``wide`` True
    (small outputs): all patches go to ``scratch`` as (groups, K, N·OH·OW) first, then one
    GEMM per group, split by output channels, writes ``out`` as (O, N·OH·OW).

    ``direct`` (small channel groups: depthwise, or grouped with few channels per group):
    no patches and no ``scratch``; ``out`` is dense (N, O, OH, OW) and each output is summed
    straight from the image (the CPU's direct kernel; targets without one may still run the
    step as im2col and GEMM, since every other field means the same)."""

    x: View | None = None
    w: View | None = None
    out: View | None = None
    kernel: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)  # below (top, left); above is implied by the shapes
    groups: int = 1
    block_rows: int = 1
    scratch: View | None = None
    wide: bool = False
    images: tuple[Dim, int, int] = (1, 1, 1)  # N (symbolic where the batch is), OH, OW
    epilogue: LoopKernel | None = None
    direct: bool = False

    def reads(self) -> list[View]:
        assert self.x is not None and self.w is not None and self.out is not None
        return [self.x, self.w, *epilogue_reads(self.epilogue, self.out)]

    def writes(self) -> list[View]:
        assert self.out is not None
        scratch = [self.scratch] if self.scratch is not None else []
        return [self.out, *scratch, *epilogue_writes(self.epilogue)]


@dataclass(eq=False)
class PoolStep(Step):
    """2-D max or average pooling over windows; ``x`` (N, C, H, W) read through its strides,
    ``out`` dense. ``divisor_low``/``divisor_high`` bound the padded coordinates that count in
    an average's divisor."""

    x: View | None = None
    out: View | None = None
    maximum: bool = True
    window: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    count_padding: bool = False
    padded: tuple[int, int] = (0, 0)  # H + pb + pa, W + pb + pa

    def reads(self) -> list[View]:
        assert self.x is not None
        return [self.x]

    def writes(self) -> list[View]:
        assert self.out is not None
        return [self.out]


@dataclass(eq=False)
class WinogradStep(Step):
    """A 3x3 stride-1 convolution by Winograd F(m x m, 3x3) (f32, one group; ``tile`` m is 2
    or 4): ``u`` is the transformed filter constant ((m + 2)², O, C); a unit is a block of
    ``block_rows`` tile rows of ``images`` consecutive images (more than one only when
    ``block_rows`` covers the whole plane: small planes fold the batch into the products'
    columns) and one of ``channel_blocks`` equal blocks of output channels (more than one when
    there are too few tile blocks to share out: each such unit transforms the same input
    tiles); ``scratch`` holds each thread's transformed tiles and products, then (``shared``
    > 0: several channel blocks, a static batch) one row per block of tiles where a phase of
    its own transforms the input once for all that block's channel-block units.

    ``flipped``: the step is the data gradient of the convolution whose transformed filters
    ``u`` ((m + 2)², C, O: this step's input channels C, output channels O) are: the product
    for tile point α reads ``u[FLIPPED_POINTS[α]]`` transposed (``lowering/winograd_tiles.py``),
    no copy of the reversed and swapped filters (F(2x2) only)."""

    x: View | None = None
    u: View | None = None
    out: View | None = None
    padding: tuple[int, int] = (0, 0)
    block_rows: int = 1
    scratch: View | None = None
    epilogue: LoopKernel | None = None
    images: int = 1
    channel_blocks: int = 1
    tile: int = 2
    shared: int = 0  # blocks of tiles transformed once into shared scratch rows (0: per unit)
    flipped: bool = False

    def reads(self) -> list[View]:
        assert self.x is not None and self.u is not None and self.out is not None
        return [self.x, self.u, *epilogue_reads(self.epilogue, self.out)]

    def writes(self) -> list[View]:
        assert self.out is not None and self.scratch is not None
        return [self.out, self.scratch, *epilogue_writes(self.epilogue)]


@dataclass(eq=False)
class ScanStep(Step):
    """A cumulative sum along the middle axis of ``x`` (outer, n, inner), read through its
    strides, into the dense ``out`` of the same shape: each output is the sum of the inputs
    before it (``exclusive``: strictly before; ``reverse``: counted from the end), in order,
    accumulated in the compute type (f32 for f16 and bf16)."""

    x: View | None = None
    out: View | None = None
    exclusive: bool = False
    reverse: bool = False

    def reads(self) -> list[View]:
        assert self.x is not None
        return [self.x]

    def writes(self) -> list[View]:
        assert self.out is not None
        return [self.out]
