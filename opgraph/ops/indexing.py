"""Indexing: gather, gather_nd, gather_elements, scatter_elements, scatter_nd, one_hot.

Index inputs are i32 or i64. A negative index ``i`` along an axis of size ``n`` means
``i + n`` (ONNX); an index outside ``[-n, n)`` is an ``ExecutionError`` at run time that names
the index and the node (never a numpy traceback). ``one_hot`` is the exception: an index outside
``[-depth, depth)`` writes only ``off_value`` for its position (nGraph ``one_hot_scalar_oob_in_3``).

Scatter reductions combine the updates with the data, in the order of the updates (row-major):
``none`` replaces, and with duplicate indices the last write wins (ONNX leaves it undefined; we
define it so results do not depend on the backend); ``add``, ``mul``, ``max`` and ``min``
accumulate into the data's value. Integer arithmetic wraps.

Adjoints: gathers scatter-add the cotangent back into zeros. For the scatters, reduction ``none``
gives ``x`` the cotangent with the written positions zeroed and each update the cotangent at its
target only if its write won; ``add`` passes the cotangent to both; ``mul`` gives each factor the
product of the others (no division by zero); ``max``/``min`` split the cotangent equally among the
values that reach the result (as ``reduce_max`` does).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import as_int, maybe_le, normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.common import (
    as_enum,
    fit_scalar,
    inverse_permutation,
    require_element_type,
    require_min_rank,
    require_same_element_type,
)
from opgraph.ops.conversion import convert
from opgraph.ops.elementwise import divide, equal, multiply, select
from opgraph.ops.movement import broadcast, concat, reshape, transpose, zeros

__all__ = [
    "Gather",
    "gather",
    "GatherND",
    "gather_nd",
    "GatherElements",
    "gather_elements",
    "ScatterReduction",
    "Scatter",
    "ScatterElements",
    "scatter_elements",
    "ScatterND",
    "scatter_nd",
    "OneHot",
    "one_hot",
]

#: The element types index inputs may have.
INDEX_TYPES = (et.i32, et.i64)


def _require_indices(indices: TensorType, what: str = "indices") -> None:
    require_element_type(indices, INDEX_TYPES, what)


def _require_same_leading(x: TensorType, indices: TensorType, count: int) -> None:
    require(
        x.shape[:count] == indices.shape[:count],
        f"the {count} batch dimension(s) differ: x {x} vs indices {indices}",
    )


def _batch_coordinates(indices: Output, batch_dims: int) -> Output:
    """``indices`` (shape ``B + J + (k,)``) with the batch coordinates of each entry prepended
    along the last axis: shape ``B + J + (batch_dims + k,)``. Shapes are static, so the
    coordinates are a constant."""
    if batch_dims == 0:
        return indices
    shape = indices.static_shape("the batch coordinates of a gather/scatter with batch_dims")
    batch, inner = shape[:batch_dims], shape[batch_dims:-1]
    grid = np.moveaxis(np.indices(batch), 0, -1).reshape(*batch, *(1,) * len(inner), batch_dims)
    coords = np.broadcast_to(grid, (*batch, *inner, batch_dims))
    return concat([constant(coords, indices.element_type), indices], -1)


def _as_coordinates(indices: Output) -> Output:
    """``indices`` with a trailing axis of length 1 (one coordinate per entry)."""
    return reshape(indices, (*indices.shape, 1))


def _full(value: int, element_type: ElementType, shape: tuple[int, ...]) -> Output:
    scalar = constant(value, element_type)
    return broadcast(scalar, shape, tuple(range(len(shape)))) if shape else scalar


# ---------------------------------------------------------------------------------- gather
@opclass
class Gather(Op):
    """Take slices of ``x`` along ``axis`` at ``indices`` (ONNX Gather; OpenVINO's
    ``batch_dims``): inputs ``(x, indices)``; the first ``batch_dims`` axes of ``x`` and
    ``indices`` are paired (equal dimensions, ``batch_dims <= axis``); output shape
    ``x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis + 1:]``. Negative indices
    wrap; an out-of-range index is an ``ExecutionError`` at run time."""

    axis: int = 0
    batch_dims: int = 0
    num_inputs = 2

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))
        set_attr(self, "batch_dims", as_int(self.batch_dims, "batch_dims"))

    def canonicalize(self, x: TensorType, indices: TensorType) -> Gather:
        require_min_rank(x, 1, "x")
        batch_dims = self.batch_dims + indices.rank if self.batch_dims < 0 else self.batch_dims
        require(
            0 <= batch_dims <= indices.rank,
            f"batch_dims {self.batch_dims} is out of range for indices of rank {indices.rank}",
        )
        return Gather(normalize_axis(self.axis, x.rank), batch_dims)

    def infer(self, x: TensorType, indices: TensorType) -> TensorType:
        _require_indices(indices)
        b, axis = self.batch_dims, self.axis
        require(b <= axis, f"batch_dims {b} must not exceed axis {axis}")
        _require_same_leading(x, indices, b)
        shape = x.shape[:axis] + indices.shape[b:] + x.shape[axis + 1 :]
        return TensorType(x.element_type, shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, indices = inputs
        b, axis = self.batch_dims, self.axis
        # ct is B + M + J + T; scatter_nd wants B + J + M + T into x moved to B + (n,) + M + T.
        m, j = axis - b, indices.rank - b
        ct_perm = (
            *range(b),
            *range(b + m, b + m + j),
            *range(b, b + m),
            *range(b + m + j, ct.rank),
        )
        x_perm = (*range(b), axis, *range(b, axis), *range(axis + 1, x.rank))
        moved = zeros(x.element_type, [x.shape[a] for a in x_perm])
        full = _batch_coordinates(_as_coordinates(indices), b)
        summed = scatter_nd(moved, full, transpose(ct, ct_perm), reduction="add")
        return transpose(summed, inverse_permutation(x_perm)), None


def gather(x: Output, indices: Output, axis: int = 0, batch_dims: int = 0) -> Output:
    """Slices of ``x`` along ``axis`` at ``indices`` (i32/i64; negative wraps).

    Args:
        x: the data.
        indices: integer indices into ``x.shape[axis]``.
        axis: the gathered axis (negative allowed).
        batch_dims: leading axes shared by ``x`` and ``indices`` (negative counts from the end
            of ``indices``).

    Returns:
        ``x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis + 1:]``.
    """
    return Gather(axis, batch_dims)(x, indices)


# ------------------------------------------------------------------------------- gather_nd
@opclass
class GatherND(Op):
    """Take elements or slices of ``x`` at coordinate tuples (ONNX GatherND): inputs
    ``(x, indices)``; ``indices.shape[-1] = k`` with ``1 <= k <= x.rank - batch_dims``; output
    ``indices.shape[:-1] + x.shape[batch_dims + k:]``. The first ``batch_dims`` axes are
    paired. Negative coordinates wrap."""

    batch_dims: int = 0
    num_inputs = 2

    def __post_init__(self) -> None:
        set_attr(self, "batch_dims", as_int(self.batch_dims, "batch_dims"))

    def infer(self, x: TensorType, indices: TensorType) -> TensorType:
        _require_indices(indices)
        require_min_rank(indices, 1, "indices")
        b = self.batch_dims
        require(
            0 <= b < min(x.rank, indices.rank),
            f"batch_dims {b} must be >= 0 and below both ranks ({x.rank}, {indices.rank})",
        )
        k = indices.shape[-1]
        require(
            1 <= k <= x.rank - b,
            f"indices.shape[-1] = {k} must be in [1, {x.rank - b}] (x rank minus batch_dims)",
        )
        _require_same_leading(x, indices, b)
        return TensorType(x.element_type, indices.shape[:-1] + x.shape[b + k :])

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, indices = inputs
        full = _batch_coordinates(indices, self.batch_dims)
        return scatter_nd(zeros(x.element_type, x.shape), full, ct, reduction="add"), None


def gather_nd(x: Output, indices: Output, batch_dims: int = 0) -> Output:
    """Elements or slices of ``x`` at the coordinate tuples in the last axis of ``indices``."""
    return GatherND(batch_dims)(x, indices)


# ------------------------------------------------------------------------- gather_elements
@opclass
class GatherElements(Op):
    """``out[i] = x[i with i[axis] replaced by indices[i]]`` (ONNX GatherElements, torch
    ``gather``): inputs ``(x, indices)`` of one rank, ``indices.shape[d] <= x.shape[d]`` for
    ``d != axis``; output shape ``indices.shape``. Negative indices wrap."""

    axis: int = 0
    num_inputs = 2

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))

    def canonicalize(self, x: TensorType, indices: TensorType) -> GatherElements:
        require_min_rank(x, 1, "x")
        return GatherElements(normalize_axis(self.axis, x.rank))

    def infer(self, x: TensorType, indices: TensorType) -> TensorType:
        _require_indices(indices)
        _require_element_layout(x, indices, self.axis)
        return TensorType(x.element_type, indices.shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, indices = inputs
        initial = zeros(x.element_type, x.shape)
        return scatter_elements(initial, indices, ct, self.axis, reduction="add"), None


def _require_element_layout(x: TensorType, indices: TensorType, axis: int) -> None:
    require(indices.rank == x.rank, f"indices rank {indices.rank} differs from x rank {x.rank}")
    for d, (n, m) in enumerate(zip(indices.shape, x.shape, strict=True)):
        require(  # symbolic sizes: unless certainly larger, checked again at each binding
            d == axis or maybe_le(n, m),
            f"indices dimension {n} exceeds x dimension {m} on axis {d} (not the indexed axis)",
        )


def gather_elements(x: Output, indices: Output, axis: int = 0) -> Output:
    """``x`` read at ``indices`` along ``axis``, elementwise; the result has ``indices``'s
    shape."""
    return GatherElements(axis)(x, indices)


# --------------------------------------------------------------------------------- scatter
class ScatterReduction(enum.Enum):
    """How a scatter combines an update with the value already there."""

    NONE = "none"  # replace (duplicates: the last write wins)
    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"


class Scatter(Op):
    """Family base of the scatters: inputs ``(x, indices, updates)``, output ``x``'s type.

    Subclasses say how an update addresses ``x`` (:meth:`scatter`, :meth:`gather` per
    update, :meth:`write_ids`); the adjoints are written once here.
    """

    __slots__ = ()
    num_inputs = 3
    reduction: ScatterReduction

    def check(self, x: TensorType, indices: TensorType, updates: TensorType) -> None:
        _require_indices(indices)
        require_same_element_type((x, updates), "x and updates")
        if self.reduction is not ScatterReduction.NONE:
            require_element_type(x, et.NUMERIC, f"x (reduction {self.reduction.value})")

    def scatter(
        self, x: Output, indices: Output, updates: Output, reduction: ScatterReduction
    ) -> Output:
        """This scatter with another reduction."""
        raise NotImplementedError

    def gather(self, value: Output, indices: Output) -> Output:
        """The element of ``value`` (shaped like ``x``) each update writes to: updates' shape."""
        raise NotImplementedError

    def write_ids(self, indices: Output, updates: Output) -> np.ndarray:
        """For each update element, the rank of its write in write order (updates' shape)."""
        raise NotImplementedError

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, indices, updates = inputs
        dx, dupdates = _SCATTER_ADJOINTS[self.reduction](self, x, indices, updates, output, ct)
        return dx, None, dupdates


_Adjoint = Callable[[Scatter, Output, Output, Output, Output, Output], tuple[Output, Output]]


def _replace_adjoint(
    op: Scatter, x: Output, indices: Output, updates: Output, out: Output, ct: Output
) -> tuple[Output, Output]:
    none, latest = ScatterReduction.NONE, ScatterReduction.MAX
    dx = op.scatter(ct, indices, zeros(updates.element_type, updates.shape), none)
    ids = constant(op.write_ids(indices, updates), et.i64)
    shape = x.static_shape("the gradient of a max/min scatter (its winner ids)")
    winner = op.scatter(_full(-1, et.i64, shape), indices, ids, latest)
    won = equal(op.gather(winner, indices), ids)
    return dx, select(won, op.gather(ct, indices), zeros(ct.element_type, updates.shape))


def _add_adjoint(
    op: Scatter, x: Output, indices: Output, updates: Output, out: Output, ct: Output
) -> tuple[Output, Output]:
    return ct, op.gather(ct, indices)


def _product_adjoint(
    op: Scatter, x: Output, indices: Output, updates: Output, out: Output, ct: Output
) -> tuple[Output, Output]:
    """Each factor gets the product of the other factors of its group (x and the updates
    written to one position), without dividing by zero."""

    def parts(v: Output) -> tuple[Output, Output, Output]:
        is_zero = equal(v, scalar_like(0, v))
        return is_zero, select(is_zero, scalar_like(1, v), v), convert(is_zero, v.element_type)

    x_zero, x_nonzero, x_count = parts(x)
    u_zero, u_nonzero, u_count = parts(updates)
    product = op.scatter(x_nonzero, indices, u_nonzero, ScatterReduction.MUL)
    zeros = op.scatter(x_count, indices, u_count, ScatterReduction.ADD)

    def others(is_zero: Output, nonzero: Output, product: Output, zeros: Output) -> Output:
        zero = scalar_like(0, nonzero)
        one_zero = select(is_zero, product, zero)
        several = select(equal(zeros, scalar_like(1, zeros)), one_zero, zero)
        return select(equal(zeros, zero), divide(product, nonzero), several)

    dx = multiply(ct, others(x_zero, x_nonzero, product, zeros))
    gathered = others(u_zero, u_nonzero, op.gather(product, indices), op.gather(zeros, indices))
    return dx, multiply(op.gather(ct, indices), gathered)


def _extremum_adjoint(
    op: Scatter, x: Output, indices: Output, updates: Output, out: Output, ct: Output
) -> tuple[Output, Output]:
    """Ties split the cotangent equally among the values equal to the result."""
    x_hits = convert(equal(x, out), x.element_type)
    u_hits = convert(equal(updates, op.gather(out, indices)), x.element_type)
    share = divide(ct, op.scatter(x_hits, indices, u_hits, ScatterReduction.ADD))
    return multiply(share, x_hits), multiply(op.gather(share, indices), u_hits)


_SCATTER_ADJOINTS: dict[ScatterReduction, _Adjoint] = {
    ScatterReduction.NONE: _replace_adjoint,
    ScatterReduction.ADD: _add_adjoint,
    ScatterReduction.MUL: _product_adjoint,
    ScatterReduction.MAX: _extremum_adjoint,
    ScatterReduction.MIN: _extremum_adjoint,
}


# ------------------------------------------------------------------------ scatter_elements
@opclass
class ScatterElements(Scatter):
    """``x`` with ``out[i with i[axis] = indices[i]] (op)= updates[i]`` for every position ``i``
    of ``indices`` (ONNX ScatterElements): ``indices`` and ``updates`` share a shape, of ``x``'s
    rank, not larger than ``x`` off ``axis``. Reductions: see the module docstring."""

    axis: int = 0
    reduction: ScatterReduction = ScatterReduction.NONE

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))
        set_attr(self, "reduction", as_enum(ScatterReduction, self.reduction, "reduction"))

    def canonicalize(
        self, x: TensorType, indices: TensorType, updates: TensorType
    ) -> ScatterElements:
        require_min_rank(x, 1, "x")
        return ScatterElements(normalize_axis(self.axis, x.rank), self.reduction)

    def infer(self, x: TensorType, indices: TensorType, updates: TensorType) -> TensorType:
        self.check(x, indices, updates)
        _require_element_layout(x, indices, self.axis)
        require(
            updates.shape == indices.shape,
            f"updates shape {list(updates.shape)} differs from indices shape {list(indices.shape)}",
        )
        return x

    def scatter(
        self, x: Output, indices: Output, updates: Output, reduction: ScatterReduction
    ) -> Output:
        return scatter_elements(x, indices, updates, self.axis, reduction)

    def gather(self, value: Output, indices: Output) -> Output:
        return gather_elements(value, indices, self.axis)

    def write_ids(self, indices: Output, updates: Output) -> np.ndarray:
        return np.arange(updates.tensor_type.size, dtype=np.int64).reshape(updates.shape)


def scatter_elements(
    x: Output, indices: Output, updates: Output, axis: int = 0, reduction: Any = "none"
) -> Output:
    """``x`` with ``updates`` written at ``indices`` along ``axis``, elementwise.

    Args:
        x: the data.
        indices: i32/i64, same shape as ``updates``; negative wraps.
        updates: values of ``x``'s element type.
        axis: the indexed axis.
        reduction: ``"none"`` (duplicates: last write wins), ``"add"``, ``"mul"``, ``"max"``
            or ``"min"`` (or a ScatterReduction).
    """
    return ScatterElements(axis, reduction)(x, indices, updates)


# ------------------------------------------------------------------------------ scatter_nd
@opclass
class ScatterND(Scatter):
    """``x`` with ``out[indices[j]] (op)= updates[j]`` for every coordinate tuple ``j`` (ONNX
    ScatterND): ``indices.shape[-1] = k`` in ``[1, x.rank]``, ``updates`` shaped
    ``indices.shape[:-1] + x.shape[k:]`` (a tuple writes a slice). Reductions: see the module
    docstring."""

    reduction: ScatterReduction = ScatterReduction.NONE

    def __post_init__(self) -> None:
        set_attr(self, "reduction", as_enum(ScatterReduction, self.reduction, "reduction"))

    def infer(self, x: TensorType, indices: TensorType, updates: TensorType) -> TensorType:
        self.check(x, indices, updates)
        require_min_rank(indices, 1, "indices")
        k = indices.shape[-1]
        require(1 <= k <= x.rank, f"indices.shape[-1] = {k} must be in [1, {x.rank}] (x rank)")
        expected = indices.shape[:-1] + x.shape[k:]
        require(
            updates.shape == expected,
            f"updates shape {list(updates.shape)} must be indices.shape[:-1] + x.shape[{k}:] = "
            f"{list(expected)}",
        )
        return x

    def scatter(
        self, x: Output, indices: Output, updates: Output, reduction: ScatterReduction
    ) -> Output:
        return scatter_nd(x, indices, updates, reduction)

    def gather(self, value: Output, indices: Output) -> Output:
        return gather_nd(value, indices)

    def write_ids(self, indices: Output, updates: Output) -> np.ndarray:
        tuples = indices.static_shape("the write ids of a scatter")[:-1]
        ids = np.arange(int(np.prod(tuples)), dtype=np.int64).reshape(tuples)
        ids = ids.reshape(ids.shape + (1,) * (updates.rank - len(tuples)))
        return np.broadcast_to(ids, updates.static_shape("the write ids of a scatter"))


def scatter_nd(x: Output, indices: Output, updates: Output, reduction: Any = "none") -> Output:
    """``x`` with ``updates`` written at the coordinate tuples in the last axis of ``indices``.

    ``reduction`` is as for :func:`scatter_elements`.
    """
    return ScatterND(reduction)(x, indices, updates)


# --------------------------------------------------------------------------------- one_hot
@opclass
class OneHot(Op):
    """A new axis of length ``depth`` at ``axis`` holding ``on_value`` at each index and
    ``off_value`` elsewhere: ``out[.., j, ..] = on if indices[..] == j``. Indices are of any
    integer type; negative ones in ``[-depth, -1]`` wrap (ONNX); others out of range give an
    all-``off_value`` row (nGraph). Not differentiable.

    Attributes:
        depth: the new axis's length (>= 0).
        axis: where the new axis goes, in ``[-(rank + 1), rank]``.
        on_value, off_value: Python scalars that fit ``element_type`` (stored normalised:
            bool, int or float).
        element_type: the output element type.
    """

    depth: int
    axis: int = -1
    on_value: bool | int | float = 1
    off_value: bool | int | float = 0
    element_type: ElementType = et.f32
    num_inputs = 1
    differentiable = False

    def __post_init__(self) -> None:
        set_attr(self, "depth", as_int(self.depth, "depth"))
        set_attr(self, "axis", as_int(self.axis, "axis"))
        target = as_element_type(self.element_type)
        set_attr(self, "element_type", target)
        set_attr(self, "on_value", fit_scalar(self.on_value, target, "on_value"))
        set_attr(self, "off_value", fit_scalar(self.off_value, target, "off_value"))
        require(self.depth >= 0, f"depth must be >= 0, got {self.depth}")

    def canonicalize(self, indices: TensorType) -> OneHot:
        axis = normalize_axis(self.axis, indices.rank + 1)
        return OneHot(self.depth, axis, self.on_value, self.off_value, self.element_type)

    def infer(self, indices: TensorType) -> TensorType:
        require_element_type(indices, et.INTS, "indices")
        shape = (*indices.shape[: self.axis], self.depth, *indices.shape[self.axis :])
        return TensorType(self.element_type, shape)


def one_hot(
    indices: Output,
    depth: int,
    axis: int = -1,
    on_value: bool | int | float = 1,
    off_value: bool | int | float = 0,
    element_type: Any = et.f32,
) -> Output:
    """One-hot encode integer ``indices`` along a new axis of length ``depth``.

    Args:
        indices: any integer type; an index outside ``[-depth, depth)`` gives all
            ``off_value``.
        depth: the length of the new axis.
        axis: its position (default last).
        on_value, off_value: must fit ``element_type`` (0/1 stand for False/True for boolean).
        element_type: the output element type (default f32).
    """
    return OneHot(depth, axis, on_value, off_value, element_type)(indices)
