"""Helpers ATen converters share: overload lookup, promotion + broadcasting, axes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from opgraph import ops
from opgraph.builders.broadcasting import broadcast_to, numpy_broadcast
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.element_type import ElementType
from opgraph.core.node import Output
from opgraph.frontends.torch.context import coerce, fill
from opgraph.frontends.torch.promotion import Operand, result_type


def overloads(*names: str) -> list[Any]:
    """``torch.ops.aten`` overloads by ``"op.overload"`` name; names this torch lacks are
    skipped, so one converter table serves several torch versions."""
    found = []
    for name in names:
        op_name, overload = name.split(".")
        packet = getattr(torch.ops.aten, op_name, None)
        target = getattr(packet, overload, None) if packet is not None else None
        if target is not None:
            found.append(target)
    return found


def aten(name: str) -> Any:
    """The overload ``torch.ops.aten.<name>`` (``"add.Tensor"``); KeyError if torch lacks it."""
    found = overloads(name)
    if not found:
        raise KeyError(f"torch {torch.__version__} has no aten.{name}")
    return found[0]


def promoted(*operands: Operand, element_type: ElementType | None = None) -> list[Output]:
    """Operands converted to their ATen result type (or ``element_type``) and broadcast to
    their common shape, NumPy-style."""
    target = element_type or result_type(operands)
    return list(numpy_broadcast(*(coerce(v, target) for v in operands)))


def as_bool(value: Output) -> Output:
    """``value != 0`` (ATen's truthiness); booleans pass through."""
    if value.element_type.is_boolean:
        return value
    return ops.not_equal(value, fill(0, value.element_type, value.shape))


def scale(value: Output, factor: float) -> Output:
    """``value * factor`` (skipped for a factor of 1)."""
    if factor == 1:
        return value
    return ops.multiply(value, fill(factor, value.element_type, value.shape))


def dim_of(dim: int, rank: int) -> int:
    """A non-negative axis; rank-0 tensors accept dims -1 and 0 as ATen does."""
    extent = max(rank, 1)
    if not -extent <= dim < extent:
        raise IndexError(f"dim {dim} is out of range for a rank-{rank} tensor")
    return dim + extent if dim < 0 else dim


def reduction_axes(dims: Sequence[int] | int | None, rank: int) -> list[int]:
    """The axes a reduction runs over: None or ``[]`` mean all of them (ATen's convention)."""
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(rank))
    return sorted({dim_of(d, rank) for d in dims if rank}) if rank else []


def broadcast_like(value: Output, shape: Sequence[Dim]) -> Output:
    """``value`` broadcast NumPy-style to ``shape``."""
    return broadcast_to(value, tuple(shape))


def integral_to_i64(value: Output) -> Output:
    """Booleans and integers widened to i64 (ATen's sum/prod/cumsum accumulate there)."""
    if value.element_type.is_real or value.element_type == et.i64:
        return value
    return ops.convert(value, et.i64)
