"""Convolution and pooling as native steps (2-D, and 1-D as 2-D of height 1).

A convolution runs by blocks of output rows: each block's im2col patch matrix is built in a
per-thread scratch slice small enough to stay in L2, then multiplied by the group's filter
matrix with BLAS straight into the output. A 1x1 stride-1 unpadded convolution needs no
patches: the image itself is the right operand. Other shapes (3-D, data dilation, integer
types) run their reference kernels.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from opgraph.backends.fused import views
from opgraph.backends.fused.lowering.registry import STEP_OPS
from opgraph.backends.fused.program import BufferKind, ConvStep, PoolStep, WinogradStep
from opgraph.backends.fused.views import Literal, Operand, View
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.literals import Constant
from opgraph.core.node import Node
from opgraph.ops.conversion import Convert
from opgraph.ops.convolution import Convolution
from opgraph.ops.pooling import AvgPool, MaxPool

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder

#: Bytes of one thread's patch block: about half of an L2 cache.
PATCH_BYTES = 1 << 20
#: Columns (output pixels) per block: narrower products waste the GEMM.
MIN_COLUMNS = 256
#: Output planes smaller than this run as one GEMM over all images ("wide").
WIDE_BELOW = 256


def _as_2d(x: Operand, builder: ProgramBuilder, compute: ElementType) -> View:
    """``x`` as a rank-4 view of ``compute`` elements (rank 3 gains a height of 1)."""
    if isinstance(x, Literal) or x.element_type is not compute:
        op = Convert(compute) if x.element_type is not compute else None
        x = builder.materialize(x, compute, op)
    if len(x.shape) == 3:
        n, c, w = x.shape
        x = View(
            x.buffer, x.element_type, (n, c, 1, w), (*x.strides[:2], 0, x.strides[2]), x.offset
        )
    return x


def _pair(values: tuple[int, ...] | None, default: int) -> tuple[int, int]:
    values = values or (default,)
    return (default, values[0]) if len(values) == 1 else (values[0], values[1])


@STEP_OPS.register(Convolution)
def _convolution(builder: ProgramBuilder, node: Node) -> None:
    op = node.op
    assert isinstance(op, Convolution)
    x, w = node.inputs
    out = node.outputs[0]
    t = out.element_type
    if x.rank not in (3, 4) or any(d != 1 for d in op.data_dilations or ()):
        builder.fallback(node)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    compute = t if t in (et.f32, et.f64) else et.f32
    data = _as_2d(builder.operand(x), builder, compute)
    filters = _as_2d(builder.operand(w), builder, compute)
    o, cg, kh, kw = filters.shape
    matrix = views.reshape(filters, (o, cg * kh * kw))
    if not isinstance(matrix, View) or not matrix.is_dense:
        matrix = views.reshape(builder.materialize(filters), (o, cg * kh * kw))
    assert isinstance(matrix, View)
    shape4 = (out.shape[0], out.shape[1], 1 if out.rank == 3 else out.shape[2], out.shape[-1])
    dense = View(target.buffer, t, shape4, views.row_major_strides(shape4), target.offset)
    n, _, oh, ow = shape4
    if oh * ow < WIDE_BELOW:  # small outputs: one GEMM over all images, split by channels
        columns = n * oh * ow
        plane = dense if n == 1 and compute is t else builder.scratch(compute, (o, columns))
        plane = View(plane.buffer, compute, (o, columns), (columns, 1), plane.offset)
        builder.add_step(_conv_step(builder, node, data, matrix, plane, (kh, kw), shape4))
        # (O, N, OH, OW) back to (N, O, OH, OW), converted to the output type if needed.
        if plane.buffer != target.buffer:
            source = View(plane.buffer, compute, shape4, (oh * ow, columns, ow, 1), plane.offset)
            builder.materialize(source, t, Convert(t) if compute is not t else None, into=dense)
        return
    if compute is t and _winograd(builder, node, data, dense):
        return
    result = dense if compute is t else builder.scratch(compute, shape4)
    builder.add_step(_conv_step(builder, node, data, matrix, result, (kh, kw), shape4))
    if compute is not t:
        builder.materialize(result, t, Convert(t), into=dense)


#: Winograd needs this many tiles per unit for its 16 GEMMs to be worth running.
WINOGRAD_TILES = 48
#: Tiles a unit aims for (its transformed tiles and products stay in L2).
WINOGRAD_BLOCK = 128

# F(2x2, 3x3) filter transform: U = G g Gᵀ.
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)


def _winograd(builder: ProgramBuilder, node: Node, data: View, out: View) -> bool:
    """Lower a 3x3 stride-1 single-group f32 convolution with constant filters and enough
    output to Winograd F(2x2, 3x3); False when it does not qualify."""
    op = node.op
    assert isinstance(op, Convolution)
    filters = node.inputs[1].node.op
    n, c = data.shape[:2]
    o, oh, ow = out.shape[1:]
    plain = (
        isinstance(filters, Constant)
        and out.element_type is et.f32
        and op.groups == 1
        and node.inputs[0].rank == 4
        and filters.shape[2:] == (3, 3)
        and _pair(op.strides, 1) == (1, 1)
        and _pair(op.dilations, 1) == (1, 1)
        and min(_pair(op.padding_below, 0)) >= 0
        and data.strides[3] == 1
        and min(c, o) >= 16
    )
    if not plain:
        return False
    th, tw = -(-oh // 2), -(-ow // 2)
    rows = max(1, min(th, -(-WINOGRAD_BLOCK // tw)))
    if n * -(-th // rows) < 2 * builder.threads:
        rows = max(1, -(-th // max(1, -(-2 * builder.threads // n))))
    units = n * -(-th // rows)
    if rows * tw < min(WINOGRAD_TILES, th * tw) or rows * tw < WINOGRAD_TILES or units < 2:
        return False
    assert isinstance(filters, Constant)
    g = filters.value.astype(np.float64)
    u = np.einsum("ai,ocij,bj->aboc", _G, g, _G).reshape(16, o, c).astype(np.float32)
    buffer = builder.new_buffer(BufferKind.CONST, et.f32, u.shape, len(builder.constants()),
                                node.inputs[1], np.ascontiguousarray(u))  # fmt: skip
    transformed = View.dense(buffer.id, et.f32, u.shape)
    scratch = builder.scratch(et.f32, (builder.threads, 16 * (c + o) * rows * tw))
    step = WinogradStep(
        builder.describe(node), (node,), data, transformed, out, _pair(op.padding_below, 0), rows,
        scratch,
    )  # fmt: skip
    builder.add_step(step)
    return True


def _conv_step(
    builder: ProgramBuilder,
    node: Node,
    data: View,
    matrix: View,
    result: View,
    kernel: tuple[int, int],
    shape4: tuple[int, int, int, int],
) -> ConvStep:
    op = node.op
    assert isinstance(op, Convolution)
    strides = _pair(op.strides, 1)  # a 1-D convolution is 2-D with height 1: (1, s)
    dilations = _pair(op.dilations, 1)
    padding = _pair(op.padding_below, 0)
    k = matrix.shape[1]
    n, _, oh, ow = shape4
    wide = len(result.shape) == 2
    threads = builder.threads
    itemsize = result.element_type.itemsize
    # As many output rows per block as fit the patch budget (wide GEMMs are efficient), but at
    # least MIN_COLUMNS pixels, then fewer if the blocks would not feed every thread.
    fit = PATCH_BYTES // max(1, k * ow * itemsize)
    rows = max(1, min(oh, max(fit, -(-MIN_COLUMNS // ow))))
    if n * op.groups * -(-oh // rows) < 2 * threads:
        rows = max(1, min(rows, math.ceil(oh / max(1, -(-2 * threads // (n * op.groups))))))
    if wide:
        scratch = builder.scratch(result.element_type, (op.groups, k, n * oh * ow))
    else:
        scratch = builder.scratch(result.element_type, (threads, k, rows * ow))
    return ConvStep(
        builder.describe(node),
        (node,),
        data,
        matrix,
        result,
        kernel,
        strides,
        dilations,
        padding,
        op.groups,
        rows,
        scratch,
        wide,
        (n, oh, ow),
    )


def _pool(builder: ProgramBuilder, node: Node, maximum: bool) -> None:
    op = node.op
    assert isinstance(op, AvgPool | MaxPool)
    x = node.inputs[0]
    out = node.outputs[0]
    if x.rank not in (3, 4):
        builder.fallback(node)
        return
    target = builder.home(out)
    if out.tensor_type.size == 0:
        return
    data = builder.operand(x)
    if isinstance(data, Literal):
        data = builder.materialize(data)
    data = _as_2d(data, builder, data.element_type)
    one_d = x.rank == 3
    window = (1, op.window_shape[0]) if one_d else tuple(op.window_shape)
    strides = (1, op.strides[0]) if one_d and op.strides else _pair(op.strides, 1)
    below = (0, op.padding_below[0]) if one_d and op.padding_below else _pair(op.padding_below, 0)
    above = (0, op.padding_above[0]) if one_d and op.padding_above else _pair(op.padding_above, 0)
    dilations = (1, 1)
    if maximum:
        assert isinstance(op, MaxPool)
        d = op.window_dilations(x.rank - 2)
        dilations = (1, d[0]) if one_d else (d[0], d[1])
    h, w = data.shape[2:]
    shape4 = (out.shape[0], out.shape[1], 1 if one_d else out.shape[2], out.shape[-1])
    dense = View(
        target.buffer, target.element_type, shape4, views.row_major_strides(shape4), target.offset
    )
    step = PoolStep(
        builder.describe(node),
        (node,),
        data,
        dense,
        maximum,
        (int(window[0]), int(window[1])),
        strides,
        dilations,
        below,
        bool(getattr(op, "include_padding", False)),
        (h + below[0] + above[0], w + below[1] + above[1]),
    )
    builder.add_step(step)


STEP_OPS.add(MaxPool, lambda builder, node: _pool(builder, node, True))
STEP_OPS.add(AvgPool, lambda builder, node: _pool(builder, node, False))
