"""Shape values with symbolic dimensions, tracked at import time.

A model imported with symbolic input dimensions computes shapes from them: ``Shape`` of an
``f32[N,S,64]`` value is ``[N, S, 64]``, which opgraph cannot hold in a Constant. Such a value
is kept here as a numpy object array of dimensions (ints and ``DimExpr``), keyed by a
placeholder Constant that stands for it in the importer's value table. Nodes reading a
symbolic shape value are converted by the handlers below, which compute on the object arrays
(``Gather``, ``Concat``, ``Unsqueeze``, ``Slice``, integer arithmetic…) and by ``Reshape``,
whose target becomes a symbolic shape. A result whose dimensions are all ints becomes a plain
Constant again. A node with no handler raises a ConversionError that names it and points to
``input_shapes=``; a placeholder never reaches a converter, a graph output or the Function.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.dim import format_dim, is_symbolic
from opgraph.core.errors import ConversionError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext, constant_value
from opgraph.frontends.onnx.converters.common import axes_list
from opgraph.frontends.onnx.types import from_onnx

#: What a handler sees per input: the dimensions of a shape value (object array), the array of
#: an import-time constant, or None for a tensor known only at run time (or an omitted input).
Operand = np.ndarray | None
Handler = Callable[[NodeContext, list[Operand]], Sequence[np.ndarray | Output]]

HANDLERS: dict[str, Handler] = {}


def handles(*op_types: str) -> Callable[[Handler], Handler]:
    """Register a handler for nodes of ``op_types`` that read a symbolic shape value."""

    def register(handler: Handler) -> Handler:
        for op_type in op_types:
            HANDLERS[op_type] = handler
        return handler

    return register


class SymbolicValues:
    """The symbolic shape values of one import, by their placeholder Output."""

    def __init__(self) -> None:
        self.arrays: dict[Output, np.ndarray] = {}

    def get(self, value: Output | None) -> np.ndarray | None:
        """The dimensions ``value`` stands for, or None when it is an ordinary value."""
        return None if value is None else self.arrays.get(value)

    def any(self, values: Sequence[Output | None]) -> bool:
        return any(v is not None and v in self.arrays for v in values)

    def make(self, dims: np.ndarray, element_type: et.ElementType = et.i64) -> Output:
        """A value for ``dims``: a Constant when every entry is an int, else a placeholder."""
        dims = np.asarray(dims, dtype=object)
        if not any(is_symbolic(d) for d in dims.flat):
            return constant(dims.astype(np.int64), element_type)
        placeholder = constant(np.zeros(dims.shape, np.int64), element_type)
        self.arrays[placeholder] = dims
        return placeholder

    def convert(self, ctx: NodeContext) -> list[Output]:
        """Convert ``ctx``'s node, some of whose inputs are symbolic shape values."""
        handler = HANDLERS.get(ctx.node.op_type) if not ctx.node.domain else None
        if handler is None:
            raise unsupported(ctx, self, "has no symbolic form here")
        operands = [self._operand(v) for v in ctx.inputs]
        produced = handler(ctx, operands)
        return [v if isinstance(v, Output) else self.make(v, _element_type(ctx)) for v in produced]

    def _operand(self, value: Output | None) -> Operand:
        if value is None:
            return None
        found = self.arrays.get(value)
        if found is not None:
            return found
        array = constant_value(value)
        return None if array is None else np.asarray(array)

    def describe(self, value: Output) -> str:
        array = self.arrays[value]
        return "[" + ", ".join(format_dim(d) for d in array.flat) + "]"


def unsupported(ctx: NodeContext, values: SymbolicValues, why: str) -> ConversionError:
    """The error for a node opgraph cannot convert on symbolic shape values."""
    shown = ", ".join(
        f"{name!r} = {values.describe(v)}"
        for name, v in zip(ctx.node.input, ctx.inputs, strict=False)
        if v is not None and v in values.arrays
    )
    return ConversionError(
        f"{ctx.where} reads shape values with symbolic dimensions ({shown}) and {why}; "
        "specialise the symbolic inputs with import_model(..., input_shapes={name: shape})"
    )


#: Element types of the results of ops whose result type is not their first input's, by ONNX
#: op type.
RESULT_TYPES: dict[str, Callable[[NodeContext], et.ElementType]] = {
    "Cast": lambda ctx: from_onnx(int(ctx.attr("to")), ctx.where),
}


def _element_type(ctx: NodeContext) -> et.ElementType:
    rule = RESULT_TYPES.get(ctx.node.op_type)
    if rule is not None:
        return rule(ctx)
    first = next((v for v in ctx.inputs if v is not None), None)
    return et.i64 if first is None else first.element_type


def _need(ctx: NodeContext, operands: list[Operand], *indices: int) -> list[np.ndarray]:
    """The operands at ``indices``; each must be known at import time (symbolic or constant)."""
    found = []
    for i in indices:
        operand = operands[i] if i < len(operands) else None
        if operand is None:
            raise ctx.fail(
                f"input {i} must be computable at import time to compute with symbolic shape "
                "values; specialise the symbolic inputs with import_model(..., "
                "input_shapes={name: shape})"
            )
        found.append(operand)
    return found


# ------------------------------------------------------------------------------ handlers
@handles("Identity")
def _identity(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    return _need(ctx, operands, 0)


@handles("Cast")
def _cast(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    if not _element_type(ctx).is_integral:
        raise ctx.fail(
            "a shape value with symbolic dimensions can only be cast to an integer type; "
            "specialise the symbolic inputs with import_model(..., input_shapes={name: shape})"
        )
    return _need(ctx, operands, 0)


@handles("Shape")
def _shape(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    (data,) = _need(ctx, operands, 0)
    shape = list(data.shape)
    rank = len(shape)
    start, end = int(ctx.attr("start", 0)), int(ctx.attr("end", rank))
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    return [np.array(shape[start:end], dtype=object)]


@handles("Size")
def _size(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    (data,) = _need(ctx, operands, 0)
    return [np.array(data.size, dtype=object)]


@handles("Gather")
def _gather(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    data, indices = _need(ctx, operands, 0, 1)
    axis = int(ctx.attr("axis", 0))
    size = data.shape[axis]
    wrapped = np.where(indices < 0, indices + size, indices).astype(np.int64)
    if np.any((wrapped < 0) | (wrapped >= size)):
        raise ctx.fail(f"indices {indices.tolist()} out of range for axis {axis} of size {size}")
    return [np.take(data, wrapped, axis=axis)]


@handles("Unsqueeze")
def _unsqueeze(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    (data,) = _need(ctx, operands, 0)
    raw = ctx.attr("axes") if ctx.opset < 13 else _need(ctx, operands, 1)[0]
    axes = axes_list(raw, data.ndim + len(np.asarray(raw).reshape(-1)))
    return [np.expand_dims(data, tuple(axes))]


@handles("Squeeze")
def _squeeze(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    (data,) = _need(ctx, operands, 0)
    raw = ctx.attr("axes") if ctx.opset < 13 else (operands[1] if len(operands) > 1 else None)
    if raw is None:
        return [np.squeeze(data)]
    return [np.squeeze(data, tuple(axes_list(raw, data.ndim)))]


@handles("Concat")
def _concat(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    present = [i for i, v in enumerate(ctx.inputs) if v is not None]
    parts = [np.asarray(p, dtype=object) for p in _need(ctx, operands, *present)]
    return [np.concatenate(parts, axis=int(ctx.attr("axis")))]


@handles("Slice")
def _slice(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    raw_axes: Any
    raw_steps: Any = None
    if ctx.opset < 10:
        (data,) = _need(ctx, operands, 0)
        starts, ends, raw_axes = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
    else:
        data, starts, ends = _need(ctx, operands, 0, 1, 2)
        given = [i for i in (3, 4) if ctx.optional(i) is not None]
        found = dict(zip(given, _need(ctx, operands, *given), strict=True))
        raw_axes, raw_steps = found.get(3), found.get(4)
    axes = axes_list(raw_axes, data.ndim) if raw_axes is not None else list(range(len(starts)))
    steps = [int(s) for s in raw_steps] if raw_steps is not None else [1] * len(axes)
    index: list[slice] = [slice(None)] * data.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        index[axis] = slice(int(start), int(end), step)
    return [data[tuple(index)]]


@handles("Add", "Sub", "Mul", "Div")
def _arithmetic(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray]:
    if not _element_type(ctx).is_integral:
        raise ctx.fail("arithmetic on symbolic shape values needs integer operands")
    a, b = (np.asarray(v, dtype=object) for v in _need(ctx, operands, 0, 1))
    return [_ARITHMETIC[ctx.node.op_type](a, b)]


#: Shape sizes are non-negative, so floor and truncating division agree for Div.
_ARITHMETIC: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
    "Div": operator.floordiv,
}


@handles("Reshape")
def _reshape(ctx: NodeContext, operands: list[Operand]) -> list[np.ndarray | Output]:
    (target,) = _need(ctx, operands, 1)
    x = ctx.input(0)
    data = ctx.importer.symbolic.get(x)
    if data is not None:  # a shape value reshaped
        if any(is_symbolic(d) for d in target.flat):
            raise ctx.fail("a shape value cannot be reshaped to a symbolic shape")
        return [data.reshape([int(d) for d in target.flat])]
    dims = list(target.reshape(-1))
    if not ctx.attr("allowzero", 0):
        dims = [x.shape[i] if _is_zero(d) else d for i, d in enumerate(dims)]
    return [ops.reshape(x, [d if is_symbolic(d) else int(d) for d in dims])]


def _is_zero(d: Any) -> bool:
    return not is_symbolic(d) and int(d) == 0
