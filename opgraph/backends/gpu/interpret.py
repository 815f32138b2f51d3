"""Numpy semantics of the GPU backend's kernels and steps.

Two users: the host side of a hybrid executable (steps placed on the CPU that are not
reference-kernel fallbacks: small loop kernels between host steps, steps a device lacks) and
the fake device of the tests, which computes what each CUDA kernel would compute. A fused
:class:`~opgraph.backends.fused.program.LoopKernel` is interpreted node by node with the
reference (interpreter) kernels, so its values are the reference's, whatever CUDA does.

Arrays are numpy views with the operands' strides: full-level values have the kernel's
shape, row values its keep-dims shape (reduced axes of size 1), so they broadcast.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from opgraph.backends.fused.program import KKind, KNode, Level, LoopKernel
from opgraph.backends.fused.views import Literal, View, static, static_all
from opgraph.backends.gpu.cuda.kernel import Im2Col, IntGemm, Pool
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.errors import ExecutionError
from opgraph.core.literals import Constant
from opgraph.core.tensor_type import TensorType


def loop_names(kernel: LoopKernel) -> tuple[dict[int, str], dict[int, str]]:
    """Parameter names of a loop kernel's view loads and gathered tables (by node) and
    stores (by slot)."""
    loads = {n.index: f"p{n.index}" for n in kernel.nodes if loop_read(n) is not None}
    stores = {slot: f"q{slot}" for slot in range(len(kernel.stores))}
    return loads, stores


def loop_read(node: KNode) -> View | None:
    """The view a loop kernel node reads through its parameter: a load's operand, a gather's
    table."""
    source = node.operand if node.kind is KKind.LOAD else node.table
    return source if node.kind in (KKind.LOAD, KKind.GATHER) and isinstance(source, View) else None


def run_loop_kernel(kernel: LoopKernel, arrays: Mapping[str, np.ndarray]) -> None:
    """Compute ``kernel`` reading and writing ``arrays`` (by parameter name, each shaped and
    strided like its view)."""
    full = static_all(kernel.shape)  # the GPU runs static Programs only
    keep = tuple(1 if i in kernel.axes else d for i, d in enumerate(full))
    values: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for node in kernel.nodes:
            shape = full if node.level is Level.FULL else keep
            values.append(_node_value(node, values, arrays, shape))
    for slot, (k, view) in enumerate(kernel.stores):
        np.copyto(arrays[f"q{slot}"], values[k].reshape(view.shape))


def _node_value(
    node: KNode, values: list[np.ndarray], arrays: Mapping[str, np.ndarray], shape: tuple[int, ...]
) -> np.ndarray:
    dtype = node.element_type.dtype
    if node.kind is KKind.LOAD:
        if isinstance(node.operand, Literal):
            return np.full(shape, node.operand.value, dtype)
        return np.array(arrays[f"p{node.index}"]).reshape(shape)
    if node.kind is KKind.ALIAS:
        return np.broadcast_to(values[node.args[0]], shape)
    if node.kind is KKind.GATHER:
        return _gather(node, values, arrays, shape)
    assert node.op is not None
    raw = KERNELS[type(node.op)](node.op, *(values[a] for a in node.args))
    result = np.asarray(raw)
    if result.dtype != dtype:
        raise ExecutionError(f"{node.op.name} gave {result.dtype}, expected {dtype} (a bug)")
    return result.reshape(shape)


def _gather(
    node: KNode, values: list[np.ndarray], arrays: Mapping[str, np.ndarray], shape: tuple[int, ...]
) -> np.ndarray:
    """A GATHER node: indices wrapped and checked (the generated kernel's messages), then the
    table read at them (its view with one more axis per indexed axis of the data)."""
    positions = []
    sizes = [static(term.size) for term in node.terms]
    for arg, term, size in zip(node.args, node.terms, sizes, strict=True):
        index = np.broadcast_to(values[arg], shape).astype(np.int64)
        wrapped = np.where(index < 0, index + size, index)
        if np.any((wrapped < 0) | (wrapped >= size)):
            raise ExecutionError(
                f"index out of range for {term.what} of size {term.size} "
                f"(valid: -{term.size}..{term.size - 1})"
            )
        positions.append(wrapped)
    dtype = node.element_type.dtype
    if isinstance(node.table, Literal):
        return np.full(shape, node.table.value, dtype)
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype)
    base = arrays[f"p{node.index}"].reshape(shape)  # adds unit axes at most: a view
    wide = np.lib.stride_tricks.as_strided(
        base,
        shape + tuple(sizes),
        base.strides + tuple(static(t.stride) * base.itemsize for t in node.terms),
        writeable=False,
    )
    return np.array(wide[(*np.indices(shape, sparse=True), *positions)], dtype)


# ------------------------------------------------------------------------- windows
def run_im2col(spec: Im2Col, x: np.ndarray, patches: np.ndarray) -> None:
    """``patches`` (N, G, K, OH·OW) of image ``x`` (N, C, H, W); zeros in the padding."""
    n, c, h, w = x.shape
    oh, ow = spec.out_hw
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = spec.kernel, spec.strides, spec.dilations, spec.padding
    cols = np.zeros((n, c, kh, kw, oh, ow), x.dtype)
    if x.size:
        for ki in range(kh):
            ih = np.arange(oh) * sh - pt + ki * dh
            rows_ok = (ih >= 0) & (ih < h)
            for kj in range(kw):
                iw = np.arange(ow) * sw - pl + kj * dw
                cols_ok = (iw >= 0) & (iw < w)
                taps = x[:, :, np.clip(ih, 0, h - 1)][:, :, :, np.clip(iw, 0, w - 1)]
                cols[:, :, ki, kj] = np.where(rows_ok[:, None] & cols_ok[None, :], taps, 0)
    g = spec.groups
    patches[...] = cols.reshape(n, g, (c // g) * kh * kw, oh * ow)


def run_pool(spec: Pool, x: np.ndarray, out: np.ndarray) -> None:
    """Max or average pooling, as the CPU backend's pooling step computes it."""
    n, c, h, w = x.shape
    oh, ow = out.shape[2:]
    (fh, fw), (sh, sw), (dh, dw), (pt, pl) = spec.window, spec.strides, spec.dilations, spec.padding
    wide = np.float32 if x.dtype.itemsize < 4 and x.dtype.kind in "fV" else x.dtype
    data = x.astype(wide)
    start = -np.inf if spec.maximum and data.dtype.kind == "f" else 0
    if spec.maximum and data.dtype.kind != "f":
        start = np.iinfo(data.dtype).min
    acc = np.full((n, c, oh, ow), start, data.dtype)
    nan = np.zeros((n, c, oh, ow), bool)
    for a in range(fh):
        ih = np.arange(oh) * sh - pt + a * dh
        for b in range(fw):
            iw = np.arange(ow) * sw - pl + b * dw
            ok = ((ih >= 0) & (ih < h))[:, None] & ((iw >= 0) & (iw < w))[None, :]
            if h == 0 or w == 0:
                continue
            taps = data[:, :, np.clip(ih, 0, h - 1)][:, :, :, np.clip(iw, 0, w - 1)]
            if spec.maximum:
                acc = np.where(ok & (taps > acc), taps, acc)
                nan |= ok & (taps != taps)
            else:
                acc = acc + np.where(ok, taps, 0).astype(data.dtype)
    if spec.maximum:
        acc = np.where(nan, np.nan, acc) if data.dtype.kind == "f" else acc
    else:
        acc = acc / _pool_divisor(spec, h, w, oh, ow).astype(data.dtype)
    out[...] = acc.astype(out.dtype)


def _pool_divisor(spec: Pool, h: int, w: int, oh: int, ow: int) -> np.ndarray:
    (fh, fw), (sh, sw), (pt, pl) = spec.window, spec.strides, spec.padding
    ph, pw = spec.padded
    low = (0, 0) if spec.count_padding else (pt, pl)
    high = (ph, pw) if spec.count_padding else (pt + h, pl + w)

    def count(starts: np.ndarray, taps: int, lo: int, hi: int) -> np.ndarray:
        return np.clip(np.minimum(starts + taps, hi) - np.maximum(starts, lo), 0, None)

    rows = count(np.arange(oh) * sh, fh, low[0], high[0])
    cols = count(np.arange(ow) * sw, fw, low[1], high[1])
    return np.asarray(rows[:, None] * cols[None, :])


def run_int_gemm(spec: IntGemm, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """Integer product wrapping like the generated kernel (64-bit accumulation)."""
    wide = a.astype(np.uint64) @ b.astype(np.uint64)
    c[...] = wide.astype(c.dtype)


def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``c = a @ b`` in ``c``'s dtype (floats: f32 or f64, as cuBLAS computes)."""
    with np.errstate(all="ignore"):
        np.copyto(c, np.matmul(a, b).astype(c.dtype, copy=False))


# ---------------------------------------------------------------- reference kernels
def run_reference(node: Any, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
    """Run ``node``'s reference kernel on ``inputs`` and write ``outputs`` (checked types)."""

    with np.errstate(all="ignore"):
        raw = (
            node.op.value
            if isinstance(node.op, Constant)
            else KERNELS[type(node.op)](node.op, *inputs)
        )
    results = list(raw) if isinstance(raw, tuple | list) else [raw]
    for i, (out, result) in enumerate(zip(outputs, results, strict=True)):
        expected = node.output_types[i]
        value = np.asarray(result)
        assert isinstance(expected, TensorType)
        if value.dtype != expected.element_type.dtype or value.shape != expected.shape:
            raise ExecutionError(
                f"kernel output {i} is {value.dtype}{list(value.shape)}, the type rule says "
                f"{expected} (a kernel bug)"
            )
        np.copyto(out, value)


Resolve = Callable[[View], np.ndarray]
