"""Movement ops as re-views of their operand: no copy, kernels read through strides."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from opgraph.backends.fused import views
from opgraph.backends.fused.lowering.registry import (
    BRIDGES,
    REWRITES,
    STEP_OPS,
    SYMBOLIC_STEP_OPS,
    VIEW_OPS,
)
from opgraph.backends.fused.program import LoopStep
from opgraph.backends.fused.views import Literal, Operand, View
from opgraph.core.dim import Dim
from opgraph.core.node import Node, Output
from opgraph.core.shape import DimShape
from opgraph.ops import movement as mv
from opgraph.ops.rearrange import DepthToSpace, SpaceToDepth
from opgraph.ops.structural import StopGradient

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

Copy = Callable[[Operand], Operand]


@VIEW_OPS.register(mv.Broadcast)
def _broadcast(op: mv.Broadcast, x: Operand, copy: Copy) -> Operand:
    shape = tuple(op.shape)
    if isinstance(x, Literal):
        return Literal(x.value, x.element_type, shape)
    strides = list(x.strides)
    for axis in op.broadcast_axes:  # sorted: inserting in order keeps positions right
        strides.insert(axis, 0)
    return View(x.buffer, x.element_type, shape, tuple(strides), x.offset)


@VIEW_OPS.register(mv.Transpose)
def _transpose(op: mv.Transpose, x: Operand, copy: Copy) -> Operand:
    return views.permute(x, op.perm)


@VIEW_OPS.register(mv.Reshape)
def _reshape(op: mv.Reshape, x: Operand, copy: Copy) -> Operand:
    assert op.input_order is not None
    permuted = views.permute(x, op.input_order)
    shape = tuple(op.output_shape)
    result = views.reshape(permuted, shape) or views.reshape(copy(permuted), shape)
    assert result is not None
    return result


@VIEW_OPS.register(mv.Slice)
def _slice(op: mv.Slice, x: Operand, copy: Copy) -> Operand:
    assert op.strides is not None
    shape = tuple(
        -(-(hi - lo) // step)
        for lo, hi, step in zip(op.lower_bounds, op.upper_bounds, op.strides, strict=True)
    )
    if isinstance(x, Literal):
        return Literal(x.value, x.element_type, shape)
    offset = x.offset + sum(lo * s for lo, s in zip(op.lower_bounds, x.strides, strict=True))
    strides = tuple(s * step for s, step in zip(x.strides, op.strides, strict=True))
    return View(x.buffer, x.element_type, shape, strides, offset)


# --------------------------------------------------------------------- row-kernel bridges
OUTER, FULL = 0, 1


def _outer_shapes(full: DimShape, axes: tuple[int, ...]) -> tuple[DimShape, ...]:
    dropped = tuple(d for i, d in enumerate(full) if i not in axes)
    kept = tuple(1 if i in axes else d for i, d in enumerate(full))
    return dropped, kept


@BRIDGES.register(mv.Broadcast)
def _broadcast_back(
    op: mv.Broadcast,
    source: DimShape,
    shape: DimShape,
    full: DimShape,
    axes: tuple[int, ...],
    level: int,
) -> int | None:
    """A row value broadcast along exactly the reduced axes is the row value at every element."""
    if level == OUTER and shape == full and op.broadcast_axes == axes and axes:
        return FULL
    return None


@BRIDGES.register(mv.Reshape)
def _keep_dims(
    op: mv.Reshape,
    source: DimShape,
    shape: DimShape,
    full: DimShape,
    axes: tuple[int, ...],
    level: int,
) -> int | None:
    """Reshaping a row value between its keep-dims and dropped-dims shapes moves nothing."""
    identity = op.input_order == tuple(range(len(source)))
    forms = _outer_shapes(full, axes)
    if level == OUTER and identity and axes and source in forms and shape in forms:
        return OUTER
    return None


# ----------------------------------------------------------------------------- concat
@STEP_OPS.register(mv.Concat)
def _concat(builder: ProgramBuilder, node: Node) -> None:
    """One copy kernel per input, each writing its slice of the result."""
    assert isinstance(node.op, mv.Concat)
    axis = node.op.axis
    target = builder.home(node.outputs[0])
    kernels = []
    start: Dim = 0
    for x in node.inputs:
        size = x.tensor_type.size
        if type(size) is not int or size:  # a symbolic input may be empty: the copy is too
            offset = target.offset + start * target.strides[axis]
            piece = View(target.buffer, target.element_type, x.shape, target.strides, offset)
            kernels.append(builder.copy_kernel(builder.operand(x), piece))
        start = start + x.shape[axis]
    if kernels:
        builder.add_step(LoopStep(builder.describe(node), (node,), tuple(kernels)))


SYMBOLIC_STEP_OPS.add(mv.Concat)  # copy kernels: loop kernels take symbolic sizes


# ------------------------------------------------------------------- more movement views
@VIEW_OPS.register(mv.Reverse)
def _reverse(op: mv.Reverse, x: Operand, copy: Copy) -> Operand:
    """Negative strides starting from the last element of each reversed axis."""
    if isinstance(x, Literal):
        return x
    strides = list(x.strides)
    offset = x.offset
    for axis in op.axes:
        size = x.shape[axis]
        if type(size) is not int or size:  # symbolic: at size 0 nothing is read anyway
            offset += (size - 1) * strides[axis]
            strides[axis] = -strides[axis]
    return View(x.buffer, x.element_type, x.shape, tuple(strides), offset)


@VIEW_OPS.register(StopGradient)
def _identity(op: StopGradient, x: Operand, copy: Copy) -> Operand:
    return x


@REWRITES.register(mv.Split)
def _split(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    """Each piece is a slice (a view)."""
    assert isinstance(node.op, mv.Split) and node.op.sizes is not None
    (x,) = inputs
    axis, start, pieces = node.op.axis, 0, []
    for size in node.op.sizes:
        lower = [0] * x.rank
        upper = list(x.shape)
        lower[axis], upper[axis] = start, start + size
        pieces.append(mv.slice(x, lower, upper))
        start += size
    return pieces


@REWRITES.register(mv.Tile)
def _tile(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    """A broadcast to ``(r0, d0, r1, d1, …)`` read row-major as ``(r0*d0, r1*d1, …)``."""
    assert isinstance(node.op, mv.Tile)
    (x,) = inputs
    wide = tuple(n for r, d in zip(node.op.repeats, x.shape, strict=True) for n in (r, d))
    spread = mv.broadcast(x, wide, tuple(range(0, len(wide), 2)))
    return [mv.reshape(spread, node.outputs[0].shape)]


def _block_rearrangement(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    """Depth/space rearrangements are reshape, transpose, reshape."""
    (x,) = inputs
    split_shape, perm, out_shape = node.op.layout(x.shape)  # type: ignore[attr-defined]
    return [mv.reshape(mv.reshape(x, split_shape), out_shape, perm)]


REWRITES.add(DepthToSpace, _block_rearrangement)
REWRITES.add(SpaceToDepth, _block_rearrangement)
