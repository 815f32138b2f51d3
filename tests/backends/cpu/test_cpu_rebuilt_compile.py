"""Compile-time derived arrays for a rebuilt model (issue 17, item 6; H66): the Winograd
filter transform as one GEMM by G ⊗ G, checked against the defining sum."""

from __future__ import annotations

import numpy as np
import pytest

from opgraph.backends.fused.lowering.winograd_tiles import _G, filter_transform

RNG = np.random.default_rng(66)


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("shape", [(1, 1), (16, 48), (48, 16), (5, 7), (130, 70)])
def test_filter_transform_matches_the_defining_sum(tile, shape):
    """U[a, b, o, c] = Σ_ij G[a, i] g[o, c, i, j] G[b, j], rounded once to f32 (the GEMM by
    G ⊗ G and the definition agree to one f32 rounding of an f64 value); 130 x 70 = 9,100
    filters spans twelve blocks of the GEMM."""
    filters = RNG.standard_normal((*shape, 3, 3)).astype(np.float32)
    g = _G[tile]
    want = np.einsum("ai,ocij,bj->aboc", g, filters.astype(np.float64), g)
    got = filter_transform(filters, tile)
    n = tile + 2
    assert got.shape == (n * n, *shape) and got.dtype == np.float32
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got.reshape(n, n, *shape), want, rtol=2**-23, atol=1e-30)


def test_transform_blocks_stay_below_openblas_threading():
    """Each block's GEMM stays at or below OpenBLAS's single-thread bound (65536 x 4
    multiply-adds): numpy's BLAS threads spin for each other beside other processes."""
    from opgraph.backends.fused.lowering import winograd_tiles

    for tile in (2, 4):
        assert (tile + 2) ** 2 * winograd_tiles._TRANSFORM_BLOCK * 9 <= 65536 * 4
