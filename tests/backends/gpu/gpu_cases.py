"""Functions whose generated CUDA is pinned by golden files, and helpers shared by the GPU
backend's tests (all of which run on machines without a GPU)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import opgraph as og
from opgraph import ops
from opgraph.backends.gpu import FakeDevice, GpuBackend, GpuConfig

GOLDEN = Path(__file__).parent / "golden"


def w2() -> og.Function:
    """W2: a pointwise chain (one vectorized kernel)."""
    x = og.parameter(og.f32, (4096,), "x")
    y = ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x / 3.0
    return og.Function([y], [x], name="w2")


def broadcast_add() -> og.Function:
    """A row vector broadcast over a matrix (rows × columns, a stride-0 operand)."""
    x = og.parameter(og.f32, (64, 256), "x")
    b = og.parameter(og.f32, (256,), "b")
    return og.Function(
        [ops.add(x, ops.broadcast(b, (64, 256), (0,)))], [x, b], name="broadcast_add"
    )


def convert_f16() -> og.Function:
    """f16 in, computed in f32, rounded back: conversions and a 16-bit add."""
    x = og.parameter(og.f16, (1024,), "x")
    y = og.parameter(og.f16, (1024,), "y")
    wide = ops.exp(ops.convert(x, og.f32)) * 0.5
    narrow = ops.add(ops.convert(wide, og.f16), y)
    return og.Function([narrow, ops.convert(narrow, og.i32)], [x, y], name="convert_f16")


def softmax_rows() -> og.Function:
    """Softmax over rows of 1000: one block per row (max, sum of exponentials, divide)."""
    x = og.parameter(og.f32, (32, 1000), "x")
    return og.Function([ops.softmax(x, -1)], [x], name="softmax_rows")


def layer_norm_rows() -> og.Function:
    """Layer norm over rows of 768 (BERT's): mean, variance, normalize, scale and shift."""
    x = og.parameter(og.f32, (16, 768), "x")
    scale = og.parameter(og.f32, (768,), "scale")
    bias = og.parameter(og.f32, (768,), "bias")
    y = ops.layer_norm(x, scale, bias, -1, 1e-12)
    return og.Function([y], [x, scale, bias], name="layer_norm_rows")


def reduction() -> og.Function:
    """A column sum (rows of 512: a block per row) and a row max over 16 (a thread per row,
    NaN-propagating)."""
    x = og.parameter(og.f32, (512, 16), "x")
    return og.Function([ops.reduce_sum(x, (0,)), ops.reduce_max(x, (1,))], [x], name="reduction")


#: The golden cases: name -> Function builder (``golden/<name>.cu`` holds the module).
CASES: dict[str, Callable[[], og.Function]] = {
    "w2": w2,
    "broadcast_add": broadcast_add,
    "convert_f16": convert_f16,
    "softmax_rows": softmax_rows,
    "layer_norm_rows": layer_norm_rows,
    "reduction": reduction,
}


# ------------------------------------------------------- extra compile-only cases
def integer_math() -> og.Function:
    """Integer division and remainder (helpers and run-time checks), power, shifts."""
    a = og.parameter(og.i32, (1000,), "a")
    b = og.parameter(og.i32, (1000,), "b")
    c = og.parameter(og.u8, (1000,), "c")
    return og.Function(
        [
            ops.divide(a, b),
            ops.mod(a, b),
            ops.power(a, b),
            ops.convert(ops.convert(a, og.f32), og.u8),
            c,
        ],
        [a, b, c],
        name="integer_math",
    )


def convolution() -> og.Function:
    """Convolution (im2col + cuBLAS) with a ReLU epilogue, then max and average pooling."""
    x = og.parameter(og.f32, (2, 3, 16, 16), "x")
    w = og.parameter(og.f32, (8, 3, 3, 3), "w")
    y = ops.relu(ops.convolution(x, w, padding_below=(1, 1), padding_above=(1, 1)))
    pooled = ops.max_pool(y, (2, 2), (2, 2))
    return og.Function(
        [ops.avg_pool(pooled, (3, 3), (1, 1), (1, 1), (1, 1))], [x, w], name="convolution"
    )


def integer_matmul() -> og.Function:
    a = og.parameter(og.i32, (16, 32), "a")
    b = og.parameter(og.i32, (32, 8), "b")
    return og.Function([ops.dot(a, b)], [a, b], name="integer_matmul")


def bf16_chain() -> og.Function:
    x = og.parameter(og.bf16, (4, 64), "x")
    return og.Function([ops.softmax(ops.sigmoid(x), -1)], [x], name="bf16_chain")


#: More modules compiled by the nvcc test (no golden file).
COMPILE_ONLY: dict[str, Callable[[], og.Function]] = {
    "integer_math": integer_math,
    "convolution": convolution,
    "integer_matmul": integer_matmul,
    "bf16_chain": bf16_chain,
}


def fake_backend(**config: object) -> tuple[GpuBackend, FakeDevice]:
    """The GPU backend on a fresh fake device."""
    device = FakeDevice()
    return GpuBackend(GpuConfig(**config), device=device), device  # type: ignore[arg-type]


def generated_source(build: Callable[[], og.Function]) -> str:
    """The CUDA module the GPU backend generates for ``build()``."""
    backend, _ = fake_backend()
    return backend.compile(build()).source()
