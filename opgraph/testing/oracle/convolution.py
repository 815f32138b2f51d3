"""Oracle entries for convolutions: direct loops over output positions and filter taps.

Each entry states the definition with index arithmetic (which data element a tap reads after
data dilation and padding), independently of the kernels' window views and col2im.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.ops.convolution import (
    Convolution,
    ConvolutionBackpropData,
    ConvolutionBackpropFilters,
)
from opgraph.testing.oracle.registry import ORACLE, narrow, wide


def _source(
    position: Sequence[int],
    tap: Sequence[int],
    op: Convolution | ConvolutionBackpropFilters,
    data: Sequence[int],
) -> tuple[int, ...] | None:
    """The data index read by filter ``tap`` at output ``position``, or None in padding."""
    assert op.strides is not None and op.dilations is not None
    assert op.padding_below is not None and op.data_dilations is not None
    index = []
    for o, t, s, dl, pb, dd, d in zip(
        position,
        tap,
        op.strides,
        op.dilations,
        op.padding_below,
        op.data_dilations,
        data,
        strict=True,
    ):
        q = o * s + t * dl - pb  # coordinate in the dilated, unpadded data
        if q < 0 or q % dd or q // dd >= d:
            return None
        index.append(q // dd)
    return tuple(index)


def _at(*parts: Any) -> Any:
    return parts


def _grid(shape: Sequence[int]) -> Any:
    return itertools.product(*(range(n) for n in shape))


@ORACLE.register(Convolution)
def _convolution(op: Convolution, x: np.ndarray, w: np.ndarray, out: Any) -> np.ndarray:
    xw, ww = wide(x), wide(w)
    g = op.groups
    c_per, o_per = x.shape[1] // g, w.shape[0] // g
    result = np.zeros(out[0].shape, np.float64)
    for position in _grid(out[0].shape[2:]):
        for tap in _grid(w.shape[2:]):
            source = _source(position, tap, op, x.shape[2:])
            if source is None:
                continue
            for group in range(g):
                cs = slice(group * c_per, (group + 1) * c_per)
                os_ = slice(group * o_per, (group + 1) * o_per)
                # (N, C/g) @ (C/g, O/g)
                result[_at(slice(None), os_, *position)] += (
                    xw[_at(slice(None), cs, *source)] @ ww[_at(os_, slice(None), *tap)].T
                )
    return narrow(result, out)


@ORACLE.register(ConvolutionBackpropData)
def _backprop_data(
    op: ConvolutionBackpropData, x: np.ndarray, w: np.ndarray, out: Any
) -> np.ndarray:
    """Scatter form: input ``i`` times tap ``k`` lands at ``i*stride + k*dilation - pb``."""
    assert op.strides is not None and op.dilations is not None
    assert op.padding_below is not None
    xw, ww = wide(x), wide(w)
    g = op.groups
    c_per, o_per = x.shape[1] // g, w.shape[1]
    shape = out[0].shape
    result = np.zeros(shape, np.float64)
    for position in _grid(x.shape[2:]):
        for tap in _grid(w.shape[2:]):
            target = [
                i * s + t * dl - pb
                for i, t, s, dl, pb in zip(
                    position, tap, op.strides, op.dilations, op.padding_below, strict=True
                )
            ]
            if any(o < 0 or o >= n for o, n in zip(target, shape[2:], strict=True)):
                continue
            for group in range(g):
                cs = slice(group * c_per, (group + 1) * c_per)
                os_ = slice(group * o_per, (group + 1) * o_per)
                result[_at(slice(None), os_, *target)] += (
                    xw[_at(slice(None), cs, *position)] @ ww[_at(cs, slice(None), *tap)]
                )
    return narrow(result, out)


@ORACLE.register(ConvolutionBackpropFilters)
def _backprop_filters(
    op: ConvolutionBackpropFilters, x: np.ndarray, ct: np.ndarray, out: Any
) -> np.ndarray:
    xw, cw = wide(x), wide(ct)
    g = op.groups
    c_per, o_per = x.shape[1] // g, ct.shape[1] // g
    result = np.zeros(out[0].shape, np.float64)
    for position in _grid(ct.shape[2:]):
        for tap in _grid(op.filter_shape):
            source = _source(position, tap, op, x.shape[2:])
            if source is None:
                continue
            for group in range(g):
                cs = slice(group * c_per, (group + 1) * c_per)
                os_ = slice(group * o_per, (group + 1) * o_per)
                # (O/g, N) @ (N, C/g)
                result[_at(os_, slice(None), *tap)] += (
                    cw[_at(slice(None), os_, *position)].T @ xw[_at(slice(None), cs, *source)]
                )
    return narrow(result, out)
