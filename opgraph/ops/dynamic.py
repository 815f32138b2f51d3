"""Ops whose results describe shapes known only at run time: ``shape_of``, ``non_zero``,
``unique``, ``non_max_suppression``, ``compress`` and ``boolean_mask``.

``shape_of`` returns a value's shape as an ``i64`` vector; its size is the (static) rank, its
values are the dimensions, so on a static input the pass ``fold_constants`` replaces it by a
Constant (``ShapeOf.value_from_types``) and on a symbolic input it is computed per call.

``non_zero``'s output size depends on the input *values*: each node holds a fresh
data-dependent symbol (``core.dim.fresh_dim``, bounded by the input's element count) as its
``count`` attribute and names it in ``bound_symbols()``; the interpreter binds it when the node
runs. Once bound (``specialize_shapes`` with the symbol's value) the attribute is an int and the
type is static. ``unique``, ``non_max_suppression`` and ``compress`` follow the same recipe
(``count``, a fresh symbol bounded by what the input types allow). Only ``compress`` (and
``boolean_mask``, built on it) has a gradient: the cotangent goes back to the kept positions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.dim import Dim, Symbol, bare_symbol, bounds, fresh_dim
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import Constant, constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.provenance import user_frame
from opgraph.core.shape import as_int, maybe_le, normalize_axis, prod
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import as_bool, require_element_type
from opgraph.ops.conversion import convert
from opgraph.ops.indexing import gather
from opgraph.ops.movement import concat, reshape, zeros
from opgraph.ops.ordering import cumsum

__all__ = [
    "ShapeOf",
    "shape_of",
    "NonZero",
    "non_zero",
    "Unique",
    "unique",
    "NonMaxSuppression",
    "non_max_suppression",
    "Compress",
    "compress",
    "boolean_mask",
]


# ------------------------------------------------------------------------------- shape_of
@opclass
class ShapeOf(Op):
    """The shape of the input as an ``i64`` vector of length ``rank`` (nGraph ``ShapeOf``,
    ONNX ``Shape`` without start/end). Not differentiable: the result is integer."""

    num_inputs = 1
    differentiable = False

    def infer(self, x: TensorType) -> TensorType:
        return TensorType(et.i64, (x.rank,))

    def value_from_types(self, x: TensorType) -> np.ndarray | None:
        """The result when the input's type decides it (a static shape), else None; used by
        ``fold_constants`` to fold the op whatever the input's values."""
        if not x.is_static:
            return None
        return np.array([int(d) for d in x.shape], dtype=np.int64)


def shape_of(x: Output) -> Output:
    """The shape of ``x`` as an ``i64`` vector (``i64[rank]``).

    A static shape folds to a Constant (``og.passes.fold_constants``); a symbolic one is
    computed when the Function runs.
    """
    return ShapeOf()(x)


# ------------------------------------------------------------------------------- non_zero
@opclass
class NonZero(Op):
    """Indices of the non-zero elements (ONNX ``NonZero``): ``i64[rank, count]``, one column
    per non-zero element in row-major order (``numpy.nonzero`` stacked).

    Attributes:
        count: the number of non-zero elements: a fresh data-dependent symbol (made by the
            builder, ``0 <= count <= x.size``) bound when the node runs, or an int once the
            Function is specialised to a binding that holds it.
    """

    count: Dim
    num_inputs = 1
    differentiable = False

    def __post_init__(self) -> None:
        require(
            bare_symbol(self.count) is not None or (type(self.count) is int and self.count >= 0),
            f"non_zero: count must be a symbol (og.dim) or a non-negative int, got {self.count!r}",
        )

    def infer(self, x: TensorType) -> TensorType:
        require(x.rank >= 1, f"non_zero needs a rank >= 1 input, got {x} (rank 0)")
        if type(self.count) is int and x.is_static:
            require(
                self.count <= x.size,
                f"non_zero: count {self.count} exceeds the {x.size} elements of {x}",
            )
        return TensorType(et.i64, (x.rank, self.count))

    def bound_symbols(self) -> tuple[Symbol, ...]:
        symbol = bare_symbol(self.count)
        return () if symbol is None else (symbol,)


def non_zero(x: Output) -> Output:
    """Indices of the non-zero elements of ``x``: ``i64[rank, n]``, column ``j`` the index
    of the ``j``-th non-zero element in row-major order (ONNX ``NonZero``; ``False`` and
    ``0`` are zero, ``NaN`` is not).

    ``n`` is a fresh data-dependent symbol (named ``_nonzeroK``, bounded by ``x``'s element
    count) that the interpreter binds when the node runs; CPU and GPU refuse such Functions.

    Raises:
        OpTypeError: ``x`` is a scalar.
    """
    t = x.tensor_type
    high = bounds(t.size)[1] if t.rank else None
    return NonZero(fresh_dim("nonzero", max=high if isinstance(high, int) else None))(x)


def _require_count(op: Op) -> None:
    """``op.count`` is a bare symbol (the builder's fresh one) or a non-negative int."""
    count = getattr(op, "count")  # noqa: B009 - every data-dependent op names it so
    require(
        bare_symbol(count) is not None or (type(count) is int and count >= 0),
        f"{op.name}: count must be a symbol (og.dim) or a non-negative int, got {count!r}",
    )


def _count_symbols(count: Dim) -> tuple[Symbol, ...]:
    symbol = bare_symbol(count)
    return () if symbol is None else (symbol,)


def _upper(*dims: Dim) -> int | None:
    """The least finite upper bound of ``dims`` (None when none is bounded)."""
    finite = [int(h) for h in (bounds(d)[1] for d in dims) if math.isfinite(h)]
    return min(finite) if finite else None


def _axis_or_none(axis: Any, rank: int) -> int | None:
    """``axis`` normalised for ``rank``, or None when it is out of range (the op reports it)."""
    try:
        return normalize_axis(axis, rank)
    except OpTypeError:
        return None


# --------------------------------------------------------------------------------- unique
@opclass
class Unique(Op):
    """The distinct elements, or distinct slices along ``axis``, of the input (ONNX
    ``Unique``).

    Four outputs: ``values`` (``[count]``, or the input's shape with ``axis`` of size
    ``count``), ``indices`` (``i64[count]``: where each value first occurs), ``inverse``
    (``i64[m]``, ``m`` the input's element count, or its size along ``axis``: the place of each
    element or slice in ``values``) and ``counts`` (``i64[count]``). Sorted ascending (slices
    lexicographically) when ``sorted``, else in order of first occurrence. ``axis=None``
    flattens the input. NaNs are equal to each other and sort after every number.

    Attributes:
        count: the number of distinct values: a fresh data-dependent symbol (made by the
            builder, ``0 <= count <= m``), or an int once the Function is specialised.
        axis: the axis whose slices are compared, or None to flatten.
        sorted: ascending order (True) or order of first occurrence.
    """

    count: Dim
    axis: int | None = None
    sorted: bool = True
    num_inputs = 1
    multi_output = True
    differentiable = False

    def __post_init__(self) -> None:
        _require_count(self)
        if self.axis is not None:
            set_attr(self, "axis", as_int(self.axis, "unique: axis"))
        set_attr(self, "sorted", as_bool(self.sorted, "unique: sorted"))

    def canonicalize(self, x: TensorType) -> Op:
        if self.axis is None:
            return self
        axis = normalize_axis(self.axis, x.rank, "unique: axis")
        return dataclasses.replace(self, axis=axis)

    def infer(self, x: TensorType) -> tuple[TensorType, ...]:
        m: Dim
        shape: tuple[Dim, ...]
        if self.axis is None:
            m, shape = x.size, (self.count,)
        else:
            m = x.shape[self.axis]
            shape = tuple(self.count if i == self.axis else d for i, d in enumerate(x.shape))
        require(
            maybe_le(self.count, m),
            f"count {self.count} exceeds the {m} elements (or slices) of {x}",
        )
        index = et.i64
        return (
            TensorType(x.element_type, shape),
            TensorType(index, (self.count,)),
            TensorType(index, (m,)),
            TensorType(index, (self.count,)),
        )

    def bound_symbols(self) -> tuple[Symbol, ...]:
        return _count_symbols(self.count)


def unique(
    x: Output,
    axis: int | None = None,
    sorted: bool = True,  # noqa: A002 - ONNX's name for the attribute
) -> tuple[Output, Output, Output, Output]:
    """The distinct elements (``axis=None``: of ``x`` flattened) or distinct slices along
    ``axis`` of ``x`` (ONNX ``Unique``; ``numpy.unique`` with every ``return_*``).

    Args:
        x: a value of any element type.
        axis: the axis whose slices are compared (negative counts from the end), or None.
        sorted: ascending (slices lexicographically); False keeps first-occurrence order.

    Returns:
        ``(values, indices, inverse, counts)``: ``values`` has ``n`` entries (elements, or
        slices along ``axis``), ``n`` a fresh data-dependent symbol ``_uniqueK``;
        ``indices[j]`` is where value ``j`` first occurs, ``inverse[i]`` the value of element
        (slice) ``i``, ``counts[j]`` how often value ``j`` occurs (all ``i64``).

    Raises:
        OpTypeError: ``axis`` out of range.

    Example:
        >>> values, first, inverse, counts = ops.unique(labels)
    """
    t = x.tensor_type
    normal = None if axis is None else _axis_or_none(axis, t.rank)
    limit = t.size if normal is None else t.shape[normal]
    op = Unique(fresh_dim("unique", max=_upper(limit)), axis, sorted)
    result: tuple[Output, Output, Output, Output] = op(x)
    return result


# -------------------------------------------------------------------- non_max_suppression
_SCALAR_SHAPES = "a scalar, a [1] vector, or an empty [0] vector for 'absent'"


def _require_scalar_input(t: TensorType, accepted: tuple[ElementType, ...], what: str) -> None:
    require_element_type(t, accepted, what)
    require(
        t.rank == 0 or (t.rank == 1 and maybe_le(t.shape[0], 1)),
        f"{what} must be {_SCALAR_SHAPES}, got {t}",
    )


@opclass
class NonMaxSuppression(Op):
    """Greedy non-maximum suppression per batch entry and class (ONNX
    ``NonMaxSuppression``): ``i64[count, 3]`` rows ``(batch, class, box)``, by batch, then
    class, then score (highest first; ties: lower box index first).

    Inputs: ``boxes[B, N, 4]`` (corners ``y1, x1, y2, x2`` in either order, or
    ``x_center, y_center, width, height`` when ``center_point_box``), ``scores[B, C, N]``
    of the same float type, then three scalars (rank 0 or ``[1]``; an empty ``[0]`` vector
    means absent, as in ONNX): ``max_output_boxes_per_class`` (i32/i64; absent: 0, no
    output), ``iou_threshold`` (a box is dropped when its intersection over union with a
    kept box is above it; absent: 0) and ``score_threshold`` (only scores above it are
    candidates; absent: all are).

    Attributes:
        count: the number of selected boxes: a fresh data-dependent symbol (made by the
            builder, at most ``B * C * min(max_output_boxes_per_class, N)``), or an int once
            the Function is specialised.
        center_point_box: the box encoding (False: corners).
    """

    count: Dim
    center_point_box: bool = False
    num_inputs = 5
    differentiable = False

    def __post_init__(self) -> None:
        _require_count(self)
        set_attr(
            self,
            "center_point_box",
            as_bool(self.center_point_box, "non_max_suppression: center_point_box"),
        )

    def infer(
        self,
        boxes: TensorType,
        scores: TensorType,
        limit: TensorType,
        iou: TensorType,
        score: TensorType,
    ) -> TensorType:
        require_element_type(boxes, et.FLOATS, "boxes")
        require(
            boxes.rank == 3 and maybe_le(boxes.shape[2], 4) and maybe_le(4, boxes.shape[2]),
            f"boxes must be [batch, boxes, 4], got {boxes}",
        )
        require(
            scores.rank == 3 and scores.element_type is boxes.element_type,
            f"scores must be [batch, classes, boxes] of the boxes' "
            f"element type {boxes.element_type.name}, got {scores}",
        )
        require(
            scores.shape[0] == boxes.shape[0] and scores.shape[2] == boxes.shape[1],
            f"scores {scores} do not match boxes {boxes} (scores[b, c, n] is box [b, n])",
        )
        _require_scalar_input(limit, (et.i32, et.i64), "max_output_boxes_per_class")
        _require_scalar_input(iou, et.FLOATS, "iou_threshold")
        _require_scalar_input(score, et.FLOATS, "score_threshold")
        most = prod(boxes.shape[:2]) * scores.shape[1]
        require(
            maybe_le(self.count, most),
            f"count {self.count} exceeds the {most} (batch, class, box) "
            f"triples of boxes {boxes} and scores {scores}",
        )
        return TensorType(et.i64, (self.count, 3))

    def bound_symbols(self) -> tuple[Symbol, ...]:
        return _count_symbols(self.count)


def _scalar_value(value: Output | float | int | None, element_type: ElementType) -> Output:
    """An optional scalar input: an Output as is, a number as a scalar Constant, None as an
    empty ``[0]`` Constant (ONNX's 'absent')."""
    if isinstance(value, Output):
        return value
    if value is None:
        return constant(np.zeros((0,), element_type.dtype), element_type)
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise OpTypeError(
            f"non_max_suppression: expected an Output, a number or None, got {value!r} "
            f"(built at {user_frame()})"
        )
    return constant(np.asarray(value).astype(element_type.dtype), element_type)


def _known_limit(limit: Output) -> int | None:
    """The value of a constant ``max_output_boxes_per_class`` (0 when absent), else None."""
    op = limit.node.op
    if not isinstance(op, Constant) or op.value.size > 1:
        return None
    return max(int(op.value.reshape(-1)[0]), 0) if op.value.size else 0


def non_max_suppression(
    boxes: Output,
    scores: Output,
    max_output_boxes_per_class: Output | int | None = None,
    iou_threshold: Output | float | None = None,
    score_threshold: Output | float | None = None,
    center_point_box: bool | int = False,
) -> Output:
    """Select boxes by greedy non-maximum suppression (ONNX ``NonMaxSuppression``).

    Args:
        boxes: ``[batch, boxes, 4]`` floats (see ``center_point_box``).
        scores: ``[batch, classes, boxes]`` of the boxes' element type.
        max_output_boxes_per_class: the most boxes kept per (batch, class): an i32/i64
            scalar value (constant or computed), an int, or None (ONNX's default 0: nothing).
        iou_threshold: drop a box whose IoU with a kept box is above it (float value or
            number; None: 0).
        score_threshold: only boxes scoring above it are candidates (None: every box).
        center_point_box: False: ``y1, x1, y2, x2`` corners (either order); True:
            ``x_center, y_center, width, height``.

    Returns:
        ``i64[n, 3]`` rows ``(batch, class, box)``; ``n`` a fresh data-dependent symbol
        ``_nmsK`` bounded by ``batch * classes * min(max_output_boxes_per_class, boxes)``
        (the limit counts only when it is a constant).

    Raises:
        OpTypeError: wrong ranks, shapes or element types (the message names the input).
    """
    limit = _scalar_value(max_output_boxes_per_class, et.i64)
    iou = _scalar_value(iou_threshold, et.f32)
    score = _scalar_value(score_threshold, et.f32)
    b, s = boxes.tensor_type, scores.tensor_type
    per_class = b.shape[1] if b.rank == 3 else None
    known = _known_limit(limit)
    if per_class is not None and known is not None:
        per_class = known if not isinstance(per_class, int) else min(known, per_class)
    bound = None
    if per_class is not None and b.rank == 3 and s.rank == 3:
        bound = _upper(b.shape[0] * s.shape[1] * per_class)
    flag = as_bool(center_point_box, "non_max_suppression: center_point_box")
    op = NonMaxSuppression(fresh_dim("nms", max=bound), flag)
    return op(boxes, scores, limit, iou, score)


# ------------------------------------------------------------------------------- compress
@opclass
class Compress(Op):
    """The slices of the input along ``axis`` (``axis=None``: the elements of the flattened
    input) where a boolean ``condition`` is True (ONNX ``Compress``, ``numpy.compress``).

    ``condition`` is a ``boolean[L]`` vector with ``L`` at most the size of that axis; the
    positions past ``L`` are dropped. The result is the input with ``axis`` of size ``count``
    (``[count]`` when flattened). The gradient to the data is the cotangent scattered back to
    the kept positions, zeros elsewhere.

    Attributes:
        count: the number of True entries: a fresh data-dependent symbol (made by the
            builder, ``0 <= count <= L``), or an int once the Function is specialised.
        axis: the axis to select along, or None to flatten the input first.
    """

    count: Dim
    axis: int | None = None
    num_inputs = 2

    def __post_init__(self) -> None:
        _require_count(self)
        if self.axis is not None:
            set_attr(self, "axis", as_int(self.axis, "compress: axis"))

    def canonicalize(self, x: TensorType, condition: TensorType) -> Op:
        if self.axis is None:
            return self
        return dataclasses.replace(self, axis=normalize_axis(self.axis, x.rank, "compress: axis"))

    def infer(self, x: TensorType, condition: TensorType) -> TensorType:
        require(
            condition.element_type is et.boolean and condition.rank == 1,
            f"condition must be a boolean vector, got {condition}",
        )
        length = x.size if self.axis is None else x.shape[self.axis]
        where = "flattened" if self.axis is None else f"along axis {self.axis}"
        require(
            maybe_le(condition.shape[0], length),
            f"condition {condition} is longer than {x} {where} ({length})",
        )
        require(
            maybe_le(self.count, condition.shape[0]),
            f"count {self.count} exceeds the length of condition {condition}",
        )
        if self.axis is None:
            return TensorType(x.element_type, (self.count,))
        shape = tuple(self.count if i == self.axis else d for i, d in enumerate(x.shape))
        return TensorType(x.element_type, shape)

    def bound_symbols(self) -> tuple[Symbol, ...]:
        return _count_symbols(self.count)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, condition = inputs
        data = reshape(x, [x.tensor_type.size]) if self.axis is None else x
        axis = self.axis or 0
        # Slot 0 of ``padded`` is zero; the k-th kept position (k from 1) reads slot k.
        keep = convert(condition, et.i64)
        slots = keep * cumsum(keep, 0)
        head = zeros(ct.element_type, _with(ct.shape, axis, 1))
        grad = gather(concat([head, ct], axis), slots, axis)
        rest = data.shape[axis] - condition.shape[0]
        if rest != 0:  # positions past the condition are dropped: zero gradient
            grad = concat([grad, zeros(ct.element_type, _with(ct.shape, axis, rest))], axis)
        return (reshape(grad, x.shape) if self.axis is None else grad), None


def _with(shape: tuple[Dim, ...], axis: int, size: Dim) -> tuple[Dim, ...]:
    return tuple(size if i == axis else d for i, d in enumerate(shape))


def compress(x: Output, condition: Output, axis: int | None = None) -> Output:
    """The slices of ``x`` along ``axis`` where ``condition`` is True (ONNX ``Compress``).

    Args:
        x: a value of any element type.
        condition: a boolean vector, at most as long as ``x``'s ``axis`` (or element count
            when ``axis`` is None); positions past its end are dropped.
        axis: the axis to select along (negative counts from the end), or None to select
            elements of ``x`` flattened.

    Returns:
        ``x`` with ``axis`` of size ``n`` (``[n]`` when flattened), ``n`` a fresh
        data-dependent symbol ``_compressK`` bounded by the condition's length.

    Raises:
        OpTypeError: a condition that is not a boolean vector, or longer than the axis;
            ``axis`` out of range.
    """
    c = condition.tensor_type
    limits: list[Dim] = [c.shape[0]] if c.rank == 1 else []
    t = x.tensor_type
    normal = None if axis is None else _axis_or_none(axis, t.rank)
    limits.append(t.size if normal is None else t.shape[normal])
    return Compress(fresh_dim("compress", max=_upper(*limits)), axis)(x, condition)


def boolean_mask(x: Output, mask: Output) -> Output:
    """``x[mask]`` as numpy computes it: the entries of ``x`` where a boolean ``mask`` over
    ``x``'s leading axes is True, in row-major order.

    Args:
        x: a value of rank ``>= mask.rank``.
        mask: a boolean value shaped like the first ``mask.rank >= 1`` axes of ``x``.

    Returns:
        ``[n, *x.shape[mask.rank:]]``, ``n`` a fresh data-dependent symbol (a
        :class:`Compress` of ``x`` with its masked axes flattened into one). Differentiable
        in ``x``.

    Raises:
        OpTypeError: ``mask`` is not boolean, is a scalar, or its shape is not a prefix of
            ``x``'s.
    """
    t, m = x.tensor_type, mask.tensor_type
    k = m.rank
    if m.element_type is not et.boolean or k == 0 or k > t.rank or t.shape[:k] != m.shape:
        raise OpTypeError(
            f"boolean_mask: mask must be a boolean value of rank >= 1 shaped like the leading "
            f"axes of x {t}, got {m} (built at {user_frame()})"
        )
    if k > 1:
        lead = prod(t.shape[:k])
        x = reshape(x, [lead, *t.shape[k:]])
        mask = reshape(mask, [lead])
    return compress(x, mask, axis=0)
