"""DeformConv (2-D): each kernel tap samples the input at its grid position plus a learned
offset, bilinearly with zeros outside (four ``gather_elements`` reads), scaled by the optional
mask; the sampled columns ``[N, C·K, L]`` then meet the filters in one grouped ``matmul``."""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import expand_to, full, typed_constant
from opgraph.frontends.onnx.registry import onnx_op


def _grid(size: int, out: int, stride: int, pad: int, kernel: int, dilation: int) -> np.ndarray:
    """``[kernel, out]`` base coordinates along one axis."""
    return np.arange(kernel)[:, None] * dilation + np.arange(out)[None, :] * stride - pad


@onnx_op("DeformConv", since=19)
def _deform_conv(ctx: NodeContext) -> Output:
    x, w, offset = ctx.input(0), ctx.input(1), ctx.input(2)
    if x.rank != 4:
        raise ctx.fail("only 2-D DeformConv is supported")
    n, c = x.shape[:2]
    grid = "DeformConv's sampling grid"
    height, width, kh, kw, out_h, out_w = (
        static_dim(d, grid)
        for d in (x.shape[2], x.shape[3], w.shape[2], w.shape[3], offset.shape[2], offset.shape[3])
    )
    strides = [int(s) for s in ctx.attr("strides", [1, 1])]
    dilations = [int(d) for d in ctx.attr("dilations", [1, 1])]
    pads = [int(p) for p in ctx.attr("pads", [0, 0, 0, 0])]
    groups, offset_groups = int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))
    layout = [n, offset_groups, kh, kw, 2, out_h, out_w]
    shifts = ops.reshape(offset, layout)
    rows = _axis(shifts, 0, _grid(height, out_h, strides[0], pads[0], kh, dilations[0]), 2)
    cols = _axis(shifts, 1, _grid(width, out_w, strides[1], pads[1], kw, dilations[1]), 3)
    samples = _bilinear(x, rows, cols, offset_groups)  # [N, G_off, C/G_off, K·L]
    taps, points = kh * kw, out_h * out_w
    samples = ops.reshape(samples, [n, offset_groups, c // offset_groups, taps, points])
    mask = ctx.optional(4)
    if mask is not None:
        weights = ops.reshape(mask, [n, offset_groups, taps, points])
        samples = ops.multiply(samples, expand_to(weights, 5, [0, 1, 3, 4], samples.shape))
    columns = ops.reshape(samples, [n, groups, (c // groups) * taps, points])
    filters = ops.reshape(w, [1, groups, w.shape[0] // groups, (c // groups) * taps])
    y = ops.reshape(ops.matmul(filters, columns), [n, w.shape[0], out_h, out_w])
    bias = ctx.optional(3)
    return y if bias is None else ops.add(y, expand_to(bias, 4, [1], y.shape))


def _axis(shifts: Output, component: int, base: np.ndarray, tap_axis: int) -> Output:
    """Sampling coordinates ``[N, G, kh, kw, oh, ow]`` along one axis: base + offset."""
    grid_sizes = (shifts.shape[2], shifts.shape[3], shifts.shape[5], shifts.shape[6])
    kh, kw, out_h, out_w = (static_dim(d, "DeformConv's sampling grid") for d in grid_sizes)
    picked = ops.gather(shifts, constant(np.array(component, dtype=np.int64)), axis=4)
    if tap_axis == 2:
        grid = base[:, None, :, None] + np.zeros((1, kw, 1, out_w))
    else:
        grid = base[None, :, None, :] + np.zeros((kh, 1, out_h, 1))
    shaped = typed_constant(grid, shifts.element_type)
    return ops.add(picked, expand_to(shaped, 6, [2, 3, 4, 5], picked.shape))


def _bilinear(x: Output, rows: Output, cols: Output, groups: int) -> Output:
    """``x`` read at (rows, cols) per offset group, zero outside: ``[N, G, C/G, K·L]``."""
    n, c = x.shape[:2]
    height, width = (static_dim(d, "DeformConv's bilinear sampling") for d in x.shape[2:])
    count = rows.tensor_type.size // (n * groups)
    flat_x = ops.reshape(x, [n, groups, c // groups, height * width])
    r0, c0 = ops.floor(rows), ops.floor(cols)
    total: Output | None = None
    for dr in (0, 1):
        for dc in (0, 1):
            r, cc = ops.add(r0, full(dr, r0)), ops.add(c0, full(dc, c0))
            weight = ops.multiply(_share(rows, r), _share(cols, cc))
            valid = ops.logical_and(_inside(r, height), _inside(cc, width))
            weight = ops.select(valid, weight, full(0, weight))
            r_safe = ops.clamp(r, 0.0, float(height - 1))
            c_safe = ops.clamp(cc, 0.0, float(width - 1))
            position = ops.add(ops.multiply(r_safe, full(width, r_safe)), c_safe)
            flat_index = ops.reshape(ops.convert(position, et.i64), [n, groups, count])
            index = ops.broadcast(flat_index, (n, groups, c // groups, count), (2,))
            read = ops.gather_elements(flat_x, index, axis=3)
            spread = ops.broadcast(ops.reshape(weight, [n, groups, count]), read.shape, (2,))
            term = ops.multiply(read, spread)
            total = term if total is None else ops.add(total, term)
    assert total is not None
    return total


def _share(coordinate: Output, corner: Output) -> Output:
    """The bilinear weight ``1 - |coordinate - corner|`` of a neighbouring corner."""
    distance = ops.abs(ops.subtract(coordinate, corner))
    return ops.subtract(full(1, distance), distance)


def _inside(index: Output, size: int) -> Output:
    return ops.logical_and(
        ops.greater_equal(index, full(0, index)), ops.less(index, full(size, index))
    )
