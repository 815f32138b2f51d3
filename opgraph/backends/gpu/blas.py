"""One cuBLAS call for a product of strided device arrays, planned without CuPy.

cuBLAS is column-major; a row-major product ``c = a @ b`` (``a`` m×k, ``b`` k×n, each
matrix with any element strides) is the column-major product ``cᵀ = bᵀ aᵀ``. A matrix whose
rows are contiguous (column stride 1) reads as a column-major matrix transposed without a
copy, one whose columns are contiguous as one transposed by the ``T`` operation. So every
operand with one unit stride maps to ``(op, leading dimension)``; ``c`` needs contiguous
rows. A batch (a leading axis) maps to the strided-batched call; a zero batch stride is
allowed (a broadcast operand). Anything else (zero or other strides inside a matrix, an
empty matrix) has no plan, and the runtime falls back to ``cupy.matmul``.

:func:`plan_gemm` is pure (the fake device runs the same plans, with numpy, to test it).
"""

from __future__ import annotations

from dataclasses import dataclass

from opgraph.backends.gpu.device import Strided
from opgraph.core import element_type as et


@dataclass(frozen=True)
class Operand:
    """A column-major cuBLAS operand: ``trans`` whether the call applies ``T``; ``ld`` the
    leading dimension and ``stride`` the batch stride, in elements."""

    ptr: int
    trans: bool
    ld: int
    stride: int


@dataclass(frozen=True)
class GemmPlan:
    """``C' = op(A') op(B')`` for ``batch`` entries; ``C'`` is m×n column-major, ``ldc``."""

    double: bool
    m: int
    n: int
    k: int
    a: Operand  # A' is the row-major ``b``
    b: Operand  # B' is the row-major ``a``
    c_ptr: int
    ldc: int
    c_stride: int
    batch: int


def _operand(ptr: int, rows: int, cols: int, rs: int, cs: int, stride: int) -> Operand | None:
    """The transposed view (cols × rows, column-major) of a rows × cols row-major matrix
    with element strides (rs, cs): ``N`` when rows are contiguous, ``T`` when columns are."""
    if cols == 1 or cs == 1:  # element (i, j) at i*rs + j: column-major cols×rows, ld rs
        ld = rs if rows > 1 else cols
        return Operand(ptr, False, ld, stride) if ld >= max(1, cols) else None
    if rows == 1 or rs == 1:  # element (i, j) at i + j*cs: column-major rows×cols, then T
        ld = cs if cols > 1 else rows
        return Operand(ptr, True, ld, stride) if ld >= max(1, rows) else None
    return None


def plan_gemm(a: Strided, b: Strided, c: Strided) -> GemmPlan | None:
    """The cuBLAS call computing ``c = a @ b`` (2-D operands, or 3-D with a batch axis of
    equal length), or None when the layouts need another path."""
    if c.element_type not in (et.f32, et.f64) or not (
        a.element_type is b.element_type is c.element_type
    ):
        return None
    rank = len(c.shape)
    if rank not in (2, 3) or len(a.shape) != rank or len(b.shape) != rank:
        return None
    batch = c.shape[0] if rank == 3 else 1
    if rank == 3 and not (a.shape[0] == b.shape[0] == batch):
        return None
    (m, k), (k2, n), (m2, n2) = a.shape[-2:], b.shape[-2:], c.shape[-2:]
    if k != k2 or m != m2 or n != n2 or 0 in (m, n, k, batch):
        return None
    sa, sb, sc = (s.strides[0] if rank == 3 else 0 for s in (a, b, c))
    if batch > 1 and sc == 0:
        return None
    if c.strides[-1] != 1 and n > 1:
        return None
    ldc = c.strides[-2] if m > 1 else n
    if ldc < max(1, n):
        return None
    first = _operand(b.ptr, k, n, b.strides[-2], b.strides[-1], sb)  # op(A') = bᵀ, n×k
    second = _operand(a.ptr, m, k, a.strides[-2], a.strides[-1], sa)  # op(B') = aᵀ, k×m
    if first is None or second is None:
        return None
    return GemmPlan(c.element_type is et.f64, n, m, k, first, second, c.ptr, ldc, sc, batch)
