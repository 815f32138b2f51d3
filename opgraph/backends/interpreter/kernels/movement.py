"""Reference kernels for data movement. Pad pads then crops (the window over the extension)."""

from __future__ import annotations

import builtins

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.core.errors import ExecutionError
from opgraph.ops import movement as mv


@KERNELS.register(mv.Broadcast)
def _broadcast(op: mv.Broadcast, x: np.ndarray) -> np.ndarray:
    expanded = np.expand_dims(x, op.broadcast_axes) if op.broadcast_axes else x
    return np.broadcast_to(expanded, op.shape)


@KERNELS.register(mv.Reshape)
def _reshape(op: mv.Reshape, x: np.ndarray) -> np.ndarray:
    return np.transpose(x, op.input_order).reshape(op.output_shape)


@KERNELS.register(mv.Transpose)
def _transpose(op: mv.Transpose, x: np.ndarray) -> np.ndarray:
    return np.transpose(x, op.perm)


@KERNELS.register(mv.Slice)
def _slice(op: mv.Slice, x: np.ndarray) -> np.ndarray:
    assert op.strides is not None
    index = tuple(
        builtins.slice(lo, hi, step)
        for lo, hi, step in zip(op.lower_bounds, op.upper_bounds, op.strides, strict=True)
    )
    return x[index]


@KERNELS.register(mv.Concat)
def _concat(op: mv.Concat, *xs: np.ndarray) -> np.ndarray:
    return np.concatenate(xs, axis=op.axis)


@KERNELS.register(mv.ReplaceSlice)
def _replace_slice(op: mv.ReplaceSlice, x: np.ndarray, update: np.ndarray) -> np.ndarray:
    assert op.strides is not None
    index = tuple(
        builtins.slice(lo, hi, step)
        for lo, hi, step in zip(op.lower_bounds, op.upper_bounds, op.strides, strict=True)
    )
    result = x.copy()
    result[index] = update
    return result


@KERNELS.register(mv.Pad)
def _pad(op: mv.Pad, x: np.ndarray, value: np.ndarray) -> np.ndarray:
    # Pad the positive amounts (numpy extends from the original edges, repeating
    # reflections), then crop the negative ones: the window over the extension.
    widths = [
        (max(lo, 0), max(hi, 0)) for lo, hi in zip(op.padding_below, op.padding_above, strict=True)
    ]
    if x.ndim == 0:
        return x.copy()  # np.pad rejects an empty width list
    if op.mode is mv.PadMode.CONSTANT:
        padded = np.pad(x, widths, mode="constant", constant_values=value[()])
    else:
        padded = np.pad(x, widths, mode=op.mode.value)
    crop = tuple(
        builtins.slice(max(-lo, 0), n - max(-hi, 0))
        for lo, hi, n in zip(op.padding_below, op.padding_above, padded.shape, strict=True)
    )
    return padded[crop]


@KERNELS.register(mv.Reverse)
def _reverse(op: mv.Reverse, x: np.ndarray) -> np.ndarray:
    return np.flip(x, op.axes) if op.axes else x


@KERNELS.register(mv.ReverseSequence)
def _reverse_sequence(op: mv.ReverseSequence, x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    dim = x.shape[op.seq_axis]
    bad = (lengths < 0) | (lengths > dim)
    if np.any(bad):
        b = int(np.argmax(bad))
        raise ExecutionError(
            f"ReverseSequence: seq_lengths[{b}] = {int(lengths[b])} is outside [0, {dim}] "
            f"(the size of seq_axis {op.seq_axis})"
        )
    result = x.copy()
    moved = np.moveaxis(result, (op.batch_axis, op.seq_axis), (0, 1))  # a view of result
    source = np.moveaxis(x, (op.batch_axis, op.seq_axis), (0, 1))
    for b, n in enumerate(lengths.tolist()):
        moved[b, :n] = source[b, :n][::-1]
    return result


@KERNELS.register(mv.Tile)
def _tile(op: mv.Tile, x: np.ndarray) -> np.ndarray:
    return np.tile(x, op.repeats) if op.repeats else x.copy()


@KERNELS.register(mv.Split)
def _split(op: mv.Split, x: np.ndarray) -> tuple[np.ndarray, ...]:
    assert op.sizes is not None
    cuts = np.cumsum(op.sizes)[:-1]
    return tuple(np.split(x, cuts, axis=op.axis))


def _rearrange(op: mv.DepthToSpace | mv.SpaceToDepth, x: np.ndarray) -> np.ndarray:
    split_shape, perm, out_shape = op.layout(x.shape)
    return np.transpose(x.reshape(split_shape), perm).reshape(out_shape)


KERNELS.add(mv.DepthToSpace, _rearrange)
KERNELS.add(mv.SpaceToDepth, _rearrange)
