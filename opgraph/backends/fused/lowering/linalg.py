"""Contractions: Dot becomes a BLAS call (f32/f64), a BLAS call between conversions (f16,
bf16: accumulated in f32 like the reference), or a generated wrapping loop (integers)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from opgraph.backends.fused import views
from opgraph.backends.fused.derived import derived
from opgraph.backends.fused.lowering.registry import REWRITES, STEP_OPS, SYMBOLIC_STEP_OPS
from opgraph.backends.fused.lowering.row_padding import unalias_rows
from opgraph.backends.fused.pages import huge_page_array
from opgraph.backends.fused.program import BufferKind, GemmStep
from opgraph.backends.fused.views import Literal, Operand, View, static
from opgraph.builders.broadcasting import numpy_broadcast_shape
from opgraph.core import element_type as et
from opgraph.core.dim import Dim, bounds, dim_max
from opgraph.core.element_type import ElementType
from opgraph.core.literals import Constant
from opgraph.core.node import Node, Output
from opgraph.core.shape import DimShape, static_shape
from opgraph.ops import elementwise, movement
from opgraph.ops.conversion import Convert
from opgraph.ops.linalg import Dot, MatMul

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

BLAS_TYPES = (et.f32, et.f64)
GEMV_PANEL = 16  # columns per panel of a repacked GEMV matrix: one AVX-512 vector
GEMM_PANEL = 32  # columns per panel of a repacked GEMM matrix: two vectors per row
#: Fewest columns a one-row product reads from one zero-padded panel instead of BLAS's sgemv:
#: the W3 MLP's 512 x 10 output layer took 0.65 µs more through sgemv than 512 x 16 through
#: the panel (a 3.3 µs call, 2026-11-26, H66); narrower matrices would read mostly padding.
GEMV_MIN_COLUMNS = 8
#: Fewest columns a product of several rows by a constant f32 matrix of at most
#: ``GEMV_PANEL`` columns reads from one zero-padded 16-column panel (the CPU's narrow
#: GEMM) instead of BLAS's sgemm (the W3 MLP's 256 x 512 @ 512 x 10 output layer).
NARROW_MIN_COLUMNS = 8


def blas_layout(view: View) -> tuple[bool, Dim] | None:
    """(transposed, leading dimension) of a 2-D view in BLAS's row-major terms, or None.

    With symbolic sizes, a layout is accepted only where it holds at every binding: the
    leading dimension is the other axis's stride and, unless that axis is static 1, at least
    ``max(1, extent)`` for every value of the symbols."""
    rows, cols = view.shape
    row_stride, col_stride = view.strides
    if type(rows) is int and type(cols) is int:
        return _static_layout(rows, cols, static(row_stride), static(col_stride))
    if col_stride == 1 and _leading(row_stride, rows, cols):
        return False, row_stride if rows != 1 else dim_max(cols, 1)
    if row_stride == 1 and _leading(col_stride, cols, rows):
        return True, col_stride if cols != 1 else dim_max(rows, 1)
    return None


def _leading(ld: Dim, own: Dim, other: Dim) -> bool:
    """Whether ``ld`` is a valid leading dimension for ``other`` columns at every binding
    (``own`` static 1: any, the stride is never used)."""
    if own == 1:
        return True
    wanted = dim_max(other, 1)
    return ld == wanted or bounds(ld - wanted)[0] >= 0


def _static_layout(
    rows: int, cols: int, row_stride: int, col_stride: int
) -> tuple[bool, Dim] | None:
    if cols == 1 or col_stride == 1:
        ld = row_stride if rows > 1 else max(cols, 1)
        if ld >= max(1, cols):
            return False, ld
    if rows == 1 or row_stride == 1:
        ld = col_stride if cols > 1 else max(rows, 1)
        if ld >= max(1, rows):
            return True, ld
    return None


def as_matrix(
    builder: ProgramBuilder, x: Operand, rows: Dim, cols: Dim, compute: ElementType
) -> View:
    """``x`` as a ``rows x cols`` view of ``compute`` elements that the GEMM can read."""
    if isinstance(x, Literal) or x.element_type is not compute:
        op = Convert(compute) if x.element_type is not compute else None
        x = builder.materialize(x, compute, op)
    shape = (rows, cols)  # expressions in a symbolic Program (core/shape.py)
    matrix = views.reshape(x, shape)
    if matrix is None:
        matrix = views.reshape(builder.materialize(x), shape)
    assert isinstance(matrix, View)
    if compute in BLAS_TYPES and blas_layout(matrix) is None:
        matrix = builder.materialize(matrix)
    return matrix


@STEP_OPS.register(Dot)
def _dot(builder: ProgramBuilder, node: Node) -> None:
    a, b = node.inputs
    out = node.outputs[0]
    assert isinstance(node.op, Dot) and node.op.reduction_axes_count is not None
    if builder.symbolic and not _native_on_symbols(node):
        builder.fallback(node)
        return
    n = node.op.reduction_axes_count
    rows = math.prod(a.shape[: a.rank - n])
    inner = math.prod(a.shape[a.rank - n :])
    cols = math.prod(b.shape[n:])
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    if inner == 0:
        builder.materialize(Literal(0, out.element_type, out.shape), into=target)
        return
    t = out.element_type
    compute = t if t in BLAS_TYPES or t.is_integral else et.f32
    source = builder.operand(a)
    left = as_matrix(builder, source, rows, inner, compute)
    dense = views.reshape(target, (rows, cols))
    assert isinstance(dense, View)
    result = dense if compute is t else builder.scratch(compute, (rows, cols))
    packed = _panels(builder, b, left, cols, compute)
    right = packed[0] if packed else as_matrix(builder, builder.operand(b), inner, cols, compute)
    if not packed:
        packed = _runtime_panels(builder, right, left)
        right = packed[0] if packed else right
    panel = packed[1] if packed else 0
    if panel == GEMM_PANEL:
        left = unalias_rows(builder, left, source)
    step = GemmStep(builder.describe(node), (node,), left, right, result, panel=panel)
    builder.add_step(step)
    if result is not dense:
        builder.materialize(result, t, Convert(t), into=dense)


def _panels(
    builder: ProgramBuilder, b: Output, left: View, cols: Dim, compute: ElementType
) -> tuple[View, int] | None:
    """A product by a constant f32 matrix reads the matrix as contiguous column panels,
    repacked once at compile time (what BLAS would do on every call): 16 wide for a one-row
    GEMV (one panel, zero-padded, down to ``GEMV_MIN_COLUMNS``) and for the narrow GEMM of
    static rows by ``NARROW_MIN_COLUMNS`` to 16 columns, 32 wide for the register-blocked GEMM
    (whose rows must be contiguous). None where the target reads plain matrices
    (``TargetFeatures.panels`` False: the GPU's cuBLAS)."""
    rows, inner = left.shape
    narrow = not builder.symbolic and type(cols) is int and cols <= GEMV_PANEL
    width = GEMV_PANEL if rows == 1 or narrow else GEMM_PANEL
    source, transposed = _constant_matrix(b, width == GEMV_PANEL)
    if not builder.features.panels or compute is not et.f32 or source is None:
        return None
    fewest = GEMV_MIN_COLUMNS if rows == 1 else NARROW_MIN_COLUMNS if narrow else width
    if type(cols) is not int or cols < fewest:
        return None
    if (type(rows) is not int or rows > 1) and left.strides[1] != 1:
        return None
    value = source.value
    shape = (int(inner), cols, width)
    if width == GEMM_PANEL and builder.features.panel_halves:  # the AVX2 tile's layout
        key = ("half panels", *shape)
        data = derived(value, key, lambda: halve_panels(_panel_data(value, *shape)))
    elif transposed:
        key = ("transposed panels", *shape)
        data = derived(value, key, lambda: _panel_data(value.T, *shape))
    else:
        data = derived(value, ("panels", *shape), lambda: _panel_data(value, *shape))
    buffer = builder.new_buffer(
        BufferKind.CONST, et.f32, data.shape, len(builder.constants()), b, data
    )
    return View(buffer.id, et.f32, (inner, cols), (width, inner * width), 0), width


def _constant_matrix(b: Output, gemv: bool) -> tuple[Constant | None, bool]:
    """(the constant ``b`` is, False), or for a 16-column panel product (``gemv``: the one-row
    GEMV, the narrow GEMM) (the 2-D constant
    ``b`` is the transpose of, True): ONNX's ``Gemm`` with ``transB`` (every exported
    ``Linear``) reads its weights transposed; else (None, False)."""
    op = b.node.op
    if isinstance(op, Constant):
        return op, False
    if not gemv or not isinstance(op, movement.Transpose) or op.perm != (1, 0):
        return None, False
    inner = b.node.inputs[0].node.op
    return (inner, True) if isinstance(inner, Constant) else (None, False)


#: Fewest rows of ``a`` for which a product by a run-time f32 matrix repacks the matrix as
#: 32-column panels (a copy step) for the panel GEMM instead of calling OpenBLAS.
RUNTIME_PANEL_ROWS = 512


def _runtime_panels(builder: ProgramBuilder, right: View, left: View) -> tuple[View, int] | None:
    """A product by a run-time f32 matrix with many rows: the matrix copied into 32-column
    panels (a copy step each call), read by the panel GEMM (whose row blocks share the
    panels between threads). None where the panel GEMM does not take it: a target without
    panels, a symbolic size, columns not a whole number of panels, rows of ``a`` not
    contiguous, too few rows to pay the copy."""
    rows, inner = left.shape
    cols = right.shape[1]
    if not builder.features.panels or right.element_type is not et.f32:
        return None
    if type(rows) is not int or type(inner) is not int or type(cols) is not int:
        return None
    if rows < RUNTIME_PANEL_ROWS or cols % GEMM_PANEL or left.strides[1] != 1:
        return None
    panels = builder.materialize(_panel_source(right, builder.features.panel_halves))
    view = View(
        panels.buffer, et.f32, (inner, cols), (GEMM_PANEL, inner * GEMM_PANEL), panels.offset
    )
    return view, GEMM_PANEL


def _panel_source(right: View, halves: bool) -> View:
    """``right`` (inner x cols, cols a whole number of panels) read in the panel GEMM's
    order: panel by panel, each as its two 16-column halves where the target's tile reads
    halves (``TargetFeatures.panel_halves``), so that a contiguous copy of it is the
    packed matrix."""
    inner, cols = static(right.shape[0]), static(right.shape[1])
    width = GEMM_PANEL // 2 if halves else GEMM_PANEL
    row_stride, col_stride = static(right.strides[0]), static(right.strides[1])
    return View(
        right.buffer,
        et.f32,
        (cols // width, inner, width),
        (width * col_stride, row_stride, col_stride),
        right.offset,
    )


def _panel_data(value: np.ndarray, inner: int, cols: int, width: int) -> np.ndarray:
    """The constant ``value`` read as an ``inner`` x ``cols`` matrix, in ``width``-column
    panels (cols/width, inner, width), zero-padded; a view (of ``value`` itself where no
    padding is needed) that :func:`~opgraph.backends.fused.derived.derived` writes into its
    place once."""
    matrix = value.reshape(inner, cols).astype(np.float32, copy=False)
    count = -(-cols // width)
    if cols % width:
        matrix = np.pad(matrix, ((0, 0), (0, count * width - cols)))
    return matrix.reshape(inner, count, width).transpose(1, 0, 2)


def halve_panels(panels: np.ndarray) -> np.ndarray:
    """``(count, inner, 32)`` GEMM panels with each panel stored as its two 16-column halves,
    ``inner x 16`` each, one after the other (``TargetFeatures.panel_halves``); the same
    shape and values, another order; from 2 MiB up on huge pages (``pages.huge_page_array``:
    ``panels`` may be a view, written once)."""
    count, inner, width = panels.shape
    halves = panels.reshape(count, inner, 2, width // 2).transpose(0, 2, 1, 3)
    return huge_page_array(halves).reshape(count, inner, width)


@REWRITES.register(Dot)
def _outer_product(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
    """A Dot that contracts nothing is an elementwise product of two broadcasts."""
    if not isinstance(node.op, Dot) or node.op.reduction_axes_count != 0:
        return None
    a, b = inputs
    shape = node.outputs[0].shape
    wide_a = movement.broadcast(a, shape, tuple(range(a.rank, len(shape))))
    wide_b = movement.broadcast(b, shape, tuple(range(a.rank)))
    return [elementwise.multiply(wide_a, wide_b)]


# --------------------------------------------------------------------------------- matmul
def _batch_strides(view: View, batch: DimShape, rank: int) -> list[Dim]:
    """Element strides of ``view``'s batch axes aligned to ``batch`` (0 where broadcast)."""
    own = view.shape[: rank - 2]
    strides = view.strides[: rank - 2]
    lead = len(batch) - len(own)
    zeros: list[Dim] = [0] * lead
    return zeros + [0 if d == 1 else s for d, s in zip(own, strides, strict=True)]


def _operand(builder: ProgramBuilder, x: Output, shape: DimShape, compute: ElementType) -> View:
    """``x`` re-viewed as ``shape`` in ``compute`` elements, each matrix BLAS-readable."""
    view = builder.operand(x)
    if isinstance(view, Literal) or view.element_type is not compute:
        op = Convert(compute) if view.element_type is not compute else None
        view = builder.materialize(view, compute, op)
    shaped = views.reshape(view, shape)
    if shaped is None:
        shaped = views.reshape(builder.materialize(view), shape)
    assert isinstance(shaped, View)
    matrix = View(shaped.buffer, compute, shape[-2:], shaped.strides[-2:], shaped.offset)
    if compute in BLAS_TYPES and blas_layout(matrix) is None:
        dense = views.reshape(builder.materialize(shaped), shape)
        assert isinstance(dense, View)
        shaped = dense
    return shaped


@STEP_OPS.register(MatMul)
def _matmul(builder: ProgramBuilder, node: Node) -> None:
    """Batched GEMM: one call per broadcast batch entry, or one call when the right operand
    has no batch (the left batch folds into rows)."""
    a, b = node.inputs
    out = node.outputs[0]
    a_shape = (1, *a.shape) if a.rank == 1 else a.shape
    b_shape = (*b.shape, 1) if b.rank == 1 else b.shape
    if builder.symbolic and not _native_on_symbols(node):
        builder.fallback(node)
        return
    target = builder.home(out)
    (n, k), m = a_shape[-2:], b_shape[-1]
    batch = numpy_broadcast_shape(a_shape[:-2], b_shape[:-2])
    if out.tensor_type.size == 0:
        return
    if k == 0:
        builder.materialize(Literal(0, out.element_type, out.shape), into=target)
        return
    t = out.element_type
    compute = t if t in BLAS_TYPES or t.is_integral else et.f32
    grid: tuple[tuple[Dim, Dim, Dim, Dim], ...] = ()
    if math.prod(b_shape[:-2]) == 1:
        rows = math.prod(a_shape[:-1])
        source = builder.operand(a)
        left = as_matrix(builder, source, rows, k, compute)
        packed = _panels(builder, b, left, m, compute)
        right = packed[0] if packed else as_matrix(builder, builder.operand(b), k, m, compute)
        if packed and packed[1] == GEMM_PANEL:
            left = unalias_rows(builder, left, source)
        batched: tuple[tuple[Dim, Dim, Dim], ...] = ((0, 0, 0),)
    else:
        av = _operand(builder, a, a_shape, compute)
        bv = _operand(builder, b, b_shape, compute)
        left = View(av.buffer, compute, (n, k), av.strides[-2:], av.offset)
        right = View(bv.buffer, compute, (k, m), bv.strides[-2:], bv.offset)
        rows = n
        if all(type(d) is int for d in batch):
            batched = _batch_offsets(av, bv, static_shape(batch), n * m)
        else:  # a symbolic batch: its entries are the positions of a grid
            batched, grid = ((0, 0, 0),), _batch_grid(av, bv, batch, n * m)
        packed = None
    dense = View(target.buffer, t, (rows, m), (m, 1), target.offset)
    scratch = (math.prod(batch) * rows, m)
    result = dense if compute is t else builder.scratch(compute, scratch)
    result = View(result.buffer, compute, (rows, m), (m, 1), result.offset)
    step = GemmStep(builder.describe(node), (node,), left, right, result, batched)
    step.panel = packed[1] if packed and batched == ((0, 0, 0),) else 0
    step.grid = grid
    builder.add_step(step)
    if compute is not t:
        source = View(result.buffer, compute, out.shape, target.strides, result.offset)
        builder.materialize(source, t, Convert(t), into=target)


def _native_on_symbols(node: Node) -> bool:
    """Whether a product in a symbolic Program is a native GEMM step: floating point (the
    integer loops are static only)."""
    return not node.outputs[0].element_type.is_integral


def _batch_grid(
    av: View, bv: View, batch: DimShape, block: Dim
) -> tuple[tuple[Dim, Dim, Dim, Dim], ...]:
    """Per batch axis: its size and the strides of a, b and the dense output in elements."""
    sa = _batch_strides(av, batch, len(av.shape))
    sb = _batch_strides(bv, batch, len(bv.shape))
    sc: list[Dim] = []
    for axis in range(len(batch)):
        sc.append(math.prod(batch[axis + 1 :]) * block)
    return tuple(zip(batch, sa, sb, sc, strict=True))


SYMBOLIC_STEP_OPS.update({Dot, MatMul})


def _batch_offsets(
    av: View, bv: View, batch: tuple[int, ...], block: Dim
) -> tuple[tuple[Dim, Dim, Dim], ...]:
    sa = _batch_strides(av, batch, len(av.shape))
    sb = _batch_strides(bv, batch, len(bv.shape))
    offsets = []
    for position, index in enumerate(itertools.product(*(range(d) for d in batch))):
        da: Dim = sum((i * s for i, s in zip(index, sa, strict=True)), 0)
        db: Dim = sum((i * s for i, s in zip(index, sb, strict=True)), 0)
        offsets.append((da, db, position * block))
    return tuple(offsets)
