"""bf16 compacted 1x1 convolutions (``codegen/bf16_pointwise.py``): exact on bf16-rounded
operands (INTERPRETER on the rounded filters and input), within the documented bound of f32,
and the f32 step kept where the pair panels would not fit."""

import numpy as np
import pytest
from test_cpu_bf16 import BOUND, needs_bf16, relative, rounded, step_kinds

import opgraph as og
from opgraph import ops

CASES = [  # (n, c, h, o, stride): what each exercises
    (1, 256, 14, 512, 2),  # ResNet-18's last downsample: 49 pixels, two panels
    (1, 64, 56, 128, 2),  # 784 pixels, 25 panels
    (2, 128, 28, 256, 2),  # two images
    (1, 32, 15, 48, 2),  # odd plane (8 x 8 pixels), output channels not whole tiles
    (3, 16, 12, 20, 3),  # stride 3
]


def _model(case: tuple[int, ...], residual: bool) -> tuple[og.Function, np.ndarray, np.ndarray]:
    n, c, h, o, s = case
    rng = np.random.default_rng(sum(case))
    filters = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    x = og.parameter(og.f32, (n, c, h, h), name="x")
    y = ops.convolution(x, og.constant(filters), strides=(s, s))
    if residual:  # a fused epilogue on the output rows
        side = (h - 1) // s + 1
        y = ops.relu(y + og.constant(np.full((n, o, side, side), 0.25, np.float32)))
    fn = og.Function([y], [x], name="pointwise")
    return fn, rng.standard_normal((n, c, h, h)).astype(np.float32), filters


def _oracle(case: tuple[int, ...], residual: bool, xv: np.ndarray, filters: np.ndarray):
    n, c, h, o, s = case
    x = og.parameter(og.f32, xv.shape, name="x")
    y = ops.convolution(x, og.constant(rounded(filters).astype(np.float32)), strides=(s, s))
    if residual:
        side = (h - 1) // s + 1
        y = ops.relu(y + og.constant(np.full((n, o, side, side), 0.25, np.float32)))
    exe = og.backend("INTERPRETER").compile(og.Function([y], [x], name="oracle"))
    return exe(rounded(xv).astype(np.float32))[0]


@needs_bf16
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "epilogue"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_compacted_pointwise_is_exact_on_bf16_operands(case, residual):
    fn, xv, filters = _model(case, residual)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16CompactPointwiseStep" in step_kinds(exe)
    got = exe(xv)[0]
    exact = _oracle(case, residual, xv, filters)
    np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4 * float(np.abs(exact).max()))
    assert relative(got, og.backend("CPU").compile(fn)(xv)[0]) < BOUND


@needs_bf16
def test_few_pixels_keep_the_f32_step():
    """3 x 3 pixels: one 32-pixel panel per image would not fit the f32 copy's space."""
    fn, xv, _ = _model((1, 64, 5, 64, 2), False)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16CompactPointwiseStep" not in step_kinds(exe)
    assert relative(exe(xv)[0], og.backend("CPU").compile(fn)(xv)[0]) < BOUND
