"""Data rearrangement: padding and block/depth rearrangement (pad, depth_to_space,
space_to_depth).

Pad semantics: the output is the window ``[-padding_below, dim + padding_above)`` of ``x``
extended without end by the mode (constant value, edge clamp, reflection without repeating the
edge, symmetric reflection repeating it); reflections repeat when the padding exceeds the
dimension (nGraph's ``pad_reflect_1d_multi_reflect``). A negative padding crops: the window starts
inside ``x``. The pad value is a scalar input (nGraph v0, ONNX Pad-11): the builder turns a
Python scalar into a constant checked to fit the element type, and the gradient flows to it.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.provenance import user_frame
from opgraph.core.shape import DimShape, as_int, as_int_tuple, maybe_le
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import (
    as_enum,
    fit_scalar,
    inverse_permutation,
    require_min_rank,
    require_same_element_type,
)
from opgraph.ops.elementwise import subtract
from opgraph.ops.indexing import scatter_nd
from opgraph.ops.movement import transpose, zeros
from opgraph.ops.reduction import reduce_sum

__all__ = [
    "PadMode",
    "Pad",
    "pad",
    "BlockMode",
    "DepthToSpace",
    "depth_to_space",
    "SpaceToDepth",
    "space_to_depth",
]


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
                maybe_le(0, lo + dim + hi),
                f"axis {axis}: padding ({lo}, {hi}) crops more than the dimension {dim}",
            )
            require(
                max(lo, hi) <= 0 or maybe_le(least, dim),
                f"axis {axis}: {self.mode.name.lower()} padding needs a dimension of at least "
                f"{least}, got {dim}",
            )
            shape.append(lo + dim + hi)
        return TensorType(x.element_type, tuple(shape))

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        if self.mode is not PadMode.CONSTANT:
            return _extension_adjoint(self, inputs[0], ct), None
        # The inverse window: crop what was padded, pad with zeros what was cropped.
        dx = pad(ct, [-b for b in self.padding_below], [-a for a in self.padding_above])
        every = tuple(range(ct.rank))
        return dx, subtract(reduce_sum(ct, every), reduce_sum(dx, every))


def _extension_adjoint(op: Pad, x: Output, ct: Output) -> Output:
    """Axis by axis (the extension is separable): sum the cotangent of every output position
    into the element of ``x`` it shows (a scatter-add); pure crops pad with zeros."""
    shape = x.static_shape("the gradient of an edge/reflect pad (a scatter per position)")
    for axis, (lo, dim, hi) in enumerate(
        zip(op.padding_below, shape, op.padding_above, strict=True)
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
    perm = (axis, *(a for a in range(ct.rank) if a != axis))
    moved = transpose(ct, perm)
    index = constant(np.asarray(sources, np.int64).reshape(-1, 1), et.i64)
    initial = zeros(ct.element_type, (dim, *moved.shape[1:]))
    summed = scatter_nd(initial, index, moved, reduction="add")
    return transpose(summed, inverse_permutation(perm))


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
            scalar = fit_scalar(value, x.element_type, "pad value")
        except OpTypeError as error:
            raise OpTypeError(f"Pad: {error} (built at {user_frame()})") from None
        value = constant(scalar, x.element_type)
    return Pad(padding_below, padding_above, mode)(x, value)


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

    def layout(self, x: DimShape) -> tuple[DimShape, tuple[int, ...], DimShape]:
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

    def layout(self, x: DimShape) -> tuple[DimShape, tuple[int, ...], DimShape]:
        k, bs = len(x) - 2, self.block_size
        depth, spatial = x[1] // bs**k, x[2:]
        if self.mode is BlockMode.BLOCKS_FIRST:
            split_shape = (x[0], *(bs,) * k, depth, *spatial)
            perm = (0, k + 1, *(a for i in range(k) for a in (k + 2 + i, 1 + i)))
        else:
            split_shape = (x[0], depth, *(bs,) * k, *spatial)
            perm = (0, 1, *(a for i in range(k) for a in (k + 2 + i, 2 + i)))
        return split_shape, perm, (x[0], depth, *(d * bs for d in spatial))

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (space_to_depth(ct, self.block_size, self.mode),)


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

    def layout(self, x: DimShape) -> tuple[DimShape, tuple[int, ...], DimShape]:
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

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (depth_to_space(ct, self.block_size, self.mode),)


def space_to_depth(x: Output, block_size: int, mode: Any = "blocks_first") -> Output:
    """Rearrange ``(N, C, D1..Dk)`` into ``(N, C * bs**k, D1/bs, .., Dk/bs)``; ``mode`` as for
    :func:`depth_to_space`, whose inverse this is."""
    return SpaceToDepth(block_size, mode)(x)
