"""Reference kernels for pooling: strided window views, one reduction over the window axes."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.convolution import accumulator, pad_crop, window_view
from opgraph.backends.interpreter.kernels.registry import KERNELS, lowest
from opgraph.core.element_type import from_dtype
from opgraph.core.shape import static_shape
from opgraph.core.tensor_type import TensorType
from opgraph.ops.pooling import (
    AvgPool,
    MaxPool,
    MaxPoolBackprop,
    MaxPoolBase,
    MaxPoolWithIndices,
    Pool,
)

Array = np.ndarray[Any, Any]


def _geometry(op: Pool, x: Array) -> tuple[tuple[int, ...], list[int], tuple[int, ...]]:
    """(output spatial shape, padding above including what ceil mode needs, dilations)."""
    assert op.strides is not None and op.padding_above is not None
    assert op.padding_below is not None
    k = x.ndim - 2
    out = static_shape(op.output_spatial(TensorType(from_dtype(x.dtype), x.shape)))
    dilations = op.window_dilations(k)
    above = []
    for d, f, s, dl, pb, pa, o in zip(
        x.shape[2:],
        op.window_shape,
        op.strides,
        dilations,
        op.padding_below,
        op.padding_above,
        out,
        strict=True,
    ):
        reach = (o - 1) * s + (f - 1) * dl + 1  # the last window's end, in padded coordinates
        above.append(max(pa, reach - d - pb))
    return out, above, dilations


@KERNELS.register(AvgPool)
def _avg_pool(op: AvgPool, x: Array) -> Array:
    assert op.strides is not None and op.padding_below is not None
    out, above, dilations = _geometry(op, x)
    padded = pad_crop(x.astype(accumulator(x.dtype)), op.padding_below, above)
    windows = window_view(padded, op.window_shape, op.strides, dilations, out)
    sums = windows.sum(axis=tuple(range(-len(out), 0)))
    return (sums / op.divisor(x.shape[2:], out)).astype(x.dtype)


def _argmax(op: MaxPoolBase, x: Array) -> tuple[Array, Array]:
    """Window maxima and the flat input index of each (first maximum; first NaN)."""
    assert op.strides is not None and op.padding_below is not None
    out, above, dilations = _geometry(op, x)
    k = len(out)
    padded = pad_crop(x, op.padding_below, above, lowest(from_dtype(x.dtype)))
    windows = window_view(padded, op.window_shape, op.strides, dilations, out)
    flat = windows.reshape(*windows.shape[: 2 + k], -1)
    values = flat.max(axis=-1)
    # Padding never wins, even against data equal to the lowest value: search data taps only.
    inside = pad_crop(np.ones(x.shape[2:], bool), op.padding_below, above, False)
    inside_flat = window_view(inside, op.window_shape, op.strides, dilations, out)
    hit = flat == values[..., None]
    if flat.dtype.kind == "f" or flat.dtype.name == "bfloat16":
        hit |= np.isnan(flat) & np.isnan(values)[..., None]
    local = np.argmax(hit & inside_flat.reshape(*out, -1), axis=-1)
    taps = np.unravel_index(local, op.window_shape)
    grid = np.indices(x.shape[:2] + out, sparse=True)
    coordinates = [grid[0], grid[1]] + [
        o * s - pb + t * dl
        for o, s, pb, t, dl in zip(
            grid[2:], op.strides, op.padding_below, taps, dilations, strict=True
        )
    ]
    flat_index = np.ravel_multi_index(tuple(np.broadcast_arrays(*coordinates)), x.shape)
    return values, flat_index.astype(np.int64)


@KERNELS.register(MaxPool)
def _max_pool(op: MaxPool, x: Array) -> Array:
    assert op.strides is not None and op.padding_below is not None
    out, above, dilations = _geometry(op, x)
    padded = pad_crop(x, op.padding_below, above, lowest(from_dtype(x.dtype)))
    windows = window_view(padded, op.window_shape, op.strides, dilations, out)
    return np.asarray(windows.max(axis=tuple(range(-len(out), 0))))


@KERNELS.register(MaxPoolWithIndices)
def _max_pool_with_indices(op: MaxPoolWithIndices, x: Array) -> tuple[Array, Array]:
    return _argmax(op, x)


@KERNELS.register(MaxPoolBackprop)
def _max_pool_backprop(op: MaxPoolBackprop, x: Array, ct: Array) -> Array:
    _, index = _argmax(op, x)
    summed = np.bincount(index.ravel(), weights=ct.ravel().astype(np.float64), minlength=x.size)
    return summed.reshape(x.shape).astype(x.dtype)
