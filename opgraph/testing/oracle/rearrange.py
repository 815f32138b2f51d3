"""Oracle entries for data rearrangement (index arithmetic, not the kernels' numpy shortcuts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.ops import rearrange as ra
from opgraph.testing.oracle.registry import ORACLE


def _bounce(i: int, dim: int, mode: ra.PadMode) -> int | None:
    """The source coordinate for extended coordinate ``i`` (None: the pad value), mirroring
    step by step as nGraph's reference does."""
    if 0 <= i < dim:
        return i
    if mode is ra.PadMode.CONSTANT:
        return None
    if mode is ra.PadMode.EDGE:
        return 0 if i < 0 else dim - 1
    repeat_edge = mode is ra.PadMode.SYMMETRIC
    while not 0 <= i < dim:
        if i < 0:
            i = -i - 1 if repeat_edge else -i
        else:
            i = 2 * dim - 1 - i if repeat_edge else 2 * dim - 2 - i
    return i


@ORACLE.register(ra.Pad)
def _pad(op: ra.Pad, x: np.ndarray, value: np.ndarray, out: Any) -> np.ndarray:
    result = np.empty(out[0].shape, x.dtype)
    for index in np.ndindex(*result.shape):
        source = [
            _bounce(j - lo, dim, op.mode)
            for j, lo, dim in zip(index, op.padding_below, x.shape, strict=True)
        ]
        result[index] = value if any(s is None for s in source) else x[tuple(source)]
    return result


def _depth_index(op: Any, channel: int, block: list[int], channels: int) -> int:
    """The deep channel holding (shallow ``channel``, ``block`` offsets) of ``channels``."""
    linear_block = 0
    for b in block:
        linear_block = linear_block * op.block_size + b
    if op.mode is ra.BlockMode.BLOCKS_FIRST:
        return linear_block * channels + channel
    return channel * op.block_size ** len(block) + linear_block


@ORACLE.register(ra.DepthToSpace)
def _depth_to_space(op: ra.DepthToSpace, x: np.ndarray, out: Any) -> np.ndarray:
    result = np.empty(out[0].shape, x.dtype)
    bs = op.block_size
    for index in np.ndindex(*result.shape):
        n, c, spatial = index[0], index[1], index[2:]
        deep = _depth_index(op, c, [s % bs for s in spatial], result.shape[1])
        result[index] = x[(n, deep, *(s // bs for s in spatial))]
    return result


@ORACLE.register(ra.SpaceToDepth)
def _space_to_depth(op: ra.SpaceToDepth, x: np.ndarray, out: Any) -> np.ndarray:
    result = np.empty(out[0].shape, x.dtype)
    bs = op.block_size
    for index in np.ndindex(*x.shape):
        n, c, spatial = index[0], index[1], index[2:]
        deep = _depth_index(op, c, [s % bs for s in spatial], x.shape[1])
        result[(n, deep, *(s // bs for s in spatial))] = x[index]
    return result
