"""Signal processing: DFT (forward, inverse and the one-sided forms) as products with
import-time Fourier matrices, STFT (frames gathered, windowed, transformed) and
MelWeightMatrix (import-time constant). The window functions come from their ONNX function
bodies."""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.converters.common import axis_of, expand_to, typed_constant
from opgraph.frontends.onnx.registry import onnx_op
from opgraph.frontends.onnx.types import from_onnx


def fourier_matrix(inputs: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The complex matrix ``M[n, k]`` with ``X = x @ M`` along the transformed axis.

    ``inputs`` is the input length on that axis (zero padding or truncation to ``length``
    falls out of the matrix shape). The inverse one-sided form (irfft) maps the half spectrum
    to a real signal: the weights double the frequencies that stand for a conjugate pair.
    """
    n = np.arange(inputs)[:, None]
    if inverse and onesided:
        used = min(inputs, length // 2 + 1)
        k = np.arange(used)[:, None]
        weights = np.full((used, 1), 2.0)
        weights[0] = 1.0
        if length % 2 == 0 and used == length // 2 + 1:
            weights[-1] = 1.0
        matrix = np.zeros((inputs, length), dtype=np.complex128)
        matrix[:used] = weights * np.exp(2j * np.pi * k * np.arange(length)[None, :] / length)
        return matrix / length
    outputs = length // 2 + 1 if onesided else length
    k = np.arange(outputs)[None, :]
    matrix = np.exp((2j if inverse else -2j) * np.pi * n * k / length)
    matrix[n[:, 0] >= length] = 0.0  # truncation: samples past the DFT length do not count
    return matrix / length if inverse else matrix


def dft(x: Output, axis: int, length: int, inverse: bool, onesided: bool) -> Output:
    """The DFT of ``x`` (last axis: 1 = real, 2 = real and imaginary) along ``axis``."""
    rank = x.rank
    parts = ops.split(x, rank - 1, x.shape[-1])
    real = ops.reshape(parts[0], list(x.shape[:-1]))
    imag = ops.reshape(parts[1], list(x.shape[:-1])) if len(parts) > 1 else None
    matrix = fourier_matrix(static_dim(x.shape[axis], "DFT's matrix"), length, inverse, onesided)
    out_real = _apply(real, axis, matrix.real, x)
    if imag is not None:
        out_real = ops.subtract(out_real, _apply(imag, axis, matrix.imag, x))
    if inverse and onesided:
        return ops.reshape(out_real, [*out_real.shape, 1])
    out_imag = _apply(real, axis, matrix.imag, x)
    if imag is not None:
        out_imag = ops.add(out_imag, _apply(imag, axis, matrix.real, x))
    return ops.stack([out_real, out_imag], rank - 1)


def _apply(value: Output, axis: int, matrix: np.ndarray, like: Output) -> Output:
    """``value`` times ``matrix`` along ``axis`` (the axis keeps its place)."""
    rank = value.rank
    order = [a for a in range(rank) if a != axis] + [axis]
    moved = ops.transpose(value, order) if axis != rank - 1 else value
    product = ops.dot(moved, typed_constant(matrix, like.element_type), 1)
    if axis == rank - 1:
        return product
    back = [0] * rank
    for position, source in enumerate(order):
        back[source] = position
    return ops.transpose(product, back)


def _dft(ctx: NodeContext, axis: int) -> Output:
    x = ctx.input(0)
    axis = axis_of(axis, x.rank)
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    if ctx.optional(1) is not None:
        length = int(ctx.const(1, "dft_length").reshape(-1)[0])
    else:
        size = static_dim(x.shape[axis], "DFT's default length")
        length = 2 * (size - 1) if inverse and onesided else size
    return dft(x, axis, length, inverse, onesided)


@onnx_op("DFT", since=17)
def _dft_v17(ctx: NodeContext) -> Output:
    return _dft(ctx, int(ctx.attr("axis", 1)))


@onnx_op("DFT", since=20)
def _dft_v20(ctx: NodeContext) -> Output:
    axis = -2 if ctx.optional(2) is None else int(ctx.const(2, "axis").reshape(-1)[0])
    return _dft(ctx, axis)


@onnx_op("STFT", since=17)
def _stft(ctx: NodeContext) -> Output:
    """Frames ``[batch, frames, frame_length, c]`` gathered from the signal, windowed, and
    transformed along the frame axis."""
    x = ctx.input(0)
    step = int(ctx.const(1, "frame_step").reshape(-1)[0])
    window = ctx.optional(2)
    if ctx.optional(3) is not None:
        frame = int(ctx.const(3, "frame_length").reshape(-1)[0])
    else:
        frame = static_dim(
            window.shape[0] if window is not None else x.shape[-2], "STFT's frame length"
        )
    frames = 1 + (static_dim(x.shape[1], "STFT's frame positions") - frame) // step
    positions = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    framed = ops.gather(x, constant(positions.astype(np.int64)), axis=1)
    if window is not None:
        framed = ops.multiply(framed, expand_to(window, framed.rank, [2], framed.shape))
    return dft(framed, 2, frame, inverse=False, onesided=bool(ctx.attr("onesided", 1)))


@onnx_op("MelWeightMatrix", since=17)
def _mel_weight_matrix(ctx: NodeContext) -> Output:
    """The triangular mel filter bank, computed at import time as the ONNX reference does."""
    bins = int(ctx.const(0, "num_mel_bins").reshape(-1)[0])
    length = int(ctx.const(1, "dft_length").reshape(-1)[0])
    rate = int(ctx.const(2, "sample_rate").reshape(-1)[0])
    low = float(ctx.const(3, "lower_edge_hertz").reshape(-1)[0])
    high = float(ctx.const(4, "upper_edge_hertz").reshape(-1)[0])
    matrix = mel_weights(bins, length, rate, low, high)
    code = ctx.attr("output_datatype")
    element_type = from_onnx(int(code), ctx.where) if code else from_onnx(1, ctx.where)
    return typed_constant(matrix, element_type)


def mel_weights(bins: int, length: int, rate: int, low: float, high: float) -> np.ndarray:
    """``[length // 2 + 1, bins]`` triangular filters between ``low`` and ``high`` hertz."""
    low_mel = 2595 * np.log10(1 + low / 700)
    high_mel = 2595 * np.log10(1 + high / 700)
    step = (high_mel - low_mel) / (bins + 2)
    hertz = 700 * (np.power(10, (np.arange(bins + 2) * step + low_mel) / 2595) - 1)
    edges = (((length + 1) * hertz) // rate).astype(int)
    output = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            output[center, i] = 1
        else:
            for j in range(left, center + 1):
                output[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            output[j, i] = (right - j) / (right - center)
    return output
