"""The bf16 Winograd with the tiles as the product's rows (``codegen/bf16_winograd_rows.py``):
bit for bit the pair-panel Winograd's results (the same roundings of the same transformed
tiles and filters, and the same order of f32 sums), within the documented bound of f32, and
taken only where the pair panels would multiply padding."""

import numpy as np
import pytest
from test_cpu_bf16 import BOUND, needs_bf16, relative, step_kinds
from test_cpu_bf16_winograd import conv

import opgraph as og
from opgraph.backends.cpu.codegen import bf16, bf16_winograd_rows

CASES = [  # (n, c, h, o, pad): what each exercises
    (1, 256, 14, 256, 1),  # ResNet-18's 14x14 stage: 49 tiles, 23 % padding in two panels
    (1, 64, 28, 64, 1),  # 196 tiles in row blocks
    (1, 64, 13, 96, 1),  # odd plane: the last tile row and column half outside
    (3, 32, 9, 32, 1),  # several images, 5 tiles a row
    (2, 64, 12, 32, 0),  # no padding
    (1, 32, 20, 64, 1),  # 100 tiles, in 4 panels of 32 (22 % padding)
]


def _both(case: tuple[int, ...], monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, ...]:
    fn, xv = conv(case)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16RowWinogradStep" in step_kinds(exe)
    assert "og_gemm_bf16_rowsp(" in exe.source()
    got = exe(xv)[0]
    monkeypatch.setattr(bf16_winograd_rows, "MIN_WASTE", 2.0)  # never: pair panels
    pairs = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16RowWinogradStep" not in step_kinds(pairs)
    return got, pairs(xv)[0], og.backend("CPU").compile(fn)(xv)[0]


@needs_bf16
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_rows_equal_the_pair_panels(case, monkeypatch):
    got, pairs, f32 = _both(case, monkeypatch)
    np.testing.assert_array_equal(got, pairs)
    assert relative(got, f32) < BOUND


@needs_bf16
def test_rows_with_output_channel_blocks(monkeypatch):
    """Two threads split ResNet-18's 14x14 stage into two blocks of output channels: each
    block's product writes its own columns of the unit's products."""
    fn, _ = conv((1, 256, 14, 256, 1))
    exe = og.backend("CPU").compile(fn, precision="bf16")
    steps = [s for s in exe.program.steps if isinstance(s, bf16_winograd_rows.Bf16RowWinogradStep)]
    if steps[0].channel_blocks < 2:
        pytest.skip("this configuration runs one output-channel block (one thread)")
    got, pairs, _ = _both((1, 256, 14, 256, 1), monkeypatch)
    np.testing.assert_array_equal(got, pairs)


@needs_bf16
@pytest.mark.parametrize(
    "case, why",
    [
        ((1, 64, 16, 64, 1), "64 tiles: whole panels, nothing to save"),
        ((2, 48, 14, 64, 1), "48 channels: not whole 32-channel blocks"),
        ((1, 64, 14, 40, 1), "40 output channels: not whole panels"),
    ],
)
def test_other_steps_keep_the_pair_panels(case, why):
    fn, xv = conv(case)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16RowWinogradStep" not in step_kinds(exe), why
    assert relative(exe(xv)[0], og.backend("CPU").compile(fn)(xv)[0]) < BOUND


@needs_bf16
def test_rows_in_several_inner_blocks(monkeypatch):
    """Inner blocks of 64 channels (``ROWS_DEPTH``): ``og_gemm_bf16_rowsp`` runs each block over
    every panel, its last panel prefetching the next block's first slice; the sums by blocks
    stay within the bound of f32."""
    fn, xv = conv((1, 256, 14, 64, 1))
    monkeypatch.setattr(bf16, "ROWS_DEPTH", 64)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16RowWinogradStep" in step_kinds(exe)
    assert "depth = og_bf16_depth(K, 64)" in exe.source()
    assert relative(exe(xv)[0], og.backend("CPU").compile(fn)(xv)[0]) < BOUND


@needs_bf16
@pytest.mark.parametrize(
    "case, depth",
    [((1, 32, 20, 64, 1), 3072), ((1, 256, 14, 256, 1), 64)],
    ids=["2-panels", "4-inner-blocks"],
)
def test_rows_in_several_chunks(case, depth, monkeypatch):
    """A unit's 50 or 49 tiles in chunks of 24 rows (``CHUNK``), with one or four inner
    blocks: ``og_gemm_bf16_rowsp`` prefetches after each chunk's last panel the next
    chunk's or block's first slice, and the sums stay bit for bit those of one chunk (a
    tile's rows are independent sums)."""
    fn, xv = conv(case)
    monkeypatch.setattr(bf16, "ROWS_DEPTH", depth)
    whole = og.backend("CPU").compile(fn, precision="bf16")
    monkeypatch.setattr(bf16, "CHUNK", 24)
    chunks = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16RowWinogradStep" in step_kinds(chunks)
    assert "m0 += 24" in chunks.source() and f"og_bf16_depth(K, {depth})" in chunks.source()
    got = chunks(xv)[0]
    np.testing.assert_array_equal(got, whole(xv)[0])
    assert relative(got, og.backend("CPU").compile(fn)(xv)[0]) < BOUND
