"""Data movement: broadcast, reshape, transpose, slice, concat."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import Shape, as_int, as_int_tuple, as_shape, normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import require_same_element_type

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
