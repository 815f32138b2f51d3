"""Ops whose shape-like arguments are run-time ``i64`` tensors (ONNX's Reshape, Expand, Slice,
Pad, Tile, TopK, Range, ConstantOfShape with those arguments given as graph inputs).

Each builder takes the static path when the argument is known at build time (a Constant, or
``shape_of`` of a static value): ``dynamic_reshape(x, constant([2, 3]))`` is ``reshape(x, (2,
3))``. Otherwise it builds a node whose output dimensions are fresh data-dependent symbols
(``core.dim.fresh_dim``, bounded where a bound is known), held in the op's ``dims`` attribute and
named by ``bound_symbols()``, exactly as ``non_zero`` does: INTERPRETER binds them when the node
runs. The node's meaning is its *static form* (:meth:`ShapeTensorOp.static`): the same builder
applied to the argument values as Constants. The reference kernel builds that static form for
the values it meets and runs it (cached), so every static type check (a reshape whose product
is not the element count, a crop larger than the axis) runs then, and fails as an
``ExecutionError`` naming the node.

CPU and GPU refuse these nodes as they refuse ``non_zero`` (the fused memory plan needs every
size before the call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.dim import Dim, DimExpr, Symbol, bare_symbol, bounds, fresh_dim
from opgraph.core.errors import NotDifferentiableError, OpTypeError
from opgraph.core.literals import Constant, constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require
from opgraph.core.shape import normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops import movement
from opgraph.ops.broadcasting import broadcast_to, numpy_broadcast_shape
from opgraph.ops.common import as_enum
from opgraph.ops.dynamic import ShapeOf, shape_of
from opgraph.ops.elementwise import negative
from opgraph.ops.movement import broadcast, concat, reshape, reverse, tile
from opgraph.ops.ordering import top_k
from opgraph.ops.rearrange import PadMode, pad
from opgraph.ops.reduction import reduce_sum
from opgraph.ops.resize import CoordinateTransformation, NearestMode, Resize, ResizeMode, resize

__all__ = [
    "ShapeTensorOp",
    "DynamicReshape",
    "dynamic_reshape",
    "DynamicBroadcast",
    "dynamic_broadcast",
    "SumTo",
    "sum_to",
    "DynamicSlice",
    "dynamic_slice",
    "SliceGradient",
    "slice_gradient",
    "DynamicPad",
    "dynamic_pad",
    "DynamicTile",
    "dynamic_tile",
    "DynamicTopK",
    "dynamic_top_k",
    "DynamicRange",
    "dynamic_range",
    "Fill",
    "fill",
    "known_value",
    "reshape_like",
    "DynamicResize",
    "dynamic_resize",
]


# ---------------------------------------------------------------------------- shared parts
class ShapeTensorOp(Op):
    """Base of the ops whose output sizes the values of some inputs decide.

    Subclasses declare ``dims`` (the output dimensions: fresh symbols, or ints where the types
    decide them) as their last attribute, ``value_inputs`` (the indices of the inputs read as
    values: shapes, pads, repeats, k…), and :meth:`static`, the op built from those values.
    """

    __slots__ = ()
    value_inputs: ClassVar[tuple[int, ...]] = (1,)

    def bound_symbols(self) -> tuple[Symbol, ...]:
        dims: tuple[Dim, ...] = getattr(self, "dims")  # noqa: B009 - every subclass has it
        own = self.sized_axes()
        found = [bare_symbol(d) for i, d in enumerate(dims) if own is None or i in own]
        return tuple(dict.fromkeys(s for s in found if s is not None))

    def sized_axes(self) -> tuple[int, ...] | None:
        """The output axes whose sizes the values decide (None: every axis); the others keep
        the input's dimension, whose symbols another node or the arguments bind."""
        return None

    def static(self, *inputs: Output) -> Output | tuple[Output, ...]:
        """The op built statically: ``inputs`` as the node's, the value inputs Constants."""
        raise NotImplementedError(f"{self.name} has no static form")

    def static_key(self) -> tuple[Any, ...]:
        """What the static form depends on besides the inputs (the attributes but ``dims``)."""
        return tuple(v for k, v in self.attributes().items() if k != "dims")

    def _check_dims(self, rank: int) -> None:
        dims: tuple[Dim, ...] = getattr(self, "dims")  # noqa: B009
        require(
            len(dims) == rank,
            f"dims {dims} must hold one dimension per output axis ({rank})",
        )


def _check_dims_attribute(dims: Any, what: str) -> None:
    require(
        isinstance(dims, tuple)
        and all((type(d) is int and d >= 0) or isinstance(d, DimExpr) for d in dims),
        f"{what}: dims must be a tuple of non-negative ints and symbols, got {dims!r}",
    )


def _vector(t: TensorType, what: str, length: int | None = None) -> int:
    """The static length of the integer vector ``t`` (an argument read as values)."""
    require(
        t.element_type.is_integral and not t.element_type.is_boolean,
        f"{what} must be an integer tensor, got {t}",
    )
    require(t.rank == 1, f"{what} must be a vector (rank 1), got {t}")
    n = t.shape[0]
    require(type(n) is int, f"{what} must have a static length, got {t}")
    assert isinstance(n, int)
    if length is not None:
        require(n == length, f"{what} must have {length} elements, got {t}")
    return n


def _scalar_like(t: TensorType, what: str) -> None:
    require(t.rank == 0 or (t.rank == 1 and t.shape[0] == 1), f"{what} must be a scalar, got {t}")


def known_value(value: Output) -> np.ndarray | None:
    """The value of ``value`` when its types or a Constant decide it (``shape_of`` of a static
    value), else None: the builders take the static path then."""
    op = value.node.op
    if isinstance(op, Constant):
        return np.asarray(op.value)
    if isinstance(op, ShapeOf):
        return op.value_from_types(value.node.inputs[0].tensor_type)
    return None


def _fresh(prefix: str, count: int, high: Dim | None = None) -> tuple[Dim, ...]:
    limit = bounds(high)[1] if high is not None else None
    top = limit if isinstance(limit, int) else None
    return tuple(fresh_dim(prefix, max=top) for _ in range(count))


def _ints(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


# ------------------------------------------------------------------------------- reshape
@opclass
class DynamicReshape(ShapeTensorOp):
    """``x`` reshaped to the run-time ``shape`` (ONNX ``Reshape``): ``-1`` is inferred, ``0``
    copies ``x``'s dimension unless ``allow_zero``. The element count must not change."""

    allow_zero: bool
    dims: tuple[Dim, ...]
    num_inputs = 2

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_reshape")

    def infer(self, x: TensorType, shape: TensorType) -> TensorType:
        self._check_dims(_vector(shape, "dynamic_reshape: shape"))
        return TensorType(x.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return dynamic_reshape(inputs[0], inputs[1], self.allow_zero)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (reshape_like(ct, inputs[0]), None)


def dynamic_reshape(x: Output, shape: Output, allow_zero: bool = False) -> Output:
    """``x`` reshaped to the values of the integer vector ``shape`` (ONNX ``Reshape``).

    A ``-1`` entry is inferred from the element count; a ``0`` copies ``x``'s dimension at
    that position unless ``allow_zero``. A known ``shape`` (a Constant, ``shape_of`` of a
    static value) gives a plain :func:`~opgraph.ops.reshape`; a run-time one gives fresh
    output symbols bound when the node runs (each at most ``x``'s element count).

    Raises:
        OpTypeError: ``shape`` is not an integer vector of static length; with a known
            ``shape``, an element count that differs (at run time: ``ExecutionError``).
    """
    known = known_value(shape)
    if known is not None:
        target: list[Dim] = [*_ints(known)]
        if not allow_zero:
            target = [x.shape[i] if d == 0 and i < x.rank else d for i, d in enumerate(target)]
        return reshape(x, target)
    n = shape.shape[0] if shape.rank == 1 and type(shape.shape[0]) is int else 0
    size = x.tensor_type.size  # bounds every output size, unless an empty axis hides the rest
    dims = _fresh("reshape", int(n), size if type(size) is not int or size > 0 else None)
    result: Output = DynamicReshape(bool(allow_zero), dims)(x, shape)
    return result


def reshape_like(x: Output, like: Output) -> Output:
    """``x`` reshaped to ``like``'s static shape, its element count checked when the node runs
    if ``x``'s sizes are decided at run time (the gradients here come back to the data's
    type this way).

    Raises:
        OpTypeError: ``like``'s shape is symbolic while ``x``'s is not static (a gradient
            w.r.t. symbolic data through a run-time reshape is not supported yet).
    """
    if x.tensor_type.is_static or not like.tensor_type.is_static:
        return reshape(x, like.shape)
    result: Output = DynamicReshape(False, tuple(like.shape))(x, shape_of(like))
    return result


# ----------------------------------------------------------------------------- broadcast
@opclass
class DynamicBroadcast(ShapeTensorOp):
    """``x`` broadcast (numpy rules, both ways) with the run-time ``shape`` (ONNX ``Expand``):
    the result has ``max(rank, len(shape))`` axes."""

    dims: tuple[Dim, ...]
    num_inputs = 2

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_broadcast")

    def infer(self, x: TensorType, shape: TensorType) -> TensorType:
        self._check_dims(max(x.rank, _vector(shape, "dynamic_broadcast: shape")))
        return TensorType(x.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return dynamic_broadcast(inputs[0], inputs[1])

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (sum_to(ct, inputs[0]), None)


def dynamic_broadcast(x: Output, shape: Output) -> Output:
    """``x`` broadcast with the values of the integer vector ``shape`` by numpy's rules in both
    directions (ONNX ``Expand``: a ``1`` in ``shape`` keeps ``x``'s dimension).

    Raises:
        OpTypeError: ``shape`` is not an integer vector of static length, or (known) does not
            broadcast with ``x`` (at run time: ``ExecutionError``).
    """
    known = known_value(shape)
    if known is not None:
        return broadcast_to(x, numpy_broadcast_shape(x.shape, tuple(_ints(known))))
    n = shape.shape[0] if shape.rank == 1 and type(shape.shape[0]) is int else 0
    dims = _fresh("expand", max(x.rank, int(n)))
    result: Output = DynamicBroadcast(dims)(x, shape)
    return result


@opclass
class SumTo(ShapeTensorOp):
    """``x`` summed down to the shape of ``like`` (numpy's unbroadcast: leading axes and axes
    where ``like`` has size 1 are summed): the gradient of a broadcast with a run-time shape.
    Only ``like``'s shape is read."""

    dims: tuple[Dim, ...]
    num_inputs = 2
    value_inputs = ()

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "sum_to")

    def infer(self, x: TensorType, like: TensorType) -> TensorType:
        require(self.dims == like.shape, f"sum_to: dims {self.dims} must be like's {like}")
        require(x.rank >= like.rank, f"sum_to: {x} has fewer axes than {like}")
        return TensorType(x.element_type, self.dims)

    def sized_axes(self) -> tuple[int, ...] | None:
        return ()  # like's dimensions, bound wherever like's are

    def static(self, *inputs: Output) -> Output:
        x, like = inputs
        lead = x.rank - like.rank
        axes = [*range(lead), *(lead + i for i, d in enumerate(like.shape) if d == 1)]
        summed = reduce_sum(x, axes, keep_dims=False) if axes else x
        return reshape(summed, like.shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (dynamic_broadcast(ct, shape_of(inputs[0])), None)


def sum_to(x: Output, like: Output) -> Output:
    """``x`` summed to ``like``'s shape by numpy's broadcasting rules read backwards (the
    gradient of :func:`dynamic_broadcast`); ``x``'s sizes may be known only at run time."""
    if x.tensor_type.is_static and like.tensor_type.is_static:
        return SumTo(like.shape).static(x, like)
    result: Output = SumTo(tuple(like.shape))(x, like)
    return result


# --------------------------------------------------------------------------------- slice
@opclass
class DynamicSlice(ShapeTensorOp):
    """ONNX ``Slice`` with run-time ``starts``, ``ends`` and ``steps`` over the static
    ``axes``: bounds are clamped into the axis, negative values count from its end, a negative
    step walks backwards."""

    axes: tuple[int, ...]
    dims: tuple[Dim, ...]
    num_inputs = 4
    value_inputs = (1, 2, 3)

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_slice")

    def infer(
        self, x: TensorType, starts: TensorType, ends: TensorType, steps: TensorType
    ) -> TensorType:
        for what, t in (("starts", starts), ("ends", ends), ("steps", steps)):
            _vector(t, f"dynamic_slice: {what}", len(self.axes))
        require(
            all(0 <= a < x.rank for a in self.axes) and len(set(self.axes)) == len(self.axes),
            f"dynamic_slice: axes {self.axes} must be distinct axes of {x}",
        )
        self._check_dims(x.rank)
        return TensorType(x.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return dynamic_slice(inputs[0], inputs[1], inputs[2], self.axes, inputs[3])

    def sized_axes(self) -> tuple[int, ...] | None:
        return self.axes

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, starts, ends, steps = inputs
        return (slice_gradient(ct, x, starts, ends, self.axes, steps), None, None, None)


def dynamic_slice(
    x: Output,
    starts: Output,
    ends: Output,
    axes: Sequence[int] | None = None,
    steps: Output | None = None,
) -> Output:
    """``x`` sliced along ``axes`` (default: the first ``len(starts)``) from ``starts`` to
    ``ends`` (exclusive) by ``steps`` (default 1), ONNX ``Slice`` semantics: negative bounds
    count from the end, bounds are clamped into the axis, a negative step walks backwards.

    ``starts``, ``ends`` and ``steps`` are integer vectors; known values give a static slice,
    run-time ones fresh output symbols (each at most the axis' size).

    Raises:
        OpTypeError: mismatched lengths, a repeated or out-of-range axis, a zero step.
    """
    count = starts.shape[0] if starts.rank == 1 and type(starts.shape[0]) is int else 0
    axes = (
        tuple(range(int(count))) if axes is None else tuple(normalize_axis(a, x.rank) for a in axes)
    )
    if steps is None:
        steps = constant(np.ones(len(axes), np.int64), et.i64)
    values = [known_value(v) for v in (starts, ends, steps)]
    if all(v is not None for v in values):
        return _static_slice(x, axes, *(_ints(v) for v in values if v is not None))
    dims = tuple(_fresh("slice", 1, d)[0] if i in axes else d for i, d in enumerate(x.shape))
    result: Output = DynamicSlice(axes, dims)(x, starts, ends, steps)
    return result


@opclass
class SliceGradient(ShapeTensorOp):
    """The gradient of :class:`DynamicSlice` w.r.t. its data: ``ct`` placed where the slice of
    a value shaped like ``like`` read, zeros elsewhere. Only ``like``'s shape is read."""

    axes: tuple[int, ...]
    dims: tuple[Dim, ...]
    num_inputs = 5
    value_inputs = (2, 3, 4)
    differentiable = False

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "slice_gradient")

    def infer(
        self,
        ct: TensorType,
        like: TensorType,
        starts: TensorType,
        ends: TensorType,
        steps: TensorType,
    ) -> TensorType:
        for what, t in (("starts", starts), ("ends", ends), ("steps", steps)):
            _vector(t, f"slice_gradient: {what}", len(self.axes))
        require(
            self.dims == like.shape and ct.rank == like.rank,
            f"slice_gradient: dims {self.dims} must be like's {like}, of ct's rank {ct}",
        )
        return TensorType(ct.element_type, self.dims)

    def sized_axes(self) -> tuple[int, ...] | None:
        return ()

    def static(self, *inputs: Output) -> Output:
        ct, like, starts, ends, steps = inputs
        sliced = dynamic_slice(like, starts, ends, self.axes, steps)  # the static chain
        gradient, node = ct, sliced.node
        while sliced is not like and node is not like.node:  # Reverse / Slice, one input each
            back = node.op.vjp(node.inputs, node.outputs, (gradient,))[0]
            assert back is not None  # a slice's or reversal's adjoint reaches its data
            gradient, node = back, node.inputs[0].node
        return gradient


def slice_gradient(
    ct: Output,
    like: Output,
    starts: Output,
    ends: Output,
    axes: Sequence[int],
    steps: Output | None = None,
) -> Output:
    """The gradient of ``dynamic_slice(like, starts, ends, axes, steps)`` for its cotangent
    ``ct``: shaped like ``like``, zero where the slice did not read."""
    if steps is None:
        steps = constant(np.ones(len(axes), np.int64), et.i64)
    op = SliceGradient(tuple(normalize_axis(a, like.rank) for a in axes), tuple(like.shape))
    if all(known_value(v) is not None for v in (starts, ends, steps)) and ct.tensor_type.is_static:
        return op.static(ct, like, starts, ends, steps)
    result: Output = op(ct, like, starts, ends, steps)
    return result


def _static_slice(
    x: Output, axes: tuple[int, ...], starts: list[int], ends: list[int], steps: list[int]
) -> Output:
    if not len(axes) == len(starts) == len(ends) == len(steps):
        raise OpTypeError(
            f"dynamic_slice: axes {axes}, starts {starts}, ends {ends} and steps {steps} "
            "must have one entry per axis"
        )
    lower, upper, strides = [0] * x.rank, list(x.shape), [1] * x.rank
    backwards = []
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        dim = x.shape[axis]
        if step == 0:
            raise OpTypeError(f"dynamic_slice: step 0 on axis {axis}")
        if type(dim) is not int:
            raise OpTypeError(f"dynamic_slice: axis {axis} of {x.type} must be static")
        if step > 0:
            lo, hi = _clamp(start, dim, 0, dim), _clamp(end, dim, 0, dim)
            lower[axis], upper[axis], strides[axis] = lo, max(lo, hi), step
        else:
            lo, hi = _clamp(start, dim, -1, dim - 1), _clamp(end, dim, -1, dim - 1)
            lower[axis], upper[axis] = dim - 1 - lo, max(dim - 1 - lo, dim - 1 - hi)
            strides[axis] = -step
            backwards.append(axis)
    if backwards:
        x = reverse(x, backwards)
    return movement.slice(x, lower, upper, strides)


def _clamp(value: int, dim: int, low: int, high: int) -> int:
    if value < 0:
        value += dim
    return max(low, min(high, value))


# ----------------------------------------------------------------------------------- pad
@opclass
class DynamicPad(ShapeTensorOp):
    """``x`` padded (or cropped, negative amounts) by the run-time ``pads`` (ONNX layout: the
    ``rank`` counts before each axis, then the ``rank`` counts after), filled with the scalar
    ``value`` in constant mode."""

    mode: PadMode
    dims: tuple[Dim, ...]
    num_inputs = 3

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_pad")

    def infer(self, x: TensorType, pads: TensorType, value: TensorType) -> TensorType:
        _vector(pads, "dynamic_pad: pads", 2 * x.rank)
        require(
            value.rank == 0 and value.element_type is x.element_type,
            f"dynamic_pad: value must be a scalar of {x.element_type.name}, got {value}",
        )
        self._check_dims(x.rank)
        return TensorType(x.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return dynamic_pad(inputs[0], inputs[1], inputs[2], self.mode)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        if self.mode is not PadMode.CONSTANT:
            raise NotDifferentiableError(
                f"DynamicPad: no gradient in {self.mode.name.lower()} mode (constant mode has "
                "one); specialise the pads (a Constant) for the static pad's gradient"
            )

        x, pads, _value = inputs
        zero = constant(np.zeros((), x.element_type.dtype), x.element_type)
        # Cropping by the negated amounts takes the padded region back out.
        return (reshape_like(dynamic_pad(ct, negative(pads), zero), x), None, None)


def dynamic_pad(
    x: Output, pads: Output, value: Output | None = None, mode: Any = "constant"
) -> Output:
    """``x`` padded by the values of ``pads``, an integer vector of ``2 * rank`` counts (ONNX
    layout: every axis' count before, then every axis' count after; negative crops).

    Args:
        x: the value to pad.
        pads: the counts.
        value: the constant mode's fill, a scalar of ``x``'s element type (default 0).
        mode: ``"constant"``, ``"edge"``, ``"reflect"`` or ``"symmetric"`` (a PadMode).

    Raises:
        OpTypeError: ``pads`` is not an integer vector of ``2 * rank`` elements, or (known)
            a crop larger than its axis (at run time: ``ExecutionError``).
    """
    if value is None:
        value = constant(np.zeros((), x.element_type.dtype), x.element_type)
    mode = as_enum(PadMode, mode, "dynamic_pad mode")
    known = known_value(pads)
    if known is not None:
        counts = _ints(known)
        if len(counts) != 2 * x.rank:
            raise OpTypeError(f"dynamic_pad: pads {counts} must hold 2 * {x.rank} counts")
        if mode is PadMode.CONSTANT:
            return pad(x, counts[: x.rank], counts[x.rank :], value=value)
        return pad(x, counts[: x.rank], counts[x.rank :], mode=mode)
    dims = _fresh("pad", x.rank)
    result: Output = DynamicPad(mode, dims)(x, pads, value)
    return result


# ---------------------------------------------------------------------------------- tile
@opclass
class DynamicTile(ShapeTensorOp):
    """``x`` repeated ``repeats[i]`` times along each axis ``i`` (ONNX ``Tile``)."""

    dims: tuple[Dim, ...]
    num_inputs = 2

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_tile")

    def infer(self, x: TensorType, repeats: TensorType) -> TensorType:
        _vector(repeats, "dynamic_tile: repeats", x.rank)
        self._check_dims(x.rank)
        return TensorType(x.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return dynamic_tile(inputs[0], inputs[1])

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:

        x, repeats = inputs
        rank = x.rank
        if rank == 0:
            return (ct, None)
        pairs = concat([reshape(repeats, [rank, 1]), reshape(shape_of(x), [rank, 1])], 1)
        split = dynamic_reshape(ct, reshape(pairs, [2 * rank]))
        summed = reduce_sum(split, list(range(0, 2 * rank, 2)), keep_dims=False)
        return (reshape_like(summed, x), None)


def dynamic_tile(x: Output, repeats: Output) -> Output:
    """``x`` repeated along each axis ``i`` ``repeats[i]`` times (an integer vector with one
    entry per axis; ONNX ``Tile``). Known repeats give :func:`~opgraph.ops.tile`."""
    known = known_value(repeats)
    if known is not None:
        return tile(x, _ints(known))
    result: Output = DynamicTile(_fresh("tile", x.rank))(x, repeats)
    return result


# ---------------------------------------------------------------------------------- top_k
@opclass
class DynamicTopK(ShapeTensorOp):
    """:func:`~opgraph.ops.top_k` with a run-time ``k`` (a one-element integer tensor)."""

    axis: int
    largest: bool
    sorted: bool
    dims: tuple[Dim, ...]
    num_inputs = 2
    multi_output = True
    differentiable = False

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_top_k")

    def infer(self, x: TensorType, k: TensorType) -> tuple[TensorType, TensorType]:
        _scalar_like(k, "dynamic_top_k: k")
        require(0 <= self.axis < x.rank, f"dynamic_top_k: axis {self.axis} outside {x}")
        self._check_dims(x.rank)
        return TensorType(x.element_type, self.dims), TensorType(et.i64, self.dims)

    def static(self, *inputs: Output) -> tuple[Output, Output]:
        return dynamic_top_k(inputs[0], inputs[1], self.axis, self.largest, self.sorted)

    def sized_axes(self) -> tuple[int, ...] | None:
        return (self.axis,)


def dynamic_top_k(
    x: Output,
    k: Output,
    axis: int = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002 - ONNX's name
) -> tuple[Output, Output]:
    """:func:`~opgraph.ops.top_k` with ``k`` a one-element integer tensor (ONNX ``TopK``):
    ``(values, indices i64)``; a run-time ``k`` is a fresh symbol at most the axis' size."""
    axis = normalize_axis(axis, x.rank)
    known = known_value(k)
    if known is not None:
        return top_k(x, int(np.asarray(known).reshape(-1)[0]), axis, largest, sorted)
    dims = tuple(_fresh("topk", 1, d)[0] if i == axis else d for i, d in enumerate(x.shape))
    result: tuple[Output, Output] = DynamicTopK(axis, bool(largest), bool(sorted), dims)(x, k)
    return result


# ---------------------------------------------------------------------------------- range
@opclass
class DynamicRange(ShapeTensorOp):
    """``[start, start + delta, ..)`` up to ``limit`` (exclusive) from run-time scalars (ONNX
    ``Range``): ``max(0, ceil((limit - start) / delta))`` elements of the inputs' type."""

    dims: tuple[Dim, ...]
    num_inputs = 3
    value_inputs = (0, 1, 2)
    differentiable = False

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_range")

    def infer(self, start: TensorType, limit: TensorType, delta: TensorType) -> TensorType:
        for what, t in (("start", start), ("limit", limit), ("delta", delta)):
            _scalar_like(t, f"dynamic_range: {what}")
            require(
                t.element_type is start.element_type and not t.element_type.is_boolean,
                f"dynamic_range: start, limit and delta must share one numeric type, got {t}",
            )
        self._check_dims(1)
        return TensorType(start.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return dynamic_range(*inputs)


def dynamic_range(start: Output, limit: Output, delta: Output) -> Output:
    """The ONNX ``Range`` of three scalar tensors of one numeric type; known values give a
    Constant, run-time ones a fresh length symbol."""
    values = [known_value(v) for v in (start, limit, delta)]
    if all(v is not None for v in values):
        a, b, d = (np.asarray(v).reshape(-1)[0] for v in values if v is not None)
        if d == 0:
            raise OpTypeError("dynamic_range: delta must be nonzero")
        count = max(0, int(np.ceil((b - a) / d)))
        dtype = start.element_type.dtype
        out = a + d * np.arange(count, dtype=np.float64 if dtype.kind == "f" else np.int64)
        return constant(np.asarray(out).astype(dtype), start.element_type)
    result: Output = DynamicRange(_fresh("range", 1))(start, limit, delta)
    return result


# ----------------------------------------------------------------------------------- fill
@opclass
class Fill(ShapeTensorOp):
    """A tensor of the run-time ``shape`` filled with the scalar ``value`` (ONNX
    ``ConstantOfShape``)."""

    dims: tuple[Dim, ...]
    num_inputs = 2
    value_inputs = (0,)

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "fill")

    def infer(self, shape: TensorType, value: TensorType) -> TensorType:
        self._check_dims(_vector(shape, "fill: shape"))
        require(value.rank == 0, f"fill: value must be a scalar, got {value}")
        return TensorType(value.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return fill(inputs[0], inputs[1])

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:

        return (None, reduce_sum(ct, list(range(ct.rank)), keep_dims=False) if ct.rank else ct)


def fill(shape: Output, value: Output) -> Output:
    """A tensor of shape ``shape`` (an integer vector) holding the scalar ``value`` everywhere
    (ONNX ``ConstantOfShape``); known shapes give a static broadcast."""
    known = known_value(shape)
    if known is not None:
        target = _ints(known)
        return broadcast(value, target, tuple(range(len(target)))) if target else value
    n = shape.shape[0] if shape.rank == 1 and type(shape.shape[0]) is int else 0
    result: Output = Fill(_fresh("fill", int(n)))(shape, value)
    return result


# --------------------------------------------------------------------------------- resize
@opclass
class DynamicResize(ShapeTensorOp):
    """:func:`~opgraph.ops.resize` to run-time output ``sizes`` (an integer vector, one entry
    per axis; ONNX ``Resize`` with a ``sizes`` input that is not a constant)."""

    mode: ResizeMode
    coordinate_transformation_mode: CoordinateTransformation
    nearest_mode: NearestMode
    dims: tuple[Dim, ...]
    num_inputs = 2
    differentiable = False  # a gradient needs the interpolation weights of run-time sizes

    def __post_init__(self) -> None:
        _check_dims_attribute(self.dims, "dynamic_resize")
        probe = Resize(
            None, (1.0,), self.mode, self.coordinate_transformation_mode, self.nearest_mode
        )
        for name in ("mode", "coordinate_transformation_mode", "nearest_mode"):
            object.__setattr__(self, name, getattr(probe, name))  # the canonical enums

    def infer(self, x: TensorType, sizes: TensorType) -> TensorType:
        _vector(sizes, "dynamic_resize: sizes", x.rank)
        if self.mode is ResizeMode.LINEAR:
            require(x.element_type.is_real, f"dynamic_resize: linear mode needs floats, got {x}")
        self._check_dims(x.rank)
        return TensorType(x.element_type, self.dims)

    def static(self, *inputs: Output) -> Output:
        return dynamic_resize(
            inputs[0], inputs[1], self.mode, self.coordinate_transformation_mode, self.nearest_mode
        )


def dynamic_resize(
    x: Output,
    sizes: Output,
    mode: Any = "nearest",
    coordinate_transformation_mode: Any = "half_pixel",
    nearest_mode: Any = "round_prefer_floor",
) -> Output:
    """:func:`~opgraph.ops.resize` with the output ``sizes`` an integer vector (one entry per
    axis) known at run time: the output dimensions are fresh symbols bound when it runs.
    Known sizes give :func:`~opgraph.ops.resize`. Not differentiable."""
    known = known_value(sizes)
    if known is not None:
        return resize(x, _ints(known), None, mode, coordinate_transformation_mode, nearest_mode)
    op = DynamicResize(mode, coordinate_transformation_mode, nearest_mode, _fresh("resize", x.rank))
    result: Output = op(x, sizes)
    return result
