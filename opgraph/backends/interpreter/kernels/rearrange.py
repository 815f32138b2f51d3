"""Reference kernels for data rearrangement. Pad pads then crops (the window over the
extension); depth_to_space and space_to_depth are reshape, transpose, reshape."""

from __future__ import annotations

import builtins

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.ops import rearrange as ra


@KERNELS.register(ra.Pad)
def _pad(op: ra.Pad, x: np.ndarray, value: np.ndarray) -> np.ndarray:
    # Pad the positive amounts (numpy extends from the original edges, repeating
    # reflections), then crop the negative ones: the window over the extension.
    widths = [
        (max(lo, 0), max(hi, 0)) for lo, hi in zip(op.padding_below, op.padding_above, strict=True)
    ]
    if x.ndim == 0:
        return x.copy()  # np.pad rejects an empty width list
    if op.mode is ra.PadMode.CONSTANT:
        padded = np.pad(x, widths, mode="constant", constant_values=value[()])
    else:
        padded = np.pad(x, widths, mode=op.mode.value)
    crop = tuple(
        builtins.slice(max(-lo, 0), n - max(-hi, 0))
        for lo, hi, n in zip(op.padding_below, op.padding_above, padded.shape, strict=True)
    )
    return padded[crop]


def _rearrange(op: ra.DepthToSpace | ra.SpaceToDepth, x: np.ndarray) -> np.ndarray:
    split_shape, perm, out_shape = op.layout(x.shape)
    return np.transpose(x.reshape(split_shape), perm).reshape(out_shape)


KERNELS.add(ra.DepthToSpace, _rearrange)
KERNELS.add(ra.SpaceToDepth, _rearrange)
