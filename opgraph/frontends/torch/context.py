"""What an ATen converter sees: the FX node, its schema-bound arguments and typed helpers."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from opgraph import ops
from opgraph.core.dim import Dim, DimExpr
from opgraph.core.element_type import ElementType
from opgraph.core.errors import ConversionError
from opgraph.core.literals import Constant, constant
from opgraph.core.node import Output
from opgraph.frontends.torch.promotion import Operand, Scalar
from opgraph.frontends.torch.registry import name_of
from opgraph.frontends.torch.symbols import dims_of
from opgraph.frontends.torch.types import as_numpy, from_torch


@dataclass
class NodeContext:
    """One FX node being converted.

    Attributes:
        node: the ``torch.fx.Node``.
        args: its arguments bound to the overload's schema by name (defaults filled in), FX
            nodes replaced by their converted values: an ``Output``, a tuple of them for a
            multi-output node, or a Python number for a scalar-valued node.
    """

    node: torch.fx.Node
    args: dict[str, Any]

    @property
    def where(self) -> str:
        return f"torch node {self.node.name!r} ({name_of(self.node.target)})"

    def __getitem__(self, name: str) -> Any:
        if name not in self.args:
            raise self.fail(f"the converter asked for argument {name!r}, which the schema lacks")
        return self.args[name]

    def tensor(self, name: str) -> Output:
        """Argument ``name``, which must be a tensor."""
        value = self[name]
        if not isinstance(value, Output):
            raise self.fail(f"argument {name!r} should be a tensor, got {value!r:.60}")
        return value

    def optional_tensor(self, name: str) -> Output | None:
        """Argument ``name``: a tensor or None."""
        return None if self[name] is None else self.tensor(name)

    def operand(self, name: str) -> Operand:
        """Argument ``name``: a tensor or a Python number (ATen ``Scalar``)."""
        value = self[name]
        if isinstance(value, Output | Scalar | bool | int | float):
            return value
        raise self.fail(f"argument {name!r} should be a tensor or a number, got {value!r:.60}")

    def ints(self, name: str) -> list[int]:
        """Argument ``name`` as a list of ints (a single int becomes a one-element list)."""
        value = self[name]
        if value is None:
            return []
        if isinstance(value, int):
            return [value]
        return [self._as_int(v, name) for v in value]

    def dims(self, name: str) -> list[Dim]:
        """Argument ``name`` as a list of sizes: ints, or symbolic dimensions where the graph
        was traced with dynamic shapes (a single size becomes a one-element list)."""
        value = self[name]
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            value = [value]
        return [v if isinstance(v, DimExpr) else self._as_int(v, name) for v in value]

    def integer(self, name: str) -> int:
        """Argument ``name`` as an int."""
        return self._as_int(self[name], name)

    def _as_int(self, value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise self.fail(f"argument {name!r} should be an int, got {value!r:.60}")
        return int(value)

    # -------------------------------------------------------------- what ATen says it makes
    def out_meta(self, index: int = 0) -> torch.Tensor:
        """The FakeTensor ATen recorded for output ``index`` (``node.meta["val"]``)."""
        val = self.node.meta.get("val")
        if isinstance(val, list | tuple):
            val = val[index]
        if not isinstance(val, torch.Tensor):
            raise self.fail("the node carries no tensor metadata (meta['val'])")
        return val

    def out_element_type(self, index: int = 0) -> ElementType:
        """The element type of output ``index``; creation ops (``full``, ``arange``…) take
        their element type from here, as ATen's dtype inference already decided it."""
        return from_torch(self.out_meta(index).dtype, self.where)

    def out_shape(self, index: int = 0) -> tuple[Dim, ...]:
        """The shape of output ``index`` (symbolic where the graph has dynamic shapes)."""
        return dims_of(self.out_meta(index), self.where)

    def used_outputs(self) -> set[int]:
        """Indices of a multi-output node's outputs that some ``getitem`` reads."""
        used: set[int] = set()
        for user in self.node.users:
            if user.target is operator.getitem and isinstance(user.args[1], int):
                used.add(user.args[1])
            else:  # the whole tuple escapes (returned, or passed on): all outputs are read
                return set(range(len(self.node.meta.get("val") or ())))
        return used

    def fail(self, message: str) -> ConversionError:
        """A ConversionError naming this node (raise it)."""
        return ConversionError(f"{self.where}: {message}")


def static_shape(meta: torch.Tensor, where: str) -> tuple[int, ...]:
    """``meta``'s shape as ints; ConversionError for a symbolic (dynamic) dimension."""
    shape = []
    for d in meta.shape:
        if not isinstance(d, int):
            raise ConversionError(f"{where}: needs a static size, got the dynamic dimension {d}")
        shape.append(int(d))
    return tuple(shape)


def literal(value: Any, element_type: ElementType) -> Output:
    """A Python number as a rank-0 Constant of ``element_type`` (cast like ATen casts a
    wrapped number; the cast must fit the type)."""
    if element_type.is_boolean:
        return constant(bool(value), element_type)
    if element_type.is_integral:
        return constant(int(value), element_type)
    return constant(np.asarray(float(value)).astype(element_type.dtype), element_type)


def coerce(value: Operand, element_type: ElementType) -> Output:
    """An operand as a value of ``element_type``: tensors are converted, numbers become
    rank-0 Constants."""
    if isinstance(value, Scalar):
        value = value.value
    if isinstance(value, Output):
        return value if value.element_type == element_type else ops.convert(value, element_type)
    return literal(value, element_type)


def fill(value: Any, element_type: ElementType, shape: Sequence[Dim]) -> Output:
    """A tensor of ``shape`` filled with ``value`` (a broadcast scalar, not a big Constant)."""
    scalar = literal(value, element_type)
    return ops.broadcast(scalar, tuple(shape), tuple(range(len(shape)))) if shape else scalar


def constant_value(value: Output) -> np.ndarray | None:
    """The array of a Constant-produced value, else None."""
    op = value.node.op
    return op.value if isinstance(op, Constant) else None


def tensor_constant(tensor: torch.Tensor, where: str) -> Output:
    """A Constant holding a copy of ``tensor``'s values."""
    element_type = from_torch(tensor.dtype, where)
    array = as_numpy(tensor.detach().cpu().contiguous())
    return constant(np.asarray(array), element_type)
