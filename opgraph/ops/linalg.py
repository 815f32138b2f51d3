"""Contractions: the core ``Dot``, and the framework-level ``MatMul`` and ``Gemm`` defined by
decomposition into it."""

from __future__ import annotations

import math

import numpy as np

import opgraph.ops.movement as movement
from opgraph.core import element_type as et
from opgraph.core.dim import Dim, is_symbolic
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import DimShape
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import broadcast_to, numpy_broadcast_shape, scalar_like
from opgraph.ops.common import (
    as_bool,
    as_float,
    broadcasts_to,
    require_element_type,
    require_rank,
    require_same_element_type,
)
from opgraph.ops.elementwise import add, multiply
from opgraph.ops.movement import concat, reshape, transpose
from opgraph.ops.reduction import reduce_sum

__all__ = [
    "Dot",
    "dot",
    "MatMul",
    "matmul",
    "Gemm",
    "gemm",
]


@opclass
class Dot(Op):
    """Generalised dot: the last ``reduction_axes_count`` axes of ``a`` contract with the first
    ones of ``b`` (``numpy.tensordot(a, b, n)``). Default count: 0 if either operand is a
    scalar, else 1."""

    contracting = True  # each output element reads many input elements

    reduction_axes_count: int | None = None
    num_inputs = 2

    def canonicalize(self, a: TensorType, b: TensorType) -> Dot:
        if self.reduction_axes_count is not None:
            return self
        return Dot(0 if a.rank == 0 or b.rank == 0 else 1)

    def infer(self, a: TensorType, b: TensorType) -> TensorType:
        n = self.reduction_axes_count
        assert n is not None
        require_same_element_type((a, b))
        require_element_type(a, et.NUMERIC)
        require(
            0 <= n <= min(a.rank, b.rank),
            f"reduction_axes_count {n} exceeds the operand ranks ({a.rank}, {b.rank})",
        )
        a_axes = a.shape[a.rank - n :]
        b_axes = b.shape[:n]
        require(
            a_axes == b_axes,
            f"contracted dimensions differ: {list(a_axes)} of {a} vs {list(b_axes)} of {b}",
        )
        return TensorType(a.element_type, a.shape[: a.rank - n] + b.shape[n:])

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        a, b = inputs
        n = self.reduction_axes_count
        assert n is not None
        # a[I, K] · b[K, J]: da = ct[I, J] · b^T[J, K], db = a^T[K, I] · ct[I, J].
        b_t = transpose(b, list(range(n, b.rank)) + list(range(n)))
        a_t = transpose(a, list(range(a.rank - n, a.rank)) + list(range(a.rank - n)))
        return dot(ct, b_t, b.rank - n), dot(a_t, ct, a.rank - n)


def dot(a: Output, b: Output, reduction_axes_count: int | None = None) -> Output:
    """Contract the last ``reduction_axes_count`` axes of ``a`` with the first of ``b``."""
    return Dot(reduction_axes_count)(a, b)


# --------------------------------------------------------------------------------- matmul
def _as_matrices(a: DimShape, b: DimShape) -> tuple[DimShape, DimShape]:
    """NumPy's promotion: a 1-D ``a`` is a row ``[1, k]``, a 1-D ``b`` a column ``[k, 1]``."""
    return (a if len(a) >= 2 else (1, *a)), (b if len(b) >= 2 else (*b, 1))


def _matmul_result(a: DimShape, b: DimShape, batch: DimShape) -> DimShape:
    """The result shape: the batch, then ``n`` unless ``a`` is 1-D and ``m`` unless ``b`` is."""
    rows = a[-2:-1] if len(a) >= 2 else ()
    columns = b[-1:] if len(b) >= 2 else ()
    return batch + rows + columns


@opclass
class MatMul(Op):
    """NumPy ``matmul`` (ONNX ``MatMul``): matrix products over broadcast batch dimensions.

    Operands have rank >= 1. A 1-D ``a`` acts as a row ``[1, k]`` and a 1-D ``b`` as a column
    ``[k, 1]``, the added axis being dropped from the result; the leading (batch) dimensions
    broadcast NumPy-style. Numeric element types; integers wrap; the reference accumulates
    f16/bf16 in f32.

    Decomposes into ``Dot``: one ``Dot`` when only one operand has a batch, otherwise one per
    batch element joined by ``Concat``. The type rule and the adjoint are stated directly.
    """

    contracting = True  # each output element reads many input elements

    num_inputs = 2

    def infer(self, a: TensorType, b: TensorType) -> TensorType:
        require_same_element_type((a, b))
        require_element_type(a, et.NUMERIC)
        for name, t in (("a", a), ("b", b)):
            require(
                t.rank >= 1,
                f"operand {name} {t} is a scalar; matmul needs operands of rank >= 1 "
                "(use multiply to scale)",
            )
        a2, b2 = _as_matrices(a.shape, b.shape)
        require(
            a2[-1] == b2[-2],
            f"contracted dimensions differ: a {a} has {a2[-1]} columns, b {b} has {b2[-2]} rows",
        )
        return TensorType(a.element_type, _matmul_result(a.shape, b.shape, _batch(a2, b2)))

    def decompose(self, a: Output, b: Output) -> Output | None:
        a2s, b2s = _as_matrices(a.shape, b.shape)
        a2 = reshape(a, a2s) if a2s != a.shape else a
        b2 = reshape(b, b2s) if b2s != b.shape else b
        product = _batched_dot(a2, b2)
        if product is None:
            return None
        shape = _matmul_result(a.shape, b.shape, _batch(a2s, b2s))
        return reshape(product, shape) if product.shape != shape else product

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        a, b = inputs
        a2s, b2s = _as_matrices(a.shape, b.shape)
        a2, b2 = reshape(a, a2s), reshape(b, b2s)
        ct2 = reshape(ct, (*_batch(a2s, b2s), a2s[-2], b2s[-1]))
        # c = a·b per batch: da = ct·bᵀ, db = aᵀ·ct, summed over the axes a or b broadcast.
        da = _sum_to(matmul(ct2, _swap_last(b2)), a, a2s)
        db = _sum_to(matmul(_swap_last(a2), ct2), b, b2s)
        return da, db


def matmul(a: Output, b: Output) -> Output:
    """The matrix product of ``a`` and ``b`` with NumPy ``matmul`` semantics.

    Args:
        a: ``[..., n, k]`` or ``[k]`` (a row).
        b: ``[..., k, m]`` or ``[k]`` (a column).

    Returns:
        ``[broadcast(batch_a, batch_b)..., n, m]``, without ``n`` when ``a`` is 1-D and without
        ``m`` when ``b`` is 1-D (two vectors give a scalar).

    Raises:
        OpTypeError: a scalar operand, different element types, contracted dimensions that
            differ, or batch dimensions that do not broadcast.

    Example:
        ``matmul(f32[2,1,3,4], f32[5,4,2])`` has type ``f32[2,5,3,2]``.
    """
    return MatMul()(a, b)


def _batch(a2: DimShape, b2: DimShape) -> DimShape:
    try:
        return numpy_broadcast_shape(a2[:-2], b2[:-2])
    except OpTypeError:
        raise OpTypeError(
            f"batch dimensions {list(a2[:-2])} of a and {list(b2[:-2])} of b do not broadcast"
        ) from None


def _batched_dot(a: Output, b: Output) -> Output | None:
    """``matmul`` of operands of rank >= 2 with core ops; None when both operands are batched
    and the batch is symbolic (one ``Dot`` per matrix needs the count)."""
    (n, k), m = a.shape[-2:], b.shape[-1]
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    batch = numpy_broadcast_shape(batch_a, batch_b)
    size_a, size_b = math.prod(batch_a), math.prod(batch_b)
    if size_b == 1:  # one right matrix: fold a's batch into its rows
        rows = dot(reshape(a, (size_a * n, k)), reshape(b, (k, m)))
        return reshape(rows, (*batch, n, m))
    if size_a == 1:  # one left matrix: fold b's batch into its columns
        columns = reshape(b, (k, size_b, m), _move_axis_first(b.rank, b.rank - 2))
        product = dot(reshape(a, (n, k)), columns)
        return reshape(product, (*batch, n, m), (1, 0, 2))
    if any(is_symbolic(d) for d in batch):
        return None
    return _per_batch_dot(a, b, batch)


def _move_axis_first(rank: int, axis: int) -> tuple[int, ...]:
    return (axis, *(i for i in range(rank) if i != axis))


def _per_batch_dot(a: Output, b: Output, batch: DimShape) -> Output:
    """One ``Dot`` per element of the broadcast batch, each operand's matrix taken by a slice
    (a broadcast operand's matrix is sliced once and reused), joined by ``Concat``."""
    (n, _), m = a.shape[-2:], b.shape[-1]
    if math.prod(batch) == 0:
        return constant(np.zeros((*batch, n, m)), a.element_type)
    pick_a, pick_b = _Matrices(a, batch), _Matrices(b, batch)
    pieces = []
    for index in np.ndindex(*batch):
        pieces.append(reshape(dot(pick_a.at(index), pick_b.at(index)), (1, n, m)))
    return reshape(concat(pieces, 0), (*batch, n, m))


class _Matrices:
    """The matrices of a batched operand, sliced on demand and cached by flat index."""

    def __init__(self, x: Output, batch: DimShape) -> None:
        self.batch = x.shape[:-2]
        self.offset = len(batch) - len(self.batch)
        self.rows, self.columns = x.shape[-2:]
        self.flat = reshape(x, (math.prod(self.batch), self.rows, self.columns))
        self.cache: dict[Dim, Output] = {}

    def at(self, index: tuple[int, ...]) -> Output:
        flat: Dim = 0
        for axis, dim in enumerate(self.batch):
            flat = flat * dim + (index[self.offset + axis] if dim != 1 else 0)
        if flat not in self.cache:
            piece = movement.slice(self.flat, (flat, 0, 0), (flat + 1, self.rows, self.columns))
            self.cache[flat] = reshape(piece, (self.rows, self.columns))
        return self.cache[flat]


def _swap_last(x: Output) -> Output:
    perm = list(range(x.rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return transpose(x, perm)


def _sum_to(grad: Output, x: Output, promoted: DimShape) -> Output:
    """``grad`` (shaped ``batch + promoted[-2:]``) summed over the batch axes along which ``x``
    (``promoted`` as a matrix) was broadcast, then reshaped to ``x``'s own shape."""
    lead = grad.rank - len(promoted)
    axes = list(range(lead))
    axes += [lead + i for i, d in enumerate(promoted[:-2]) if d == 1 and grad.shape[lead + i] != 1]
    if axes:
        grad = reduce_sum(grad, axes)
    return reshape(grad, x.shape) if grad.shape != x.shape else grad


# ----------------------------------------------------------------------------------- gemm
@opclass
class Gemm(Op):
    """ONNX ``Gemm``: ``alpha · op(a) · op(b) + beta · c``.

    ``op(x)`` is ``xᵀ`` when ``trans_x`` is set. ``op(a)`` is ``[m, k]``, ``op(b)`` ``[k, n]``;
    the optional ``c`` broadcasts unidirectionally (NumPy rules) to ``[m, n]``. Numeric element
    types; for integer types ``alpha`` and ``beta`` must be integral.

    Attributes:
        alpha: the product's factor.
        beta: ``c``'s factor (unused without ``c``).
        trans_a: transpose ``a`` first.
        trans_b: transpose ``b`` first.
    """

    contracting = True  # each output element reads many input elements

    alpha: float = 1.0
    beta: float = 1.0
    trans_a: bool = False
    trans_b: bool = False

    def __post_init__(self) -> None:
        set_attr(self, "alpha", as_float(self.alpha, "alpha"))
        set_attr(self, "beta", as_float(self.beta, "beta"))
        set_attr(self, "trans_a", as_bool(self.trans_a, "trans_a"))
        set_attr(self, "trans_b", as_bool(self.trans_b, "trans_b"))

    def canonicalize(self, *inputs: TensorType) -> Gemm:
        require(len(inputs) in (2, 3), f"expected 2 or 3 inputs (a, b[, c]), got {len(inputs)}")
        require_same_element_type(inputs)
        a, b = inputs[:2]
        require_element_type(a, et.NUMERIC)
        require_rank(a, 2, "a")
        require_rank(b, 2, "b")
        (m, k), (k2, n) = _op_shape(a.shape, self.trans_a), _op_shape(b.shape, self.trans_b)
        require(
            k == k2,
            f"inner dimensions differ: op(a) is [{m}, {k}], op(b) is [{k2}, {n}] "
            f"(trans_a={self.trans_a}, trans_b={self.trans_b})",
        )
        if len(inputs) == 3:
            c = inputs[2]
            require(
                broadcasts_to(c.shape, (m, n)),
                f"c shape {list(c.shape)} does not broadcast to the product shape [{m}, {n}]",
            )
        if a.element_type.is_integral:
            for name, value in (("alpha", self.alpha), ("beta", self.beta)):
                require(
                    value.is_integer(),
                    f"{name} {value} must be integral for element type {a.element_type.name}",
                )
        return self

    def decompose(self, a: Output, b: Output, c: Output | None = None) -> Output:
        product = dot(transpose(a) if self.trans_a else a, transpose(b) if self.trans_b else b)
        if self.alpha != 1.0:
            product = multiply(product, scalar_like(_integral(self.alpha, a), product))
        if c is None:
            return product
        addend = broadcast_to(c, product.shape)
        if self.beta != 1.0:
            addend = multiply(addend, scalar_like(_integral(self.beta, a), addend))
        return add(product, addend)


def _op_shape(shape: DimShape, transposed: bool) -> DimShape:
    return shape[::-1] if transposed else shape


def _integral(value: float, like: Output) -> float | int:
    return int(value) if like.element_type.is_integral else value


def gemm(
    a: Output,
    b: Output,
    c: Output | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> Output:
    """ONNX ``Gemm``: ``alpha · op(a) · op(b) + beta · c`` on matrices.

    Args:
        a: ``[m, k]`` (``[k, m]`` with ``trans_a``).
        b: ``[k, n]`` (``[n, k]`` with ``trans_b``).
        c: optional addend, broadcastable to ``[m, n]``.
        alpha, beta: scalar factors.
        trans_a, trans_b: transpose the operand first.

    Returns:
        ``[m, n]``.

    Raises:
        OpTypeError: operands that are not matrices, inner dimensions that differ, a ``c``
            that does not broadcast to ``[m, n]``, or a fractional factor for integers.
    """
    inputs = (a, b) if c is None else (a, b, c)
    return Gemm(alpha, beta, trans_a, trans_b)(*inputs)
