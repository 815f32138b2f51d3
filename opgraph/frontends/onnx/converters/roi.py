"""RoiAlign in the graph: with a fixed ``sampling_ratio`` every bin holds a static grid of
sample points whose coordinates follow from the (runtime) ROI boxes; each point is a bilinear
mix of four pixels read with ``gather_elements``, and a bin is the mean (or the max of the
weighted corners, as the ONNX reference) of its points. ``sampling_ratio=0`` (an adaptive grid
sized by each box) needs constant boxes and is refused otherwise."""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import full
from opgraph.frontends.onnx.registry import onnx_op


def _column(rois: Output, index: int) -> Output:
    """``rois[:, index]`` as ``[R, 1]``."""
    return ops.gather(rois, constant(np.array([index], dtype=np.int64)), axis=1)


def _points(start: Output, extent: Output, bins: int, grid: int) -> Output:
    """``[R, bins * grid]`` sample coordinates along one axis."""
    steps = (np.arange(bins)[:, None] + (np.arange(grid)[None, :] + 0.5) / grid).reshape(-1)
    offsets = constant(steps.astype(start.element_type.dtype))
    size = ops.divide(extent, full(bins, extent))  # [R, 1] bin size
    count = steps.shape[0]
    spread = (start.shape[0], count)
    return ops.add(
        ops.broadcast(ops.reshape(start, [start.shape[0]]), spread, (1,)),
        ops.multiply(
            ops.broadcast(ops.reshape(size, [size.shape[0]]), spread, (1,)),
            ops.broadcast(offsets, spread, (0,)),
        ),
    )


def _corners(p: Output, limit: int) -> tuple[Output, Output, Output, Output]:
    """``(low index, high index, low weight, high weight)`` of coordinates ``p`` (pre-clamped
    at 0), and the reference's rule at the upper border."""
    low = ops.floor(p)
    at_end = ops.greater_equal(low, full(limit - 1, p))
    low = ops.select(at_end, full(limit - 1, p), low)
    p = ops.select(at_end, low, p)
    high = ops.select(at_end, low, ops.add(low, full(1, p)))
    frac = ops.subtract(p, low)
    return low, high, ops.subtract(full(1, p), frac), frac


@onnx_op("RoiAlign", since=10)
def _roi_align(ctx: NodeContext) -> Output:
    x, rois, batch = ctx.input(0), ctx.input(1), ctx.input(2)
    ratio = int(ctx.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise ctx.fail("sampling_ratio=0 sizes the sampling grid by each box; give a ratio")
    out_h, out_w = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    scale = float(ctx.attr("spatial_scale", 1.0))
    half = ctx.opset >= 16 and str(ctx.attr("coordinate_transformation_mode", "half_pixel")) == (
        "half_pixel"
    )
    height, width = (static_dim(d, "RoiAlign's sampling bounds") for d in x.shape[2:4])
    box = [
        ops.subtract(
            ops.multiply(_column(rois, i), full(scale, _column(rois, i))),
            full(0.5 if half else 0.0, _column(rois, i)),
        )
        for i in range(4)
    ]
    extent_w, extent_h = ops.subtract(box[2], box[0]), ops.subtract(box[3], box[1])
    if not half:  # malformed boxes become 1 × 1
        extent_w, extent_h = (ops.maximum(e, full(1, e)) for e in (extent_w, extent_h))
    ys = _points(box[1], extent_h, out_h, ratio)  # [R, out_h * ratio]
    xs = _points(box[0], extent_w, out_w, ratio)
    count = (rois.shape[0], out_h * ratio, out_w * ratio)
    y = ops.broadcast(ys, count, (2,))
    xx = ops.broadcast(xs, count, (1,))
    inside = ops.logical_not(
        ops.logical_or(
            ops.logical_or(ops.less(y, full(-1.0, y)), ops.greater(y, full(height, y))),
            ops.logical_or(ops.less(xx, full(-1.0, xx)), ops.greater(xx, full(width, xx))),
        )
    )
    y0, y1, wy0, wy1 = _corners(ops.maximum(y, full(0, y)), height)
    x0, x1, wx0, wx1 = _corners(ops.maximum(xx, full(0, xx)), width)
    images = ops.gather(x, _index(batch), axis=0)  # [R, C, H, W]
    flat = ops.reshape(images, [rois.shape[0], x.shape[1], height * width])
    taps = []
    for row, wy in ((y0, wy0), (y1, wy1)):
        for col, wx in ((x0, wx0), (x1, wx1)):
            weight = ops.select(inside, ops.multiply(wy, wx), full(0, wy))
            position = ops.convert(ops.add(ops.multiply(row, full(width, row)), col), et.i64)
            taps.append(ops.multiply(_read(flat, position), _spread(weight, x.shape[1])))
    return _pool(ctx, taps, (rois.shape[0], x.shape[1], out_h, ratio, out_w, ratio))


def _index(batch: Output) -> Output:
    return batch if batch.element_type is et.i64 else ops.convert(batch, et.i64)


def _spread(value: Output, channels: Dim) -> Output:
    """``[R, A, B]`` → ``[R, C, A·B]``."""
    rows = value.shape[0]
    flat = ops.reshape(value, [rows, value.shape[1] * value.shape[2]])
    return ops.broadcast(flat, (rows, channels, flat.shape[1]), (1,))


def _read(flat: Output, position: Output) -> Output:
    return ops.gather_elements(flat, _spread(position, flat.shape[1]), axis=2)


def _pool(ctx: NodeContext, taps: list[Output], shape: tuple[Dim, ...]) -> Output:
    """Average the points of each bin, or take the max of the weighted corners."""
    if str(ctx.attr("mode", "avg")) == "max":
        value = ops.maximum(ops.maximum(taps[0], taps[1]), ops.maximum(taps[2], taps[3]))
        return ops.reduce_max(ops.reshape(value, list(shape)), [3, 5])
    value = ops.add(ops.add(taps[0], taps[1]), ops.add(taps[2], taps[3]))
    return ops.reduce_mean(ops.reshape(value, list(shape)), [3, 5])
