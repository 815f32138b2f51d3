"""A Winograd unit's transformed planes (its 16 or 36 tile points, input and products) lie
``plane_stride`` apart: whole 64-byte lines, an odd number of them, so one tile's loads and
stores of all its points fall into different L1 sets (a plane of 64 channels of 56 tiles is
3.5 x 4 KiB: unpadded, its 36 points shared two sets). The values are unchanged: the same
products on the same operands, exact against INTERPRETER where the units' tile counts make
the unpadded planes a multiple of 4 KiB or of 2 KiB (no timing)."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.fused.lowering.winograd_tiles import (
    PLANE_PAD,
    plane_stride,
    scratch_per_thread,
)
from opgraph.backends.fused.program import WinogradStep

RNG = np.random.default_rng(1221)


def _stride(count: int) -> int:
    """``plane_stride`` of ``count`` floats, its C expression evaluated."""
    return int(eval(plane_stride(str(count)).replace("L", "")))


@pytest.mark.parametrize("count", [1, 15, 16, 17, 32, 3584, 4096, 8192, 6272, 12543, 65536])
def test_plane_stride_is_an_odd_number_of_lines_at_most_pad_more(count):
    stride = _stride(count)
    assert count <= stride <= count + PLANE_PAD
    assert stride % 16 == 0 and (stride // 16) % 2 == 1


def test_odd_strides_put_every_point_into_its_own_set():
    """36 planes of 64 x 56 floats: 36 different L1 sets (64 sets of 64-byte lines)."""
    stride = _stride(64 * 56)
    assert len({(4 * stride * xi // 64) % 64 for xi in range(36)}) == 36
    assert len({(4 * 64 * 56 * xi // 64) % 64 for xi in range(36)}) == 2  # unpadded


@pytest.mark.parametrize("c, part, tiles, tile", [(64, 64, 56, 4), (256, 64, 49, 2), (3, 5, 1, 4)])
def test_scratch_holds_the_padded_planes_and_rows(c, part, tiles, tile):
    taps, row = (tile + 2) ** 2, 70
    need = taps * (_stride(c * tiles) + _stride(part * tiles)) + (tile + 2) * row
    assert scratch_per_thread(c, part, tiles, tile, row) >= need


def _conv(n: int, c: int, o: int, size: int):
    x = og.parameter(og.f32, (n, c, size, size))
    w = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    y = ops.relu(ops.convolution(x, og.constant(w), (1, 1), (1, 1), (1, 1), (1, 1)))
    return og.Function([y], [x]), RNG.standard_normal((n, c, size, size)).astype(np.float32)


CASES = {  # name: (n, c, o, size); the units' planes unpadded
    "F(4x4) 64 x 56x56, units of 42 to 70 tiles (56: 3.5 x 4 KiB)": (1, 64, 64, 56),
    "F(2x2) 64 x 32x32, units of 128 tiles (8 x 4 KiB)": (2, 64, 64, 32),
    "F(2x2) 128 x 8x8, four images folded into 64 tiles (8 x 4 KiB)": (4, 128, 64, 8),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_padded_planes_match_the_interpreter(name, threads):
    fn, data = _conv(*CASES[name])
    exe = CpuBackend(dataclasses.replace(default_config(), num_threads=threads)).compile(fn)
    assert any(isinstance(s, WinogradStep) for s in exe.program.steps)
    assert "long vs = " in exe.source() and "M + xi * ms" in exe.source()
    want = og.backend("INTERPRETER").compile(fn)(data)[0].astype(np.float64)
    got = exe(data)[0].astype(np.float64)
    np.testing.assert_allclose(got, want, atol=1e-4 * (np.max(np.abs(want)) + 1), rtol=1e-4)
