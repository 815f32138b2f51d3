"""NumPy-style broadcasting made explicit with core ``broadcast`` and ``reshape`` ops, and Python
scalars as typed constants broadcast to a value's shape (``x * 0.5``).

These are helpers that emit subgraphs of core ops, not ops. ``zeros`` and ``zeros_like`` are
in :mod:`opgraph.ops.movement`, whose adjoints use them.
"""

from __future__ import annotations

from typing import Any

from opgraph.core.dim import Dim
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import DimShape
from opgraph.ops.movement import broadcast, reshape

__all__ = ["broadcast_to", "numpy_broadcast", "numpy_broadcast_shape", "scalar_like"]


def numpy_broadcast_shape(*shapes: DimShape) -> DimShape:
    """The NumPy broadcast of ``shapes``; raises ``OpTypeError`` naming the clash."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[Dim] = []
    for axis in range(rank):
        dims = {s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0}
        big = dims - {1}
        if len(big) > 1:
            raise OpTypeError(
                f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast "
                f"(axis {axis - rank}: {sorted(dims, key=str)})"
            )
        result.append(big.pop() if big else 1)
    return tuple(result)


def broadcast_to(x: Output, shape: DimShape) -> Output:
    """``x`` broadcast NumPy-style to ``shape`` (size-1 axes squeezed, then new axes added)."""
    if x.shape == tuple(shape):
        return x
    offset = len(shape) - x.rank
    if offset < 0:
        raise OpTypeError(f"cannot broadcast {x.type} to the lower-rank shape {list(shape)}")
    kept = [a for a in range(x.rank) if not (x.shape[a] == 1 and shape[offset + a] != 1)]
    for a in kept:
        if x.shape[a] != shape[offset + a]:
            raise OpTypeError(f"cannot broadcast {x.type} to {list(shape)} (axis {a})")
    squeezed = reshape(x, [x.shape[a] for a in kept]) if len(kept) != x.rank else x
    new_axes = [a for a in range(len(shape)) if a - offset not in kept]
    return broadcast(squeezed, shape, new_axes)


def numpy_broadcast(*values: Output) -> tuple[Output, ...]:
    """``values`` broadcast to their common NumPy shape with explicit core ops."""
    shape = numpy_broadcast_shape(*(v.shape for v in values))
    return tuple(broadcast_to(v, shape) for v in values)


def scalar_like(value: Any, like: Any) -> Output:
    """``value`` as a Constant of ``like``'s element type, broadcast to ``like``'s shape.

    Raises:
        OpTypeError: ``like`` is not a value, or ``value`` does not fit its element type
            (e.g. ``0.5`` for an integer tensor).
    """
    if not isinstance(like, Output):
        raise OpTypeError(
            f"cannot combine {type(value).__name__} {value!r:.40} with {type(like).__name__}: "
            "one operand must be an opgraph value"
        )
    scalar = constant(value, like.element_type)
    if scalar.shape != ():
        raise OpTypeError(
            f"operator sugar takes Python scalars, got a value of shape {scalar.shape}"
        )
    return broadcast(scalar, like.shape, tuple(range(like.rank))) if like.rank else scalar
