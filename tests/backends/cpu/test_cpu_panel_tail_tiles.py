"""The panel GEMM (``og_gemm_panels``) gives a last row tile of under a third of the tile's
rows a share of the tile before it (49 rows: 12, 12, 12, 7, 6 instead of 12, 12, 12, 12, 1):
each output's sum runs over the inner index in the same order whatever its tile, so the
values are those of full tiles, bit for bit, on either ISA and thread count (no timing)."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(1222)
INNER, COLS = 300, 70  # columns: two panels and a part of a third


def _compile(rows: int, w: np.ndarray, isa: str, threads: int):
    x = og.parameter(og.f32, (rows, INNER), name="x")
    fn = og.Function([ops.matmul(x, og.constant(w))], [x])
    config = dataclasses.replace(default_config(), num_threads=threads, isa=isa)
    exe = CpuBackend(config).compile(fn)
    assert any(isinstance(s, GemmStep) for s in exe.program.steps)
    return exe


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [13, 14, 15, 25, 37, 49, 61])
def test_tail_tiles_give_the_full_tiles_sums(rows, threads, isa):
    w = (RNG.standard_normal((INNER, COLS)) / np.sqrt(INNER)).astype(np.float32)
    data = RNG.standard_normal((72, INNER)).astype(np.float32)  # 72: six whole 12-row tiles
    got = _compile(rows, w, isa, threads)(data[:rows])[0]
    whole = _compile(72, w, isa, threads)(data)[0]
    np.testing.assert_array_equal(got, whole[:rows])
    want = data[:rows].astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
