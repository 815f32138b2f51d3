"""Data movement: broadcast (and ``zeros``/``zeros_like``, broadcast constants), reshape,
transpose, slice, concat, replace_slice, reverse, reverse_sequence, tile, split, and the
build-time ``range_``. Padding and block/depth rearrangement (pad, depth_to_space,
space_to_depth) are in :mod:`opgraph.ops.rearrange`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.dim import Dim, ceil_div, floor_div
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.provenance import user_frame
from opgraph.core.shape import (
    DimShape,
    ShapeAttr,
    as_dims,
    as_int,
    as_int_tuple,
    maybe_divisible,
    maybe_equal,
    maybe_le,
    normalize_axes,
    normalize_axis,
)
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import (
    inverse_permutation,
    require_element_type,
    require_min_rank,
    require_same_element_type,
)

__all__ = [
    "Broadcast",
    "broadcast",
    "zeros",
    "zeros_like",
    "Reshape",
    "reshape",
    "Transpose",
    "transpose",
    "Slice",
    "slice",
    "Concat",
    "concat",
    "ReplaceSlice",
    "replace_slice",
    "Reverse",
    "reverse",
    "ReverseSequence",
    "reverse_sequence",
    "Tile",
    "tile",
    "Split",
    "split",
    "range_",
]


def _is_permutation(order: Sequence[int], rank: int) -> bool:
    return sorted(order) == list(range(rank))


# ------------------------------------------------------------------------------ broadcast
@opclass
class Broadcast(Op):
    """Replicate ``x`` along new axes: output ``shape``; ``broadcast_axes`` are the output axes
    that are new. ``output[c] = x[c without the broadcast axes]``."""

    shape: ShapeAttr
    broadcast_axes: tuple[int, ...]
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "shape", as_dims(self.shape, "shape"))
        set_attr(self, "broadcast_axes", as_int_tuple(self.broadcast_axes, "broadcast_axes"))

    def canonicalize(self, x: TensorType) -> Broadcast:
        rank = len(self.shape)
        axes = tuple(
            sorted({normalize_axis(a, rank, "broadcast axis") for a in self.broadcast_axes})
        )
        require(
            len(axes) == len(self.broadcast_axes),
            f"broadcast_axes {self.broadcast_axes} repeats an axis",
        )
        return Broadcast(self.shape, axes)

    def infer(self, x: TensorType) -> TensorType:
        kept = tuple(d for i, d in enumerate(self.shape) if i not in self.broadcast_axes)
        require(
            kept == x.shape,
            f"input shape {list(x.shape)} does not match output shape {list(self.shape)} with "
            f"broadcast axes {self.broadcast_axes} removed ({list(kept)})",
        )
        return TensorType(x.element_type, self.shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        # A real cycle: reductions import movement (their adjoints broadcast back).
        from opgraph.ops.reduction import reduce_sum

        return (reduce_sum(ct, self.broadcast_axes),)


def broadcast(x: Output, shape: Any, broadcast_axes: Any = None) -> Output:
    """Broadcast ``x`` to ``shape``; ``broadcast_axes`` are the new output axes (default: the
    leading ``len(shape) - x.rank`` axes)."""
    shape = as_dims(shape)
    if broadcast_axes is None:
        broadcast_axes = tuple(range(len(shape) - x.rank))
    return Broadcast(shape, broadcast_axes)(x)


def zeros(element_type: ElementType, shape: Sequence[Any]) -> Output:
    """Zeros (False for boolean) of ``element_type`` and ``shape``: a scalar Constant, broadcast
    to ``shape`` unless that is ``()``."""
    zero = constant(False if element_type.is_boolean else 0, element_type)
    return broadcast(zero, tuple(shape), tuple(range(len(shape)))) if shape else zero


def zeros_like(value: Output) -> Output:
    """Zeros of ``value``'s type (a broadcast scalar Constant)."""
    return zeros(value.element_type, value.shape)


# -------------------------------------------------------------------------------- reshape
@opclass
class Reshape(Op):
    """Transpose by ``input_order``, then re-view row-major as ``output_shape`` (nGraph)."""

    output_shape: ShapeAttr
    input_order: tuple[int, ...] | None = None
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "output_shape", as_dims(self.output_shape, "output_shape", minimum=None))
        if self.input_order is not None:
            set_attr(self, "input_order", as_int_tuple(self.input_order, "input_order"))

    def canonicalize(self, x: TensorType) -> Reshape:
        order = self.input_order if self.input_order is not None else tuple(range(x.rank))
        require(
            _is_permutation(order, x.rank),
            f"input_order {order} is not a permutation of 0..{x.rank - 1}",
        )
        resolved = _resolve_wildcard(self.output_shape, x.size)
        return Reshape(resolved, order)  # type: ignore[arg-type]  # ShapeAttr

    def infer(self, x: TensorType) -> TensorType:
        require(
            math.prod(self.output_shape) == x.size,
            f"output_shape {list(self.output_shape)} has {math.prod(self.output_shape)} "
            f"elements, input {x} has {x.size}",
        )
        return TensorType(x.element_type, self.output_shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x = inputs[0]
        assert self.input_order is not None
        permuted = reshape(ct, [x.shape[a] for a in self.input_order])
        return (transpose(permuted, inverse_permutation(self.input_order)),)


def _resolve_wildcard(shape: DimShape, size: Any) -> DimShape:
    wild = [i for i, d in enumerate(shape) if d == -1]
    if len(wild) > 1:
        raise OpTypeError(f"output_shape {list(shape)} has more than one -1")
    if any(type(d) is int and d < -1 for d in shape):
        raise OpTypeError(f"output_shape {list(shape)} has a negative dimension")
    if not wild:
        return shape
    known = math.prod(d for d in shape if d != -1)
    if known == 0 or (type(known) is int and not maybe_divisible(size, known)):
        raise OpTypeError(f"output_shape {list(shape)}: cannot infer -1 for {size} elements")
    resolved = list(shape)
    resolved[wild[0]] = floor_div(size, known)
    return tuple(resolved)


def reshape(x: Output, output_shape: Any, input_order: Any = None) -> Output:
    """Re-view ``x`` as ``output_shape`` (one -1 is inferred), after transposing it by
    ``input_order`` when given."""
    return Reshape(output_shape, input_order)(x)


# ------------------------------------------------------------------------------ transpose
@opclass
class Transpose(Op):
    """Permute axes: ``output.shape[i] = x.shape[perm[i]]``."""

    perm: tuple[int, ...]
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "perm", as_int_tuple(self.perm, "perm"))

    def canonicalize(self, x: TensorType) -> Transpose:
        require(
            len(self.perm) == x.rank,
            f"perm {self.perm} has {len(self.perm)} axes, input rank is {x.rank}",
        )
        return Transpose(tuple(normalize_axis(a, x.rank, "perm axis") for a in self.perm))

    def infer(self, x: TensorType) -> TensorType:
        require(
            _is_permutation(self.perm, x.rank),
            f"perm {self.perm} is not a permutation of 0..{x.rank - 1}",
        )
        return TensorType(x.element_type, tuple(x.shape[a] for a in self.perm))

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (transpose(ct, inverse_permutation(self.perm)),)


def transpose(x: Output, perm: Any = None) -> Output:
    """Permute the axes of ``x`` (default: reverse them)."""
    if perm is None:
        perm = tuple(reversed(range(x.rank)))
    return Transpose(perm)(x)


# ---------------------------------------------------------------------------------- slice
@opclass
class Slice(Op):
    """``x[lower:upper:strides]`` per axis; 0 <= lower <= upper <= dim, strides >= 1."""

    lower_bounds: ShapeAttr
    upper_bounds: ShapeAttr
    strides: tuple[int, ...] | None = None
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "lower_bounds", as_dims(self.lower_bounds, "lower_bounds", None))
        set_attr(self, "upper_bounds", as_dims(self.upper_bounds, "upper_bounds", None))
        if self.strides is not None:
            set_attr(self, "strides", as_int_tuple(self.strides, "strides"))

    def canonicalize(self, x: TensorType) -> Slice:
        strides = self.strides if self.strides is not None else (1,) * x.rank
        return Slice(self.lower_bounds, self.upper_bounds, strides)

    def infer(self, x: TensorType) -> TensorType:
        assert self.strides is not None
        for what, values in (
            ("lower_bounds", self.lower_bounds),
            ("upper_bounds", self.upper_bounds),
            ("strides", self.strides),
        ):
            require(
                len(values) == x.rank,
                f"{what} {values} has {len(values)} entries, input {x} has rank {x.rank}",
            )
        out = []
        for axis, (lo, hi, step, dim) in enumerate(
            zip(self.lower_bounds, self.upper_bounds, self.strides, x.shape, strict=True)
        ):
            require(
                maybe_le(0, lo) and maybe_le(lo, hi) and maybe_le(hi, dim),
                f"axis {axis}: bounds [{lo}, {hi}) must satisfy 0 <= lower <= upper <= {dim}",
            )
            require(step >= 1, f"axis {axis}: stride {step} must be >= 1")
            out.append(ceil_div(hi - lo, step))
        return TensorType(x.element_type, tuple(out))

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        bounds = (self.lower_bounds, self.upper_bounds, self.strides)
        return (replace_slice(zeros_like(inputs[0]), ct, *bounds),)


def slice(x: Output, lower: Any, upper: Any, strides: Any = None) -> Output:  # noqa: A001
    """``x[lower:upper:strides]`` with explicit per-axis bounds."""
    return Slice(lower, upper, strides)(x)


# --------------------------------------------------------------------------------- concat
@opclass
class Concat(Op):
    """Join one or more values of one element type and rank along ``axis``."""

    axis: int

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))

    def canonicalize(self, *xs: TensorType) -> Concat:
        require(len(xs) >= 1, "needs at least one input")
        require(xs[0].rank >= 1, f"cannot concatenate scalars ({xs[0]})")
        return Concat(normalize_axis(self.axis, xs[0].rank))

    def infer(self, *xs: TensorType) -> TensorType:
        require_same_element_type(xs)
        first = xs[0]
        total: Dim = 0
        for i, t in enumerate(xs):
            require(
                t.rank == first.rank, f"input {i} has rank {t.rank}, input 0 has rank {first.rank}"
            )
            for axis, (d, d0) in enumerate(zip(t.shape, first.shape, strict=True)):
                require(
                    axis == self.axis or d == d0,
                    f"input {i} shape {list(t.shape)} differs from input 0 shape "
                    f"{list(first.shape)} outside the concatenation axis {self.axis}",
                )
            total += t.shape[self.axis]
        shape = list(first.shape)
        shape[self.axis] = total
        return TensorType(first.element_type, tuple(shape))

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        pieces: list[Output | None] = []
        start: Dim = 0
        for x in inputs:
            lower: list[Dim] = [0] * x.rank
            upper = list(ct.shape)
            lower[self.axis], upper[self.axis] = start, start + x.shape[self.axis]
            pieces.append(slice(ct, lower, upper))
            start = start + x.shape[self.axis]
        return tuple(pieces)


def concat(xs: Sequence[Output], axis: int) -> Output:
    """Concatenate ``xs`` along ``axis`` (negative allowed)."""
    return Concat(axis)(*xs)


# --------------------------------------------------------------------------- replace_slice
@opclass
class ReplaceSlice(Op):
    """``x`` with the region ``[lower:upper:strides]`` replaced by ``update`` (whose shape is
    that of the slice)."""

    lower_bounds: ShapeAttr
    upper_bounds: ShapeAttr
    strides: tuple[int, ...] | None = None
    num_inputs = 2

    def __post_init__(self) -> None:
        set_attr(self, "lower_bounds", as_dims(self.lower_bounds, "lower_bounds", None))
        set_attr(self, "upper_bounds", as_dims(self.upper_bounds, "upper_bounds", None))
        if self.strides is not None:
            set_attr(self, "strides", as_int_tuple(self.strides, "strides"))

    def canonicalize(self, x: TensorType, update: TensorType) -> ReplaceSlice:
        strides = self.strides if self.strides is not None else (1,) * x.rank
        return ReplaceSlice(self.lower_bounds, self.upper_bounds, strides)

    def infer(self, x: TensorType, update: TensorType) -> TensorType:
        region = Slice(self.lower_bounds, self.upper_bounds, self.strides).infer(x)
        require_same_element_type((x, update))
        require(
            update.shape == region.shape,
            f"update shape {list(update.shape)} does not match the slice shape "
            f"{list(region.shape)}",
        )
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        bounds = (self.lower_bounds, self.upper_bounds, self.strides)
        return replace_slice(ct, zeros_like(inputs[1]), *bounds), slice(ct, *bounds)


def replace_slice(x: Output, update: Output, lower: Any, upper: Any, strides: Any = None) -> Output:
    """``x`` with ``x[lower:upper:strides]`` replaced by ``update``."""
    return ReplaceSlice(lower, upper, strides)(x, update)


# -------------------------------------------------------------------------------- reverse
@opclass
class Reverse(Op):
    """``x`` with the order of elements reversed along each of ``axes`` (canonical: sorted,
    non-negative; empty reverses nothing)."""

    axes: tuple[int, ...]
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "axes", as_int_tuple(self.axes, "axes"))

    def canonicalize(self, x: TensorType) -> Reverse:
        return Reverse(normalize_axes(self.axes, x.rank))

    def infer(self, x: TensorType) -> TensorType:
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (reverse(ct, self.axes),)


def reverse(x: Output, axes: Any) -> Output:
    """Reverse ``x`` along ``axes`` (an int or a sequence; negatives allowed)."""
    return Reverse(axes)(x)


# ----------------------------------------------------------------------- reverse_sequence
@opclass
class ReverseSequence(Op):
    """For each index ``b`` of ``batch_axis``, the first ``seq_lengths[b]`` elements along
    ``seq_axis`` reversed, the rest unchanged. Inputs ``(x, seq_lengths)``: ``x`` of rank >= 2,
    ``seq_lengths`` i32/i64 of shape ``[x.shape[batch_axis]]``; a length outside
    ``[0, x.shape[seq_axis]]`` is an ``ExecutionError`` at run time."""

    batch_axis: int = 0
    seq_axis: int = 1
    num_inputs = 2

    def __post_init__(self) -> None:
        set_attr(self, "batch_axis", as_int(self.batch_axis, "batch_axis"))
        set_attr(self, "seq_axis", as_int(self.seq_axis, "seq_axis"))

    def canonicalize(self, x: TensorType, seq_lengths: TensorType) -> ReverseSequence:
        require_min_rank(x, 2, "x")
        return ReverseSequence(
            normalize_axis(self.batch_axis, x.rank, "batch_axis"),
            normalize_axis(self.seq_axis, x.rank, "seq_axis"),
        )

    def infer(self, x: TensorType, seq_lengths: TensorType) -> TensorType:
        require(
            self.batch_axis != self.seq_axis, f"batch_axis and seq_axis are both {self.seq_axis}"
        )
        require_element_type(seq_lengths, (et.i32, et.i64), "seq_lengths")
        batch = x.shape[self.batch_axis]
        require(
            seq_lengths.shape == (batch,),
            f"seq_lengths must have shape [{batch}] (x's batch axis {self.batch_axis}), got "
            f"{seq_lengths}",
        )
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return self(ct, inputs[1]), None  # an involution


def reverse_sequence(
    x: Output, seq_lengths: Output, batch_axis: int = 0, seq_axis: int = 1
) -> Output:
    """Reverse the first ``seq_lengths[b]`` elements along ``seq_axis`` of each batch entry
    ``b`` (batch-major by default; ONNX's defaults are ``batch_axis=1, seq_axis=0``)."""
    return ReverseSequence(batch_axis, seq_axis)(x, seq_lengths)


# ----------------------------------------------------------------------------------- tile
@opclass
class Tile(Op):
    """``x`` repeated ``repeats[i]`` times along each axis ``i`` (numpy ``tile`` with one
    non-negative count per axis): output dimension ``dim * repeats[i]``."""

    repeats: ShapeAttr
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "repeats", as_dims(self.repeats, "repeats"))

    def infer(self, x: TensorType) -> TensorType:
        require(
            len(self.repeats) == x.rank,
            f"repeats {self.repeats} has {len(self.repeats)} entries, input {x} has rank {x.rank}",
        )
        return TensorType(
            x.element_type, tuple(d * r for d, r in zip(x.shape, self.repeats, strict=True))
        )

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        # A real cycle: reductions import movement (their adjoints broadcast back).
        from opgraph.ops.reduction import reduce_sum

        # Output index i * dim + k along an axis is (repeat i, element k), row-major.
        grouped = [n for pair in zip(self.repeats, inputs[0].shape, strict=True) for n in pair]
        return (reduce_sum(reshape(ct, grouped), tuple(range(0, len(grouped), 2))),)


def tile(x: Output, repeats: Any) -> Output:
    """Repeat ``x`` ``repeats[i]`` times along axis ``i`` (one count per axis, >= 0)."""
    return Tile(repeats)(x)


# ---------------------------------------------------------------------------------- split
@opclass
class Split(Op):
    """``x`` cut along ``axis`` into consecutive pieces (multi-output). Give either
    ``num_splits`` (equal pieces; the dimension must divide) or ``sizes`` (non-negative, summing
    to the dimension; zero-length pieces are legal). Canonical form: ``sizes``."""

    axis: int
    sizes: ShapeAttr | None = None
    num_splits: int | None = None
    num_inputs = 1
    multi_output = True

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))
        if (self.sizes is None) == (self.num_splits is None):
            raise OpTypeError("give exactly one of num_splits and sizes")
        if self.sizes is not None:
            set_attr(self, "sizes", as_dims(self.sizes, "sizes"))
            if not self.sizes:
                raise OpTypeError("sizes must name at least one piece")
        if self.num_splits is not None:
            set_attr(self, "num_splits", as_int(self.num_splits, "num_splits"))
            if self.num_splits < 1:
                raise OpTypeError(f"num_splits must be >= 1, got {self.num_splits}")

    def canonicalize(self, x: TensorType) -> Split:
        require(x.rank >= 1, f"cannot split a scalar ({x})")
        axis = normalize_axis(self.axis, x.rank)
        if self.num_splits is None:
            return Split(axis, self.sizes)
        dim = x.shape[axis]
        require(
            maybe_divisible(dim, self.num_splits),
            f"dimension {dim} of axis {axis} does not divide into {self.num_splits} equal pieces",
        )
        piece = floor_div(dim, self.num_splits)
        return Split(axis, (piece,) * self.num_splits)  # type: ignore[arg-type]  # ShapeAttr

    def infer(self, x: TensorType) -> tuple[TensorType, ...]:
        assert self.sizes is not None
        dim = x.shape[self.axis]
        total = sum(self.sizes, start=0)
        require(
            maybe_equal(total, dim),
            f"sizes {self.sizes} sum to {total}, axis {self.axis} has dimension {dim}",
        )
        pieces = []
        for size in self.sizes:
            shape = list(x.shape)
            shape[self.axis] = size
            pieces.append(TensorType(x.element_type, tuple(shape)))
        return tuple(pieces)

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        if all(ct is None for ct in cotangents):
            return (None,)
        pieces = [
            ct if ct is not None else zeros(out.element_type, out.shape)
            for ct, out in zip(cotangents, outputs, strict=True)
        ]
        return (concat(pieces, self.axis),)


def split(x: Output, axis: int, splits: Any) -> tuple[Output, ...]:
    """Cut ``x`` along ``axis``: ``splits`` is a number of equal pieces or a sequence of sizes.

    Returns:
        One Output per piece, in order.
    """
    if isinstance(splits, int) and not isinstance(splits, bool):
        return Split(axis, num_splits=splits)(x)
    return Split(axis, sizes=splits)(x)


# ---------------------------------------------------------------------------------- range
def range_(
    start: int | float,
    stop: int | float,
    step: int | float = 1,
    element_type: Any = None,
) -> Output:
    """A build-time Constant ``[start, start + step, ..)`` up to (excluding) ``stop``.

    The count is ``max(0, ceil((stop - start) / step))``, as ONNX Range. Integer types compute
    exactly with Python ints; float types compute ``start + i * step`` in f64, then round.

    Args:
        start, stop, step: Python numbers (``step`` nonzero).
        element_type: the element type; default i64 when all three are ints, else f32.

    Raises:
        OpTypeError: a zero step, a boolean type, a fractional bound for an integer type, or a
            value out of the type's range.
    """
    try:
        return _range_constant(start, stop, step, element_type)
    except OpTypeError as error:
        raise OpTypeError(f"range_: {error} (built at {user_frame()})") from None


def _range_constant(start: Any, stop: Any, step: Any, element_type: Any) -> Output:
    bounds = (start, stop, step)
    for name, v in zip(("start", "stop", "step"), bounds, strict=True):
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            raise OpTypeError(f"{name} must be a Python number, got {v!r:.60}")
    if element_type is None:
        integral = all(isinstance(v, int | np.integer) for v in bounds)
        element_type = et.i64 if integral else et.f32
    target = as_element_type(element_type)
    if target.is_boolean:
        raise OpTypeError("boolean is not a numeric element type")
    if step == 0:
        raise OpTypeError("step must be nonzero")
    if target.is_integral:
        if any(isinstance(v, float | np.floating) and not float(v).is_integer() for v in bounds):
            raise OpTypeError(f"{target.name} needs integral start, stop and step, got {bounds}")
        values = np.asarray(range(int(start), int(stop), int(step)))
    else:
        count = max(0, math.ceil((stop - start) / step))
        values = start + step * np.arange(count, dtype=np.float64)
    return constant(values, target)
