"""GridSample as gathers: the grid's coordinates are denormalised, folded into range by the
padding mode, and split into interpolation taps (1 for nearest, 2 per axis for linear, 4 for
cubic); each combination of taps reads the image with one ``gather_elements`` on the flattened
spatial axes and is weighted by the product of its per-axis weights (the ONNX reference's
arithmetic, vectorised)."""

from __future__ import annotations

import itertools

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import full, prod
from opgraph.frontends.onnx.registry import onnx_op

Tap = tuple[Output, Output]  # (integer-valued float index, weight)

_CUBIC_A = -0.75


def _reflect(x: Output, low: float, high: float) -> Output:
    """Fold ``x`` into ``[low, high]`` by reflecting at the nearer border, repeatedly."""
    span = full(high - low, x)

    def fold(distance: Output, near: float, far: float) -> Output:
        turns = ops.floor(ops.divide(distance, span))
        rest = ops.subtract(distance, ops.multiply(turns, span))
        even = ops.equal(ops.mod(turns, full(2, x), fmod=True), full(0, x))
        toward = 1.0 if near < far else -1.0
        return ops.select(
            even,
            ops.add(full(near, x), ops.multiply(rest, full(toward, x))),
            ops.subtract(full(far, x), ops.multiply(rest, full(toward, x))),
        )

    from_low = fold(ops.subtract(full(low, x), x), low, high)
    from_high = fold(ops.subtract(x, full(high, x)), high, low)
    below, above = ops.less(x, full(low, x)), ops.greater(x, full(high, x))
    return ops.select(below, from_low, ops.select(above, from_high, x))


def _cubic_weights(t: Output) -> list[Output]:
    a = _CUBIC_A

    def near(d: Output) -> Output:  # |d| <= 1
        return ops.add(
            ops.multiply(
                ops.multiply(ops.subtract(ops.multiply(full(a + 2, d), d), full(a + 3, d)), d), d
            ),
            full(1, d),
        )

    def far(d: Output) -> Output:  # 1 < |d| < 2
        inner = ops.add(
            ops.multiply(ops.subtract(ops.multiply(full(a, d), d), full(5 * a, d)), d),
            full(8 * a, d),
        )
        return ops.subtract(ops.multiply(inner, d), full(4 * a, d))

    one = full(1, t)
    return [
        far(ops.add(t, one)),
        near(t),
        near(ops.subtract(one, t)),
        far(ops.subtract(full(2, t), t)),
    ]


def _taps(x: Output, mode: str) -> list[Tap]:
    if mode == "nearest":
        return [(x, full(1, x))]
    base = ops.floor(x)
    t = ops.subtract(x, base)
    if mode == "linear":
        return [(base, ops.subtract(full(1, x), t)), (ops.add(base, full(1, x)), t)]
    weights = _cubic_weights(t)
    return [
        (ops.add(base, full(offset, x)), w)
        for offset, w in zip((-1, 0, 1, 2), weights, strict=True)
    ]


def _place(
    index: Output, size: int, padding: str, border: tuple[float, float]
) -> tuple[Output, Output | None]:
    """An in-range integer index for a tap, and for zeros padding the in-range mask."""
    if padding == "zeros":
        valid = ops.logical_and(
            ops.greater_equal(index, full(0, index)), ops.less(index, full(size, index))
        )
        clamped = ops.clamp(index, 0.0, float(size - 1))
        return ops.convert(clamped, et.i64), valid
    if padding == "border":
        return ops.convert(ops.clamp(index, 0.0, float(size - 1)), et.i64), None
    folded = ops.convert(_reflect(index, *border), et.i64)
    return ops.convert(
        ops.clamp(ops.convert(folded, index.element_type), 0.0, float(size - 1)), et.i64
    ), None


def _coordinates(
    grid: Output,
    dims: list[int],
    align: bool,
    mode: str,
    padding: str,
    borders: list[tuple[float, float]],
) -> list[Output]:
    k = len(dims)
    parts = ops.split(grid, grid.rank - 1, k)
    coords = []
    for i, size in enumerate(dims):
        n = ops.reshape(parts[k - 1 - i], list(grid.shape[:-1]))
        one = full(1, n)
        if align:
            x = ops.multiply(ops.divide(ops.add(n, one), full(2, n)), full(size - 1, n))
        else:
            x = ops.divide(
                ops.subtract(ops.multiply(ops.add(n, one), full(size, n)), one), full(2, n)
            )
        if mode == "nearest":
            x = ops.round(x)
        if padding == "border":
            low, high = borders[i]
            outside = ops.logical_or(ops.less(x, full(low, x)), ops.greater(x, full(high, x)))
            x = ops.select(outside, ops.clamp(x, 0.0, float(size - 1)), x)
        elif padding == "reflection":
            x = _reflect(x, *borders[i])
        if mode == "nearest":
            x = ops.convert(ops.convert(x, et.i64), x.element_type)  # truncation, as int()
        coords.append(x)
    return coords


@onnx_op("GridSample", since=16)
def _grid_sample(ctx: NodeContext) -> Output:
    x, grid = ctx.input(0), ctx.input(1)
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(
        str(ctx.attr("mode", "linear")), str(ctx.attr("mode", "linear"))
    )
    padding = str(ctx.attr("padding_mode", "zeros"))
    align = bool(ctx.attr("align_corners", 0))
    if ctx.opset < 20 and str(ctx.attr("mode", "bilinear")) == "bilinear":
        mode = "linear"
    dims = [static_dim(d, "GridSample's borders") for d in x.shape[2:]]
    borders = [(0.0, d - 1.0) if align else (-0.5, d - 0.5) for d in dims]
    coords = _coordinates(grid, dims, align, mode, padding, borders)
    per_axis = [_taps(c, mode) for c in coords]
    batch, channels = x.shape[0], x.shape[1]
    out_points = prod(grid.shape[1:-1])
    flat = ops.reshape(x, [batch, channels, prod(dims)])
    strides = [prod(dims[i + 1 :]) for i in range(len(dims))]
    total: Output | None = None
    for combination in itertools.product(*per_axis):
        index, weight, valid = None, None, None
        for axis, (position, w) in enumerate(combination):
            placed, mask = _place(position, dims[axis], padding, borders[axis])
            term = ops.multiply(placed, full(strides[axis], placed))
            index = term if index is None else ops.add(index, term)
            weight = w if weight is None else ops.multiply(weight, w)
            valid = (
                mask if valid is None else (valid if mask is None else ops.logical_and(valid, mask))
            )
        assert index is not None and weight is not None
        if valid is not None:
            weight = ops.select(valid, weight, full(0, weight))
        gathered = ops.gather_elements(flat, _spread(index, batch, channels, out_points), axis=2)
        value = ops.multiply(gathered, _spread(weight, batch, channels, out_points))
        total = value if total is None else ops.add(total, value)
    assert total is not None
    return ops.reshape(total, [batch, channels, *grid.shape[1:-1]])


def _spread(value: Output, batch: Dim, channels: Dim, points: Dim) -> Output:
    """``[N, O...]`` flattened and broadcast over channels: ``[N, C, prod(O)]``."""
    flat = ops.reshape(value, [batch, points])
    return ops.broadcast(flat, (batch, channels, points), (1,))
