"""bf16 panel convolutions by filter taps (``codegen/bf16_taps.py``): exact on bf16-rounded
operands (INTERPRETER on the rounded filters and input), within the documented bound of f32,
the tap order and ranges, and the plain bf16 panel product where taps do not apply."""

import numpy as np
import pytest
from test_cpu_bf16 import BOUND, needs_bf16, relative, rounded, step_kinds

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen import bf16, bf16_taps

CASES = [  # (n, c, h, w, o, kernel, stride, pad below, pad above, dilation): what it exercises
    (1, 512, 7, 7, 512, 3, 1, 1, 1, 1),  # ResNet-18's last stage: 7-pixel rows of taps
    (1, 256, 14, 14, 512, 3, 2, 1, 1, 1),  # stride 2: the input read every other pixel
    (1, 128, 28, 28, 256, 3, 2, 1, 1, 1),  # 14-pixel rows in two tiles of 7
    (4, 64, 4, 4, 96, 3, 1, 1, 1, 1),  # several images; a partial panel (96 channels)
    (1, 64, 9, 6, 64, 3, 1, 2, 2, 2),  # dilation 2, a rectangular plane
    (1, 128, 3, 3, 64, 2, 1, 1, 1, 1),  # no tap valid everywhere: the block is zeroed first
    (2, 96, 5, 7, 80, 3, 2, 0, 1, 1),  # asymmetric padding, odd sizes
]


def conv(case: tuple[int, ...], seed: int = 0) -> tuple[og.Function, np.ndarray, np.ndarray]:
    n, c, h, w, o, k, s, below, above, d = case
    rng = np.random.default_rng(seed)
    filters = (rng.standard_normal((o, c, k, k)) / np.sqrt(k * k * c)).astype(np.float32)
    x = og.parameter(og.f32, (n, c, h, w), name="x")
    y = ops.convolution(
        x,
        og.constant(filters),
        strides=(s, s),
        dilations=(d, d),
        padding_below=(below, below),
        padding_above=(above, above),
    )
    fn = og.Function([ops.relu(y)], [x], name="conv")
    return fn, rng.standard_normal((n, c, h, w)).astype(np.float32), filters


def oracle(case: tuple[int, ...], xv: np.ndarray, filters: np.ndarray) -> np.ndarray:
    """INTERPRETER on the bf16-rounded filters and input (products of bf16 values are exact
    in f32, so only the order of the f32 sums differs)."""
    _, _, _, _, _, _, s, below, above, d = case
    x = og.parameter(og.f32, xv.shape, name="x")
    y = ops.convolution(
        x,
        og.constant(rounded(filters).astype(np.float32)),
        strides=(s, s),
        dilations=(d, d),
        padding_below=(below, below),
        padding_above=(above, above),
    )
    exe = og.backend("INTERPRETER").compile(og.Function([ops.relu(y)], [x], name="oracle"))
    return exe(rounded(xv).astype(np.float32))[0]


@needs_bf16
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_taps_are_exact_on_bf16_operands(case):
    fn, xv, filters = conv(case)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16TapConvStep" in step_kinds(exe)
    got = exe(xv)[0]
    exact = oracle(case, xv, filters)
    np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4 * float(np.abs(exact).max()))
    assert relative(got, og.backend("INTERPRETER").compile(fn)(xv)[0]) < BOUND


#: Convolutions that keep the plain panel product: 57 channels (a tap's block would start
#: inside a pair); 2x2 filters at stride 3 reading 100 of the 225 pixels (the bf16 input,
#: 230 KB, would not fit the scratch of the f32 patches, 205 KB).
PLAIN_PANEL_CASES = [(1, 57, 7, 7, 64, 3, 1, 1, 1, 1), (1, 512, 15, 15, 64, 2, 3, 0, 0, 1)]


@needs_bf16
@pytest.mark.parametrize("case", PLAIN_PANEL_CASES, ids=["odd-channels", "input-over-scratch"])
def test_cases_taps_cannot_serve_keep_the_plain_panel_product(case):
    fn, xv, filters = conv(case)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    kinds = step_kinds(exe)
    assert "Bf16PanelConvStep" in kinds and "Bf16TapConvStep" not in kinds
    exact = oracle(case, xv, filters)
    np.testing.assert_allclose(exe(xv)[0], exact, rtol=1e-4, atol=1e-4 * float(np.abs(exact).max()))


def test_the_tap_ranges_skip_the_padding():
    """At 7x7 with padding 1, the centre tap first; 361 of the 441 pixel-tap pairs run."""
    fn, _, _ = conv(CASES[0])
    exe = og.backend("CPU").compile(fn)
    (step,) = [s for s in exe.program.steps if type(s).__name__ == "PanelConvStep"]
    order = bf16_taps.taps(step)
    assert order[0] == (1, 1, 0, 7, 0, 7) and len(order) == 9
    assert sum((t[3] - t[2]) * (t[5] - t[4]) for t in order) == 361
    assert bf16_taps.applies(step)


@needs_bf16
@pytest.mark.parametrize("case", [(512, 7, 64, 1), (256, 14, 128, 2)], ids=["s1", "s2"])
def test_one_dimensional_convolutions_run_by_taps(case):
    """A 1-D convolution's panel step is 2-D with one filter row: the same kernel."""
    c, length, o, s = case
    rng = np.random.default_rng(1)
    filters = (rng.standard_normal((o, c, 3)) / np.sqrt(3 * c)).astype(np.float32)
    xv = rng.standard_normal((1, c, length)).astype(np.float32)

    def function(w: np.ndarray) -> og.Function:
        x = og.parameter(og.f32, (1, c, length), name="x")
        pads = {"padding_below": (1,), "padding_above": (1,)}
        y = ops.convolution(x, og.constant(w), strides=(s,), **pads)
        return og.Function([y], [x], name="conv1d")

    exe = og.backend("CPU").compile(function(filters), precision="bf16")
    assert "Bf16TapConvStep" in step_kinds(exe)
    got = exe(xv)[0]
    oracle_fn = function(rounded(filters).astype(np.float32))
    exact = og.backend("INTERPRETER").compile(oracle_fn)(rounded(xv).astype(np.float32))[0]
    np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4 * float(np.abs(exact).max()))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_the_taps_prefetch_the_whole_next_panel_within_it(case):
    """Each (tap, channel block) prefetches its share of the next pair panel, ``each`` lines
    a row of its rows, by at most ``kp`` lines a micro-kernel tile (one a step): together
    every line of the panel, and none past its end (the C clips to ``end``)."""
    fn, _, _ = conv(case)
    exe = og.backend("CPU").compile(fn)
    (step,) = [s for s in exe.program.steps if type(s).__name__ == "PanelConvStep"]
    n, c = step.x.shape[:2]
    k = step.w.shape[0]
    order = bf16_taps.taps(step)
    size, share = bf16_taps.ahead_share(k, c, len(order))
    fetched = set()
    for t, (_, _, i0, i1, j0, j1) in enumerate(order):
        rows, m = n * (i1 - i0), j1 - j0
        each = -(-share // rows)
        tiles = -(-m // -(-m // -(-m // bf16.ROWS)))  # og_bf16_tile's tiles of m rows
        for c0 in range(0, c, bf16_taps.DEPTH):
            kp = (min(c0 + bf16_taps.DEPTH, c) - c0) // 2
            assert each <= kp * tiles, "a row's tiles cannot fetch its lines"
            first = (t * -(-c // bf16_taps.DEPTH) + c0 // bf16_taps.DEPTH) * share
            fetched |= set(range(first, min(first + rows * each, size // 64)))
    assert fetched == set(range(size // 64))
