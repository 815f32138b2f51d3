"""Helpers converters share: explicit broadcasting, axes, typed scalars, small shape math."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np

from opgraph import ops
from opgraph.builders.broadcasting import broadcast_to, numpy_broadcast
from opgraph.core.dim import Dim
from opgraph.core.element_type import ElementType
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.registry import onnx_op


def broadcast_all(*values: Output) -> tuple[Output, ...]:
    """ONNX multidirectional (NumPy) broadcasting, made explicit."""
    return numpy_broadcast(*values)


def axes_list(axes: Sequence[int] | np.ndarray | None, rank: int) -> list[int]:
    """Normalised non-negative axes."""
    if axes is None:
        return []
    return [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]


def axis_of(axis: int, rank: int) -> int:
    """One normalised axis."""
    return axis + rank if axis < 0 else axis


def typed_constant(value: object, element_type: ElementType) -> Output:
    """``value`` as a Constant of ``element_type`` (cast with numpy)."""
    return constant(np.asarray(value).astype(element_type.dtype), element_type)


def full(value: object, like: Output, shape: Sequence[Dim] | None = None) -> Output:
    """A tensor of ``like``'s element type filled with ``value`` (``like``'s shape by default)."""
    target = tuple(like.shape if shape is None else shape)
    scalar = typed_constant(value, like.element_type)
    return ops.broadcast(scalar, target, tuple(range(len(target)))) if target else scalar


def unidirectional(value: Output, shape: Sequence[Dim]) -> Output:
    """ONNX unidirectional broadcasting of ``value`` to ``shape``."""
    return broadcast_to(value, tuple(shape))


def expand_to(value: Output, rank: int, axes: Sequence[int], shape: Sequence[Dim]) -> Output:
    """Broadcast ``value`` (whose axes sit at ``axes`` of a rank-``rank`` result) to ``shape``."""
    new_axes = tuple(a for a in range(rank) if a not in axes)
    return ops.broadcast(value, tuple(shape), new_axes) if new_axes else value


@overload
def prod(values: Sequence[int]) -> int: ...
@overload
def prod(values: Sequence[Dim]) -> Dim: ...
def prod(values: Sequence[Dim]) -> Dim:
    """The product of sizes: an int for ints, an expression of the symbols otherwise."""
    return math.prod(values)


def register_all(table: dict[str, tuple[Any, int]], factory: Callable[[Any], Any]) -> None:
    """Register ``factory(spec)`` for each ``name: (spec, since)`` of ``table``."""
    for name, (spec, since) in table.items():
        onnx_op(name, since=since)(factory(spec))


def outputs_wanted(ctx: NodeContext) -> int:
    """How many outputs of the node are used (trailing empty names dropped)."""
    names = list(ctx.node.output)
    while names and not names[-1]:
        names.pop()
    return len(names)


def softmax_2d(x: Output, axis: int, body: Callable[[Output, int], Output]) -> Output:
    """Apply ``body`` to ``x`` coerced to 2-D at ``axis`` (opset < 13 softmax semantics)."""
    axis = axis_of(axis, x.rank)
    flat = ops.reshape(x, [prod(x.shape[:axis]), prod(x.shape[axis:])])
    return ops.reshape(body(flat, 1), list(x.shape))
