"""Ops that write their output window by window (``STEP_OPS``): Pad and ReplaceSlice become
one :class:`~opgraph.backends.fused.program.LoopStep` of copy kernels, each copying a strided
view of an input (or filling with the pad value) into a window of the output. Every target
runs them as ordinary loop kernels.

Pad, constant mode: the input (cropped where padding is negative) into the interior, and per
padded axis the slab below and the slab above it, filled with the value (full range along the
axes before, interior range along the axes after: the slabs never overlap). Extension modes
(edge, reflect, symmetric): along each axis the output positions fall into runs whose source
positions in the input step by +1, -1 or 0 (an edge repeated); each combination of one run
per axis is one copy of a strided view of the input. Repeated reflections make many runs: past
:data:`MAX_KERNELS` copies the op runs its reference kernel instead.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from opgraph.backends.fused.lowering.registry import STEP_OPS
from opgraph.backends.fused.program import LoopKernel, LoopStep
from opgraph.backends.fused.views import Literal, Operand, View, static_all
from opgraph.core.node import Node
from opgraph.ops.movement import ReplaceSlice
from opgraph.ops.rearrange import Pad, PadMode, _extended_index

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: The most copies one Pad may take before it runs its reference kernel instead.
MAX_KERNELS = 64

#: One run of output positions along an axis: (first output position, length, first source
#: position or None for the pad value, source step).
Run = tuple[int, int, int | None, int]


def window(
    x: Operand, starts: tuple[int, ...], steps: tuple[int, ...], shape: tuple[int, ...]
) -> Operand:
    """The elements of ``x`` at ``starts + i * steps`` for ``i`` over ``shape``."""
    if isinstance(x, Literal):
        return Literal(x.value, x.element_type, shape)
    offset = x.offset + sum(s * t for s, t in zip(starts, x.strides, strict=True))
    strides = tuple(step * t for step, t in zip(steps, x.strides, strict=True))
    return View(x.buffer, x.element_type, shape, strides, offset)


def uniform(value: Operand, shape: tuple[int, ...]) -> Operand:
    """The scalar ``value`` broadcast to ``shape``."""
    if isinstance(value, Literal):
        return Literal(value.value, value.element_type, shape)
    return View(value.buffer, value.element_type, shape, (0,) * len(shape), value.offset)


def runs(sources: list[int | None]) -> list[Run]:
    """Maximal runs of output positions whose sources step evenly (or are all the value)."""
    found: list[Run] = []
    j = 0
    while j < len(sources):
        first = sources[j]
        step = 1
        if first is not None and j + 1 < len(sources) and sources[j + 1] is not None:
            step = sources[j + 1] - first  # type: ignore[operator]
        end = j + 1
        while end < len(sources) and _continues(sources, first, step, j, end):
            end += 1
        found.append((j, end - j, first, step))
        j = end
    return found


def _continues(sources: list[int | None], first: int | None, step: int, j: int, end: int) -> bool:
    if first is None:
        return sources[end] is None
    return sources[end] == first + step * (end - j)


def _runs_per_axis(op: Pad, shape: tuple[int, ...]) -> list[list[Run]]:
    per_axis = []
    for lo, dim, hi in zip(op.padding_below, shape, op.padding_above, strict=True):
        n = lo + dim + hi
        if op.mode is PadMode.CONSTANT or max(lo, hi) <= 0:  # (an uncropped axis: no extension)
            sources = [j - lo if 0 <= j - lo < dim else None for j in range(n)]
        else:
            sources = [_extended_index(j - lo, dim, op.mode) for j in range(n)]
        per_axis.append(runs(sources))  # type: ignore[arg-type]
    return per_axis


def _copy(builder: ProgramBuilder, source: Operand, target: View) -> LoopKernel:
    return builder.copy_kernel(source, target)


def _constant_kernels(
    builder: ProgramBuilder, op: Pad, x: Operand, value: Operand, out: View
) -> list[LoopKernel]:
    """The interior, then the slabs below and above each padded axis."""
    low = [max(lo, 0) for lo in op.padding_below]
    shown = [
        dim - max(-lo, 0) - max(-hi, 0)
        for lo, dim, hi in zip(
            op.padding_below, static_all(x.shape), op.padding_above, strict=True
        )  # Pad has no symbolic lowering: static Programs only
    ]
    crop = tuple(max(-lo, 0) for lo in op.padding_below)
    ones = (1,) * len(out.shape)
    interior = tuple(shown)
    kernels = []
    if math.prod(interior):
        target = window(out, tuple(low), ones, interior)
        assert isinstance(target, View)
        kernels.append(_copy(builder, window(x, crop, ones, interior), target))
    out_shape = static_all(out.shape)
    for axis, n in enumerate(out_shape):
        for start, length in (
            (0, low[axis]),
            (low[axis] + shown[axis], n - low[axis] - shown[axis]),
        ):
            starts = [0] * axis + [start] + low[axis + 1 :]
            shape: tuple[int, ...] = (*out_shape[:axis], length, *interior[axis + 1 :])
            if length > 0 and 0 not in shape:
                target = window(out, tuple(starts), ones, shape)
                assert isinstance(target, View)
                kernels.append(_copy(builder, uniform(value, shape), target))
    return kernels


def _run_kernels(
    builder: ProgramBuilder, per_axis: list[list[Run]], x: Operand, value: Operand, out: View
) -> list[LoopKernel]:
    """One copy per combination of runs."""
    ones = (1,) * len(out.shape)
    kernels = []
    for combination in itertools.product(*per_axis):
        shape = tuple(length for _, length, _, _ in combination)
        target = window(out, tuple(start for start, *_ in combination), ones, shape)
        assert isinstance(target, View)
        if any(source is None for _, _, source, _ in combination):
            source: Operand = uniform(value, shape)
        else:
            starts = tuple(s for _, _, s, _ in combination)
            source = window(x, starts, tuple(step for *_, step in combination), shape)  # type: ignore[arg-type]
        kernels.append(_copy(builder, source, target))
    return kernels


@STEP_OPS.register(Pad)
def _pad(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, Pad)
    x, value = node.inputs
    per_axis = _runs_per_axis(op, static_all(x.shape))  # static Programs only
    if op.mode is not PadMode.CONSTANT and math.prod(len(r) for r in per_axis) > MAX_KERNELS:
        builder.fallback(node)
        return
    out = builder.home(node.outputs[0])
    if out.size == 0:
        return
    source, fill = builder.operand(x), builder.operand(value)
    if op.mode is PadMode.CONSTANT:
        kernels = _constant_kernels(builder, op, source, fill, out)
    else:
        kernels = _run_kernels(builder, per_axis, source, fill, out)
    builder.add_step(LoopStep(builder.describe(node), (node,), tuple(kernels)))


@STEP_OPS.register(ReplaceSlice)
def _replace_slice(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, ReplaceSlice) and op.strides is not None
    x, update = node.inputs
    if not all(isinstance(b, int) for b in (*op.lower_bounds, *op.upper_bounds)):
        builder.fallback(node)
        return
    out = builder.home(node.outputs[0])
    if out.size == 0:
        return
    kernels = [_copy(builder, builder.operand(x), out)]
    if update.tensor_type.size:
        target = window(out, tuple(op.lower_bounds), op.strides, update.shape)  # type: ignore[arg-type]
        assert isinstance(target, View)
        kernels.append(_copy(builder, builder.operand(update), target))
    builder.add_step(LoopStep(builder.describe(node), (node,), tuple(kernels)))
