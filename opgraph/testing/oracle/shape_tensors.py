"""Oracle entries for the ops whose shape-like arguments are run-time tensors, in plain numpy
(ONNX semantics: Reshape's 0 and -1, Expand's two-way broadcast, Slice's clamped bounds, Pad's
begin-then-end layout with negative crops)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from opgraph.core.element_type import from_dtype
from opgraph.core.tensor_type import TensorType
from opgraph.ops import shape_tensors as st
from opgraph.ops.rearrange import PadMode
from opgraph.ops.resize import Resize
from opgraph.testing.oracle.registry import ORACLE


def _ints(a: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(a).reshape(-1)]


@ORACLE.register(st.DynamicReshape)
def _reshape(op: st.DynamicReshape, x: np.ndarray, shape: np.ndarray, out: Any) -> np.ndarray:
    target = _ints(shape)
    if not op.allow_zero:
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return x.reshape(target)


@ORACLE.register(st.DynamicBroadcast)
def _broadcast(op: st.DynamicBroadcast, x: np.ndarray, shape: np.ndarray, out: Any) -> np.ndarray:
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(_ints(shape)))).copy()


@ORACLE.register(st.SumTo)
def _sum_to(op: st.SumTo, x: np.ndarray, like: np.ndarray, out: Any) -> np.ndarray:
    lead = x.ndim - like.ndim
    total = x.sum(axis=tuple(range(lead))) if lead else x
    ones = tuple(i for i, d in enumerate(like.shape) if d == 1)
    return total.sum(axis=ones, keepdims=True).reshape(like.shape).astype(x.dtype)


@ORACLE.register(st.DynamicSlice)
def _slice(
    op: st.DynamicSlice,
    x: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    steps: np.ndarray,
    out: Any,
) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for axis, lo, hi, step in zip(op.axes, _ints(starts), _ints(ends), _ints(steps), strict=True):
        index[axis] = slice(lo, hi, step)  # numpy clamps bounds as ONNX Slice does
    return x[tuple(index)].copy()


@ORACLE.register(st.SliceGradient)
def _slice_gradient(
    op: st.SliceGradient,
    ct: np.ndarray,
    like: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    steps: np.ndarray,
    out: Any,
) -> np.ndarray:
    index = [slice(None)] * like.ndim
    for axis, lo, hi, step in zip(op.axes, _ints(starts), _ints(ends), _ints(steps), strict=True):
        index[axis] = slice(lo, hi, step)
    result = np.zeros(like.shape, ct.dtype)
    result[tuple(index)] = ct
    return result


_NUMPY_MODES: dict[PadMode, Literal["edge", "reflect", "symmetric"]] = {
    PadMode.EDGE: "edge",
    PadMode.REFLECT: "reflect",
    PadMode.SYMMETRIC: "symmetric",
}


@ORACLE.register(st.DynamicPad)
def _pad(
    op: st.DynamicPad, x: np.ndarray, pads: np.ndarray, value: np.ndarray, out: Any
) -> np.ndarray:
    counts = _ints(pads)
    rank = x.ndim
    crop = tuple(
        slice(max(0, -counts[a]), x.shape[a] - max(0, -counts[rank + a])) for a in range(rank)
    )
    widths = [(max(0, counts[a]), max(0, counts[rank + a])) for a in range(rank)]
    if op.mode is PadMode.CONSTANT:
        return np.pad(x[crop], widths, mode="constant", constant_values=value)
    return np.pad(x[crop], widths, mode=_NUMPY_MODES[op.mode])


@ORACLE.register(st.DynamicTile)
def _tile(op: st.DynamicTile, x: np.ndarray, repeats: np.ndarray, out: Any) -> np.ndarray:
    return np.tile(x, _ints(repeats))


@ORACLE.register(st.DynamicTopK)
def _top_k(op: st.DynamicTopK, x: np.ndarray, k: np.ndarray, out: Any) -> tuple[Any, Any]:
    count = _ints(k)[0]
    keys = -x.astype(np.float64) if op.largest else x.astype(np.float64)
    order = np.argsort(keys, axis=op.axis, kind="stable")
    picked = np.take(order, np.arange(count), axis=op.axis)
    if not op.sorted:
        picked = np.sort(picked, axis=op.axis)
    return np.take_along_axis(x, picked, op.axis), picked.astype(np.int64)


@ORACLE.register(st.DynamicRange)
def _range(
    op: st.DynamicRange, start: np.ndarray, limit: np.ndarray, delta: np.ndarray, out: Any
) -> np.ndarray:
    a, b, d = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    count = max(0, int(np.ceil((float(b) - float(a)) / float(d))))
    return np.array([a + i * d for i in range(count)], dtype=start.dtype)


@ORACLE.register(st.Fill)
def _fill(op: st.Fill, shape: np.ndarray, value: np.ndarray, out: Any) -> np.ndarray:
    return np.full(_ints(shape), value, dtype=value.dtype)


@ORACLE.register(st.DynamicResize)
def _resize(op: st.DynamicResize, x: np.ndarray, sizes: np.ndarray, out: Any) -> np.ndarray:
    static = Resize(
        tuple(_ints(sizes)), None, op.mode, op.coordinate_transformation_mode, op.nearest_mode
    )
    canonical = static.canonicalize(TensorType(from_dtype(x.dtype), x.shape))
    result: np.ndarray = ORACLE[Resize](canonical, x, out)
    return result
