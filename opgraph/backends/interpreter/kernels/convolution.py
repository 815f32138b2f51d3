"""Reference kernels for convolutions: strided window views + one tensordot/einsum (im2col).

The interpreter runs whole models (ResNet-18) through these, so they avoid Python loops over
output positions: ``window_view`` exposes every window of the padded data as a strided view,
and a single contraction (BLAS through ``tensordot`` when there is one group) computes the
result. Float16/bfloat16 accumulate in f32.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from opgraph.backends.interpreter.kernels.registry import KERNELS, is_float
from opgraph.core.shape import static_shape
from opgraph.ops.convolution import (
    Convolution,
    ConvolutionBackpropData,
    ConvolutionBackpropFilters,
)

Array = np.ndarray[Any, Any]


def accumulator(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """f32 for f16 and bf16 (registry.accumulator misses bf16, whose numpy kind is "V")."""
    return np.dtype(np.float32) if is_float(dtype) and dtype.itemsize < 4 else dtype


def at(*parts: Any) -> Any:
    """An index tuple (numpy's stubs reject tuples mixing Ellipsis, slices and ints)."""
    return parts


def dilate(x: Array, dilations: Sequence[int]) -> Array:
    """Spread the trailing ``len(dilations)`` axes with ``d - 1`` zeros between elements."""
    if all(d == 1 for d in dilations):
        return x
    lead = x.ndim - len(dilations)
    shape = x.shape[:lead] + tuple(
        0 if n == 0 else (n - 1) * d + 1 for n, d in zip(x.shape[lead:], dilations, strict=True)
    )
    out = np.zeros(shape, x.dtype)
    out[at(Ellipsis, *(slice(None, None, d) for d in dilations))] = x
    return out


def pad_crop(x: Array, below: Sequence[int], above: Sequence[int], fill: Any = 0) -> Array:
    """Pad (positive) or crop (negative) the trailing axes; ``fill`` fills the padding."""
    if all(b == 0 for b in below) and all(a == 0 for a in above):
        return x
    lead = x.ndim - len(below)
    sizes = [n + b + a for n, b, a in zip(x.shape[lead:], below, above, strict=True)]
    out = np.full(x.shape[:lead] + tuple(sizes), fill, x.dtype)
    target, source = [], []
    for n, b, size in zip(x.shape[lead:], below, sizes, strict=True):
        low, high = max(0, b), min(size, n + b)
        if high <= low:
            return out
        target.append(slice(low, high))
        source.append(slice(low - b, high - b))
    out[at(Ellipsis, *target)] = x[at(Ellipsis, *source)]
    return out


def window_view(
    x: Array,
    window: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out: Sequence[int],
) -> Array:
    """A view ``(..., out1..outk, f1..fk)`` of every (dilated) window of the trailing axes."""
    k = len(window)
    extents = [(f - 1) * d + 1 for f, d in zip(window, dilations, strict=True)]
    view = sliding_window_view(x, extents, axis=tuple(range(x.ndim - k, x.ndim)))
    lead = (slice(None),) * (x.ndim - k)
    positions = tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides, strict=True))
    taps = tuple(slice(None, None, d) for d in dilations)
    return view[lead + positions + taps]


def _letters(count: int, start: int) -> str:
    """Einsum subscripts for spatial axes (lower case; batch/group/channel use upper case)."""
    return string.ascii_lowercase[start : start + count]


def _prepared(op: Convolution | ConvolutionBackpropFilters, x: Array) -> Array:
    assert op.data_dilations is not None and op.padding_below is not None
    assert op.padding_above is not None
    return pad_crop(dilate(x, op.data_dilations), op.padding_below, op.padding_above)


@KERNELS.register(Convolution)
def _convolution(op: Convolution, x: Array, w: Array) -> Array:
    assert op.strides is not None and op.dilations is not None
    wide = accumulator(x.dtype)
    out = static_shape(op.output_shape(x.shape, w.shape))
    k, g = x.ndim - 2, op.groups
    cols = window_view(
        _prepared(op, x.astype(wide)), w.shape[2:], op.strides, op.dilations, out[2:]
    )
    w = w.astype(wide)
    if g == 1:  # one BLAS matrix product over (C, f...)
        axes = [1, *range(2 + k, 2 + 2 * k)]
        result = np.tensordot(cols, w, axes=(axes, [1, *range(2, 2 + k)]))
        return np.moveaxis(result, -1, 1).astype(x.dtype)
    o_idx, f_idx = _letters(k, 0), _letters(k, k)
    n, c = x.shape[:2]
    grouped = cols.reshape(n, g, c // g, *cols.shape[2:])
    filters = w.reshape(g, w.shape[0] // g, *w.shape[1:])
    result = np.einsum(f"NGC{o_idx}{f_idx},GPC{f_idx}->NGP{o_idx}", grouped, filters, optimize=True)
    return result.reshape(out).astype(x.dtype)


@KERNELS.register(ConvolutionBackpropData)
def _backprop_data(op: ConvolutionBackpropData, x: Array, w: Array) -> Array:
    """col2im: every (input position, filter tap) product is added at
    ``o = i * stride + k * dilation``, then padding is cropped."""
    assert op.strides is not None and op.dilations is not None
    assert op.padding_below is not None and op.padding_above is not None
    assert op.output_padding is not None
    wide = accumulator(x.dtype)
    k, g = x.ndim - 2, op.groups
    n, c = x.shape[:2]
    d_idx, f_idx = _letters(k, 0), _letters(k, k)
    contributions = np.einsum(  # (N, G, O/G, d..., f...)
        f"NGC{d_idx},GCP{f_idx}->NGP{d_idx}{f_idx}",
        x.astype(wide).reshape(n, g, c // g, *x.shape[2:]),
        w.astype(wide).reshape(g, c // g, *w.shape[1:]),
        optimize=True,
    )
    data, taps = x.shape[2:], w.shape[2:]
    full_shape = [
        (d - 1) * s + (f - 1) * dl + 1
        for d, f, s, dl in zip(data, taps, op.strides, op.dilations, strict=True)
    ]
    full = np.zeros(contributions.shape[:3] + tuple(full_shape), wide)
    for tap in itertools.product(*(range(f) for f in taps)):
        region = tuple(
            slice(t * dl, t * dl + (d - 1) * s + 1, s)
            for t, d, s, dl in zip(tap, data, op.strides, op.dilations, strict=True)
        )
        full[at(Ellipsis, *region)] += contributions[at(Ellipsis, *tap)]
    full = full.reshape(n, -1, *full_shape)
    above = [p - a for a, p in zip(op.padding_above, op.output_padding, strict=True)]
    return pad_crop(full, [-b for b in op.padding_below], above).astype(x.dtype)


@KERNELS.register(ConvolutionBackpropFilters)
def _backprop_filters(op: ConvolutionBackpropFilters, x: Array, ct: Array) -> Array:
    assert op.strides is not None and op.dilations is not None
    wide = accumulator(x.dtype)
    k, g = x.ndim - 2, op.groups
    cols = window_view(
        _prepared(op, x.astype(wide)), op.filter_shape, op.strides, op.dilations, ct.shape[2:]
    )
    ct = ct.astype(wide)
    if g == 1:
        spatial = list(range(2, 2 + k))
        return np.tensordot(ct, cols, axes=([0, *spatial], [0, *spatial])).astype(x.dtype)
    o_idx, f_idx = _letters(k, 0), _letters(k, k)
    n, c = x.shape[:2]
    result = np.einsum(
        f"NGP{o_idx},NGC{o_idx}{f_idx}->GPC{f_idx}",
        ct.reshape(n, g, ct.shape[1] // g, *ct.shape[2:]),
        cols.reshape(n, g, c // g, *cols.shape[2:]),
        optimize=True,
    )
    return result.reshape(ct.shape[1], c // g, *op.filter_shape).astype(x.dtype)
