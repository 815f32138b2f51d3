"""Data movement: broadcast, reshape, transpose, slice, concat, replace_slice, pad, reverse,
reverse_sequence, tile, split, depth_to_space, space_to_depth, and the build-time ``range_``.

Pad semantics: the output is the window ``[-padding_below, dim + padding_above)`` of ``x``
extended without end by the mode (constant value, edge clamp, reflection without repeating the
edge, symmetric reflection repeating it); reflections repeat when the padding exceeds the
dimension (nGraph's ``pad_reflect_1d_multi_reflect``). A negative padding crops: the window starts
inside ``x``. The pad value is a scalar input (nGraph v0, ONNX Pad-11): the builder turns a
Python scalar into a constant checked to fit the element type, and the gradient flows to it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import Constant, check_fits, constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.provenance import user_frame
from opgraph.core.shape import (
    Shape,
    as_int,
    as_int_tuple,
    as_shape,
    normalize_axes,
    normalize_axis,
)
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import (
    as_enum,
    require_element_type,
    require_min_rank,
    require_same_element_type,
)

__all__ = [
    "Broadcast",
    "broadcast",
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
    "PadMode",
    "Pad",
    "pad",
    "Reverse",
    "reverse",
    "ReverseSequence",
    "reverse_sequence",
    "Tile",
    "tile",
    "Split",
    "split",
    "BlockMode",
    "DepthToSpace",
    "depth_to_space",
    "SpaceToDepth",
    "space_to_depth",
    "range_",
]


def _is_permutation(order: Sequence[int], rank: int) -> bool:
    return sorted(order) == list(range(rank))


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(perm)
    for i, a in enumerate(perm):
        inverse[a] = i
    return tuple(inverse)


# ------------------------------------------------------------------------------ broadcast
@opclass
class Broadcast(Op):
    """Replicate ``x`` along new axes: output ``shape``; ``broadcast_axes`` are the output axes
    that are new. ``output[c] = x[c without the broadcast axes]``."""

    shape: Shape
    broadcast_axes: tuple[int, ...]
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "shape", as_shape(self.shape, "shape"))
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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None,)
        from opgraph.ops.reduction import reduce_sum

        return (reduce_sum(ct, self.broadcast_axes),)


def broadcast(x: Output, shape: Any, broadcast_axes: Any = None) -> Output:
    """Broadcast ``x`` to ``shape``; ``broadcast_axes`` are the new output axes (default: the
    leading ``len(shape) - x.rank`` axes)."""
    shape = as_shape(shape)
    if broadcast_axes is None:
        broadcast_axes = tuple(range(len(shape) - x.rank))
    return Broadcast(shape, broadcast_axes)(x)


# -------------------------------------------------------------------------------- reshape
@opclass
class Reshape(Op):
    """Transpose by ``input_order``, then re-view row-major as ``output_shape`` (nGraph)."""

    output_shape: Shape
    input_order: tuple[int, ...] | None = None
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "output_shape", as_int_tuple(self.output_shape, "output_shape"))
        if self.input_order is not None:
            set_attr(self, "input_order", as_int_tuple(self.input_order, "input_order"))

    def canonicalize(self, x: TensorType) -> Reshape:
        order = self.input_order if self.input_order is not None else tuple(range(x.rank))
        require(
            _is_permutation(order, x.rank),
            f"input_order {order} is not a permutation of 0..{x.rank - 1}",
        )
        return Reshape(_resolve_wildcard(self.output_shape, x.size), order)

    def infer(self, x: TensorType) -> TensorType:
        require(
            math.prod(self.output_shape) == x.size,
            f"output_shape {list(self.output_shape)} has {math.prod(self.output_shape)} "
            f"elements, input {x} has {x.size}",
        )
        return TensorType(x.element_type, self.output_shape)

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct, x = cotangents[0], inputs[0]
        if ct is None:
            return (None,)
        assert self.input_order is not None
        permuted = reshape(ct, [x.shape[a] for a in self.input_order])
        return (transpose(permuted, _inverse(self.input_order)),)


def _resolve_wildcard(shape: tuple[int, ...], size: int) -> Shape:
    wild = [i for i, d in enumerate(shape) if d == -1]
    if len(wild) > 1:
        raise OpTypeError(f"output_shape {list(shape)} has more than one -1")
    if any(d < -1 for d in shape):
        raise OpTypeError(f"output_shape {list(shape)} has a negative dimension")
    if not wild:
        return shape
    known = math.prod(d for d in shape if d != -1)
    if known == 0 or size % known:
        raise OpTypeError(f"output_shape {list(shape)}: cannot infer -1 for {size} elements")
    resolved = list(shape)
    resolved[wild[0]] = size // known
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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else transpose(ct, _inverse(self.perm)),)


def transpose(x: Output, perm: Any = None) -> Output:
    """Permute the axes of ``x`` (default: reverse them)."""
    if perm is None:
        perm = tuple(reversed(range(x.rank)))
    return Transpose(perm)(x)


# ---------------------------------------------------------------------------------- slice
@opclass
class Slice(Op):
    """``x[lower:upper:strides]`` per axis; 0 <= lower <= upper <= dim, strides >= 1."""

    lower_bounds: tuple[int, ...]
    upper_bounds: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "lower_bounds", as_int_tuple(self.lower_bounds, "lower_bounds"))
        set_attr(self, "upper_bounds", as_int_tuple(self.upper_bounds, "upper_bounds"))
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
                0 <= lo <= hi <= dim,
                f"axis {axis}: bounds [{lo}, {hi}) must satisfy 0 <= lower <= upper <= {dim}",
            )
            require(step >= 1, f"axis {axis}: stride {step} must be >= 1")
            out.append(-(-(hi - lo) // step))
        return TensorType(x.element_type, tuple(out))

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None,)
        from opgraph.autodiff.grad import zeros_like

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
        total = 0
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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None,) * len(inputs)
        pieces: list[Output | None] = []
        start = 0
        for x in inputs:
            lower = [0] * x.rank
            upper = list(ct.shape)
            lower[self.axis], upper[self.axis] = start, start + x.shape[self.axis]
            pieces.append(slice(ct, lower, upper))
            start += x.shape[self.axis]
        return tuple(pieces)


def concat(xs: Sequence[Output], axis: int) -> Output:
    """Concatenate ``xs`` along ``axis`` (negative allowed)."""
    return Concat(axis)(*xs)


# --------------------------------------------------------------------------- replace_slice
@opclass
class ReplaceSlice(Op):
    """``x`` with the region ``[lower:upper:strides]`` replaced by ``update`` (whose shape is
    that of the slice)."""

    lower_bounds: tuple[int, ...]
    upper_bounds: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    num_inputs = 2

    def __post_init__(self) -> None:
        set_attr(self, "lower_bounds", as_int_tuple(self.lower_bounds, "lower_bounds"))
        set_attr(self, "upper_bounds", as_int_tuple(self.upper_bounds, "upper_bounds"))
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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None, None)
        from opgraph.autodiff.grad import zeros_like

        bounds = (self.lower_bounds, self.upper_bounds, self.strides)
        return replace_slice(ct, zeros_like(inputs[1]), *bounds), slice(ct, *bounds)


def replace_slice(x: Output, update: Output, lower: Any, upper: Any, strides: Any = None) -> Output:
    """``x`` with ``x[lower:upper:strides]`` replaced by ``update``."""
    return ReplaceSlice(lower, upper, strides)(x, update)


# ------------------------------------------------------------------------ attribute helpers
def _check_fits(array: np.ndarray, element_type: ElementType) -> None:
    """``check_fits``, also for bf16: its ``np.finfo`` rejects bf16, which shares f32's kind
    checks, so f32 stands in and the range limit is bf16's own."""
    if element_type is not et.bf16:
        check_fits(array, element_type)
        return
    check_fits(array, et.f32)
    finite = np.abs(array[np.isfinite(array)].astype(np.float64))
    limit = float(ml_dtypes.finfo(et.bf16.dtype).max)
    if finite.size and float(finite.max()) > limit:
        raise OpTypeError(f"value {float(finite.max()):g} is out of range for bf16 ({limit:g})")


def _fit_scalar(value: Any, element_type: ElementType, what: str) -> bool | int | float:
    """A Python scalar that fits ``element_type`` exactly as ``constant`` checks it (floats may
    round, not overflow); for boolean, the ints 0 and 1 stand for False and True."""
    if element_type.is_boolean and type(value) is int and value in (0, 1):
        value = bool(value)
    if isinstance(value, Output) or np.ndim(value) != 0:
        raise OpTypeError(f"{what} must be a Python scalar, got {value!r:.60}")
    array = np.asarray(value)
    try:
        _check_fits(array, element_type)
    except OpTypeError as error:
        detail = str(error).removeprefix("constant: ")
        raise OpTypeError(f"{what} {value!r} does not fit {element_type.name}: {detail}") from None
    if element_type.is_boolean:
        return bool(array)
    return int(array) if element_type.is_integral else float(array)


def _scalar_constant(value: bool | int | float, element_type: ElementType) -> Output:
    """A scalar Constant of a value already checked to fit (``constant`` cannot build bf16
    values yet: its range check rejects the type)."""
    return _array_constant(np.asarray(value), element_type)


def _array_constant(values: np.ndarray, element_type: ElementType) -> Output:
    _check_fits(values, element_type)
    return Constant(element_type, values.shape, values.astype(element_type.dtype))()


def _zeros(element_type: ElementType, shape: Sequence[int]) -> Output:
    zero = _scalar_constant(False if element_type.is_boolean else 0, element_type)
    return broadcast(zero, tuple(shape), tuple(range(len(shape)))) if shape else zero


# ------------------------------------------------------------------------------------ pad
class PadMode(enum.Enum):
    """How :class:`Pad` extends ``x`` beyond its edges (``"constant"``, ``"edge"``,
    ``"reflect"``, ``"symmetric"``)."""

    CONSTANT = "constant"  # the pad value
    EDGE = "edge"  # the nearest edge element: [1 2 3] -> 1 1 | 1 2 3 | 3 3
    REFLECT = "reflect"  # mirrored, edge not repeated: [1 2 3] -> 3 2 | 1 2 3 | 2 1
    SYMMETRIC = "symmetric"  # mirrored, edge repeated: [1 2 3] -> 2 1 | 1 2 3 | 3 2


#: The smallest dimension each mode can extend (reflection needs two elements).
_MIN_EXTENDED_DIM = {PadMode.CONSTANT: 0, PadMode.EDGE: 1, PadMode.REFLECT: 2, PadMode.SYMMETRIC: 1}


def _extended_index(i: int, dim: int, mode: PadMode) -> int:
    """The coordinate of ``x`` that the extension by ``mode`` (not constant) shows at ``i``."""
    if mode is PadMode.EDGE:
        return min(max(i, 0), dim - 1)
    period = 2 * dim - 2 if mode is PadMode.REFLECT else 2 * dim
    m = i % period
    if m < dim:
        return m
    return period - m if mode is PadMode.REFLECT else period - 1 - m


@opclass
class Pad(Op):
    """``x`` padded (or cropped, where negative) by ``padding_below`` / ``padding_above`` per
    axis; inputs ``(x, value)`` with ``value`` a scalar of ``x``'s element type, used by the
    constant mode. Output dimension ``below + dim + above`` (must be >= 0). Positions outside
    ``x`` follow ``mode`` (see the module docstring); repeated reflection is allowed.

    Attributes:
        padding_below: per axis, elements added before (negative: removed from the start).
        padding_above: per axis, elements added after (negative: removed from the end).
        mode: a :class:`PadMode` or its lower-case name. Extending an axis needs a dimension
            of at least 1 (edge, symmetric) or 2 (reflect).
    """

    padding_below: tuple[int, ...]
    padding_above: tuple[int, ...]
    mode: PadMode = PadMode.CONSTANT
    num_inputs = 2

    def __post_init__(self) -> None:
        set_attr(self, "padding_below", as_int_tuple(self.padding_below, "padding_below"))
        set_attr(self, "padding_above", as_int_tuple(self.padding_above, "padding_above"))
        set_attr(self, "mode", as_enum(PadMode, self.mode, "mode"))

    def infer(self, x: TensorType, value: TensorType) -> TensorType:
        require_same_element_type((x, value), "x and the pad value")
        require(value.rank == 0, f"the pad value must be a scalar, got {value}")
        for what, pads in (
            ("padding_below", self.padding_below),
            ("padding_above", self.padding_above),
        ):
            require(
                len(pads) == x.rank,
                f"{what} {pads} has {len(pads)} entries, input {x} has rank {x.rank}",
            )
        least = _MIN_EXTENDED_DIM[self.mode]
        shape = []
        for axis, (lo, dim, hi) in enumerate(
            zip(self.padding_below, x.shape, self.padding_above, strict=True)
        ):
            require(
                lo + dim + hi >= 0,
                f"axis {axis}: padding ({lo}, {hi}) crops more than the dimension {dim}",
            )
            require(
                max(lo, hi) <= 0 or dim >= least,
                f"axis {axis}: {self.mode.name.lower()} padding needs a dimension of at least "
                f"{least}, got {dim}",
            )
            shape.append(lo + dim + hi)
        return TensorType(x.element_type, tuple(shape))

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None, None)
        if self.mode is not PadMode.CONSTANT:
            return _extension_adjoint(self, inputs[0], ct), None
        from opgraph.ops.elementwise import subtract
        from opgraph.ops.reduction import reduce_sum

        # The inverse window: crop what was padded, pad with zeros what was cropped.
        dx = pad(ct, [-b for b in self.padding_below], [-a for a in self.padding_above])
        every = tuple(range(ct.rank))
        return dx, subtract(reduce_sum(ct, every), reduce_sum(dx, every))


def _extension_adjoint(op: Pad, x: Output, ct: Output) -> Output:
    """Axis by axis (the extension is separable): sum the cotangent of every output position
    into the element of ``x`` it shows (a scatter-add); pure crops pad with zeros."""
    for axis, (lo, dim, hi) in enumerate(
        zip(op.padding_below, x.shape, op.padding_above, strict=True)
    ):
        if lo > 0 or hi > 0:
            sources = [_extended_index(j - lo, dim, op.mode) for j in range(lo + dim + hi)]
            ct = _scatter_add_along(ct, axis, sources, dim)
        elif lo < 0 or hi < 0:
            below, above = [0] * ct.rank, [0] * ct.rank
            below[axis], above[axis] = -lo, -hi
            ct = pad(ct, below, above)
    return ct


def _scatter_add_along(ct: Output, axis: int, sources: list[int], dim: int) -> Output:
    """``result[.., s, ..] = Σ ct[.., j, ..]`` over the ``j`` with ``sources[j] == s``."""
    from opgraph.ops.indexing import scatter_nd

    perm = (axis, *(a for a in range(ct.rank) if a != axis))
    moved = transpose(ct, perm)
    index = constant(np.asarray(sources, np.int64).reshape(-1, 1), et.i64)
    zeros = _zeros(ct.element_type, (dim, *moved.shape[1:]))
    return transpose(scatter_nd(zeros, index, moved, reduction="add"), _inverse(perm))


def pad(
    x: Output,
    padding_below: Any,
    padding_above: Any,
    mode: Any = "constant",
    value: Output | bool | int | float = 0,
) -> Output:
    """Pad (or crop, with negative amounts) ``x`` on both sides of every axis.

    Args:
        x: the value to pad.
        padding_below: per axis, the count before the first element (negative crops).
        padding_above: per axis, the count after the last element (negative crops).
        mode: ``"constant"``, ``"edge"``, ``"reflect"`` or ``"symmetric"`` (or a PadMode).
        value: the constant mode's fill: a Python scalar that must fit ``x``'s element type
            (0 and 1 stand for False and True for boolean ``x``), or a scalar value of that type.

    Returns:
        ``x`` padded; dimension ``below + dim + above`` per axis.

    Raises:
        OpTypeError: wrong padding lengths, a crop larger than the dimension, a mode that
            cannot extend an axis this short, or a value that does not fit.

    Example:
        >>> pad(x, [1], [2], mode="reflect")  # x = [1, 2, 3] -> [2, 1, 2, 3, 2, 1]
    """
    if not isinstance(value, Output):
        try:
            scalar = _fit_scalar(value, x.element_type, "pad value")
        except OpTypeError as error:
            raise OpTypeError(f"Pad: {error} (built at {user_frame()})") from None
        value = _scalar_constant(scalar, x.element_type)
    return Pad(padding_below, padding_above, mode)(x, value)


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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else reverse(ct, self.axes),)


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

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None, None)
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

    repeats: tuple[int, ...]
    num_inputs = 1

    def __post_init__(self) -> None:
        set_attr(self, "repeats", as_shape(self.repeats, "repeats"))

    def infer(self, x: TensorType) -> TensorType:
        require(
            len(self.repeats) == x.rank,
            f"repeats {self.repeats} has {len(self.repeats)} entries, input {x} has rank {x.rank}",
        )
        return TensorType(
            x.element_type, tuple(d * r for d, r in zip(x.shape, self.repeats, strict=True))
        )

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None,)
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
    sizes: tuple[int, ...] | None = None
    num_splits: int | None = None
    num_inputs = 1
    multi_output = True

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))
        if (self.sizes is None) == (self.num_splits is None):
            raise OpTypeError("give exactly one of num_splits and sizes")
        if self.sizes is not None:
            set_attr(self, "sizes", as_shape(self.sizes, "sizes"))
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
            dim % self.num_splits == 0,
            f"dimension {dim} of axis {axis} does not divide into {self.num_splits} equal pieces",
        )
        return Split(axis, (dim // self.num_splits,) * self.num_splits)

    def infer(self, x: TensorType) -> tuple[TensorType, ...]:
        assert self.sizes is not None
        dim = x.shape[self.axis]
        require(
            sum(self.sizes) == dim,
            f"sizes {self.sizes} sum to {sum(self.sizes)}, axis {self.axis} has dimension {dim}",
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
            ct if ct is not None else _zeros(out.element_type, out.shape)
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


# ------------------------------------------------------------ depth_to_space / space_to_depth
class BlockMode(enum.Enum):
    """How :class:`DepthToSpace` / :class:`SpaceToDepth` order the channel index: blocks first
    (ONNX DCR, channel ``block * C' + c``) or depth first (ONNX CRD, ``c * bs**k + block``)."""

    BLOCKS_FIRST = "blocks_first"
    DEPTH_FIRST = "depth_first"


class _BlockRearrangement(Op):
    """Shared by DepthToSpace and SpaceToDepth: ``x`` is ``(N, C, D1..Dk)``, k >= 1."""

    __slots__ = ()
    num_inputs = 1
    block_size: int
    mode: BlockMode

    def __post_init__(self) -> None:
        set_attr(self, "block_size", as_int(self.block_size, "block_size"))
        set_attr(self, "mode", as_enum(BlockMode, self.mode, "mode"))
        if self.block_size < 1:
            raise OpTypeError(f"block_size must be >= 1, got {self.block_size}")

    def layout(self, x: Shape) -> tuple[Shape, tuple[int, ...], Shape]:
        """``(split shape, permutation, output shape)``: the op is reshape, transpose, reshape."""
        raise NotImplementedError


@opclass
class DepthToSpace(_BlockRearrangement):
    """Move channel blocks into space: ``(N, C, D1..Dk)`` to ``(N, C / bs**k, D1*bs..Dk*bs)``
    (ONNX DepthToSpace for k = 2; N-d as nGraph). Inverse of :class:`SpaceToDepth` with the
    same mode."""

    block_size: int
    mode: BlockMode = BlockMode.BLOCKS_FIRST

    def infer(self, x: TensorType) -> TensorType:
        require_min_rank(x, 3, "x")
        blocks = self.block_size ** (x.rank - 2)
        require(
            x.shape[1] % blocks == 0,
            f"channels {x.shape[1]} are not divisible by block_size**{x.rank - 2} = {blocks}",
        )
        return TensorType(x.element_type, self.layout(x.shape)[2])

    def layout(self, x: Shape) -> tuple[Shape, tuple[int, ...], Shape]:
        k, bs = len(x) - 2, self.block_size
        depth, spatial = x[1] // bs**k, x[2:]
        if self.mode is BlockMode.BLOCKS_FIRST:
            split_shape = (x[0], *(bs,) * k, depth, *spatial)
            perm = (0, k + 1, *(a for i in range(k) for a in (k + 2 + i, 1 + i)))
        else:
            split_shape = (x[0], depth, *(bs,) * k, *spatial)
            perm = (0, 1, *(a for i in range(k) for a in (k + 2 + i, 2 + i)))
        return split_shape, perm, (x[0], depth, *(d * bs for d in spatial))

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else space_to_depth(ct, self.block_size, self.mode),)


def depth_to_space(x: Output, block_size: int, mode: Any = "blocks_first") -> Output:
    """Rearrange ``(N, C, D1..Dk)`` into ``(N, C / bs**k, D1*bs, .., Dk*bs)``; ``mode`` is
    ``"blocks_first"`` (ONNX DCR, the default) or ``"depth_first"`` (ONNX CRD)."""
    return DepthToSpace(block_size, mode)(x)


@opclass
class SpaceToDepth(_BlockRearrangement):
    """Move spatial blocks into channels: ``(N, C, D1..Dk)`` to
    ``(N, C * bs**k, D1/bs..Dk/bs)``; every ``Di`` must divide by ``block_size``. Blocks-first
    is ONNX SpaceToDepth. Inverse of :class:`DepthToSpace` with the same mode."""

    block_size: int
    mode: BlockMode = BlockMode.BLOCKS_FIRST

    def infer(self, x: TensorType) -> TensorType:
        require_min_rank(x, 3, "x")
        for axis in range(2, x.rank):
            require(
                x.shape[axis] % self.block_size == 0,
                f"dimension {x.shape[axis]} of axis {axis} is not divisible by block_size "
                f"{self.block_size}",
            )
        return TensorType(x.element_type, self.layout(x.shape)[2])

    def layout(self, x: Shape) -> tuple[Shape, tuple[int, ...], Shape]:
        k, bs = len(x) - 2, self.block_size
        reduced = tuple(d // bs for d in x[2:])
        split_shape = (x[0], x[1], *(n for d in reduced for n in (d, bs)))
        spatial = tuple(2 + 2 * i for i in range(k))
        blocks = tuple(3 + 2 * i for i in range(k))
        if self.mode is BlockMode.BLOCKS_FIRST:
            perm = (0, *blocks, 1, *spatial)
        else:
            perm = (0, 1, *blocks, *spatial)
        return split_shape, perm, (x[0], x[1] * bs**k, *reduced)

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        return (None if ct is None else depth_to_space(ct, self.block_size, self.mode),)


def space_to_depth(x: Output, block_size: int, mode: Any = "blocks_first") -> Output:
    """Rearrange ``(N, C, D1..Dk)`` into ``(N, C * bs**k, D1/bs, .., Dk/bs)``; ``mode`` as for
    :func:`depth_to_space`, whose inverse this is."""
    return SpaceToDepth(block_size, mode)(x)


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
    return _array_constant(values, target)
