"""Which Winograd tile a 3x3 convolution uses, and its filter transform at compile time.

F(2x2, 3x3) computes 4 outputs from a 4x4 input tile with 16 products; F(4x4, 3x3) 16
outputs from a 6x6 tile with 36 (2.25 products per output instead of 4: the 36 GEMMs of a
unit do 0.56x the multiply-adds of F(2x2)'s 16), at the price of larger transforms and a
larger rounding error (points 0, ±1, ±2: still within f32 tolerance of the direct sum on
ResNet-sized channel counts; ``tests/backends/cpu/test_cpu_resnet_convolutions.py``).
The codegen side is ``opgraph/backends/cpu/codegen/winograd_f4.py``.
"""

from __future__ import annotations

import numpy as np

from opgraph.core.dim import Dim

# Filter transforms U = G g Gᵀ, by output tile size.
_G = {
    2: np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64),
    4: np.array(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],
        np.float64,
    ),
}

#: F(4x4, 3x3) needs output planes at least this wide and tall (smaller ones waste most of
#: a 4x4 tile, or leave too few tiles per unit).
F4_MIN_SIZE = 8


def filter_transform(filters: np.ndarray, tile: int) -> np.ndarray:
    """The transformed filters ``U[ξ][o][c]`` ((tile + 2)², O, C) of ``filters`` (O, C, 3, 3)
    for F(tile x tile, 3x3), in f32 (computed in f64)."""
    g = _G[tile]
    o, c = filters.shape[:2]
    u = np.einsum("ai,ocij,bj->aboc", g, filters.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape((tile + 2) ** 2, o, c).astype(np.float32))


def winograd_tile(n: Dim, o: int, oh: int, ow: int, threads: int) -> int:
    """The output tile size (2 or 4) for a convolution with ``n`` images of ``o`` x ``oh``
    x ``ow`` outputs."""
    del n, o, threads  # (the choice depends on the plane only, so far)
    return 4 if min(oh, ow) >= F4_MIN_SIZE else 2
