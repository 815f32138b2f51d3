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

from opgraph.backends.fused import pages
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


def _flipped_points() -> tuple[int, ...]:
    """``flip`` such that the F(2x2, 3x3) transform of filters with reversed taps is
    ``U_reversed[ξ] = U[flip[ξ]]``: reversing the taps reverses ``G``'s columns, which is
    ``G``'s rows 0 and 3 swapped (rows 1 and 2 are symmetric), so each tile point
    ``ξ = 4a + b`` maps to ``4 p(a) + p(b)``."""
    g = _G[2]
    rows = [next(r for r in range(4) if np.array_equal(g[r], g[a, ::-1])) for a in range(4)]
    return tuple(4 * rows[a] + rows[b] for a in range(4) for b in range(4))


#: The tile-point permutation of the F(2x2, 3x3) filter transform under reversed taps: a
#: convolution's data gradient (reversed, channel-swapped filters) reads the forward's
#: transformed filters ``u[FLIPPED_POINTS[ξ]]ᵀ`` (``WinogradStep.flipped``).
FLIPPED_POINTS = _flipped_points()

#: F(4x4, 3x3) is taken for one image whose output plane is at least this wide and tall.
#: Measured (one thread, thread CPU time, Zen 4, against F(2x2) with padded input rows):
#: faster for ResNet-18's 64 x 56² and 128 x 28² layers at batch 1 (1.19 vs 1.40 ms, 1.03
#: vs 1.48 ms), even at 256 x 14² (1.79 vs 1.89 ms, within the spread), slower for CIFAR's
#: batch 32 planes (64 x 32²: 17.1 vs 14.5 ms; 128 x 16²: 20.7 vs 16.6 ms).
F4_MIN_SIZE = 28
#: Tiles an F(4x4, 3x3) unit aims for (36 transformed planes per tile: half the F(2x2)
#: block keeps a unit's scratch about as large; 64 measured faster than 128).
F4_BLOCK = 64
#: The square output planes (sides) for which a static batch of several images takes
#: F(4x4, 3x3), in units of several whole images. Measured on CIFAR's batch 32 (Zen 5, the
#: two-thread build run alone, thread CPU; the planes ``plane_stride`` apart, which the Zen 4
#: measurement above lacked), the layer alone (medians) and the three layers in the model
#: (sums of step minima, four runs): 128 x 16² 6.35 against 5.43 ms alone, 18.3-19.6
#: against 14.5-19.6 ms in the model; 512 x 4² (32 images, 4 channel blocks) 7.05 against
#: 6.49, 19.6-20.9 against 18.0-19.8. Not taken: 256 x 8², 5.45 against 4.89 alone but
#: level in the model (18.0-20.7 against 18.1-20.0: its filters, 2.25x F(2x2)'s 4.2 MB,
#: come from memory there), and 64 x 32² (level alone, 6.44 against 6.30).
F4_BATCH_SIDES = (16, 4)
#: Tiles an F(4x4, 3x3) unit of several whole images aims for, and the fewest an F(4x4)
#: unit may have: 32 (the 128 x 16² layer above ran 5.43 ms in units of 32 tiles, 6.42 in
#: units of 64 and 6.16 in units of 16; 256 x 8² 4.89, 5.33 and 5.60).
F4_IMAGE_TILES = 32


def filter_transform(filters: np.ndarray, tile: int) -> np.ndarray:
    """The transformed filters ``U[ξ][o][c]`` ((tile + 2)², O, C) of ``filters`` (O, C, 3, 3)
    for F(tile x tile, 3x3), in f32 (computed in f64).

    ``U[a, b] = Σ_ij G[a, i] G[b, j] g[i, j]`` is one product by ``G ⊗ G`` ((tile + 2)² x 9)
    of the filters read as a 9 x (O·C) matrix: a BLAS GEMM, 4-10 times faster than the
    equivalent ``einsum`` (which loops; 61 of a rebuilt ResNet-18's 120 ms cached compile),
    in blocks of columns whose f64 products stay in L2 (twice as fast again for 512²
    filters as one product, with the same values) and small enough that numpy's BLAS runs
    each on the calling thread (below)."""
    n = (tile + 2) ** 2
    o, c = filters.shape[:2]
    g = np.kron(_G[tile], _G[tile])  # (n, 9): row a·(tile + 2) + b, column i·3 + j
    taps = filters.reshape(o * c, 9)
    u = pages.empty((n, o * c), np.float32)  # on huge pages from 2 MiB up, written once
    for start in range(0, o * c, _TRANSFORM_BLOCK):
        stop = min(start + _TRANSFORM_BLOCK, o * c)
        u[:, start:stop] = g @ taps[start:stop].astype(np.float64).T
    return u.reshape(n, o, c)


#: Filters (O·C pairs) per block of the transform's GEMM: 36 x 768 f64 products (221 KB).
#: OpenBLAS (numpy's) splits a GEMM of more than 65536 x 4 multiply-adds between its threads,
#: which spin for each other: beside other processes (load 11) blocks of 8192 took 0.59-0.80
#: s of wall time for 512² filters, blocks of 768 (36 x 768 x 9 = 248,832) 0.05-0.06 s.
_TRANSFORM_BLOCK = 768


def winograd_tile(n: Dim, o: int, oh: int, ow: int, threads: int) -> int:
    """The output tile size (2 or 4) for a convolution with ``n`` images of ``o`` x ``oh``
    x ``ow`` outputs: 4 for one image of large planes (:data:`F4_MIN_SIZE`) and for a static
    batch of the planes :data:`F4_BATCH_SIDES` says."""
    del o, threads  # (the choice depends on the batch and the plane only, so far)
    if n == 1:
        return 4 if min(oh, ow) >= F4_MIN_SIZE else 2
    return 4 if type(n) is int and oh == ow and oh in F4_BATCH_SIDES else 2


def padded_row(w: int, left: int, ow: int, tile: int) -> int:
    """Elements of one zero-padded input row a Winograd unit copies rows into when its tiles
    reach past the image's columns (``left`` padding columns, then the ``w`` columns, then
    zeros up to the last tile's last input column)."""
    return max(left + w, tile * -(-ow // tile) + 2)


#: Floats a transformed plane's stride adds at most to its count (:func:`plane_stride`).
PLANE_PAD = 31


def plane_stride(count: str) -> str:
    """C: the stride between a Winograd unit's transformed planes (its 16 or 36 tile points)
    of ``count`` floats each: whole 64-byte lines, an odd number of them. With a stride of an
    even number of lines the transforms' 16 or 36 loads (stores) of one tile fall into a few
    of L1's 64 sets and evict each other: 64 channels of 56 tiles (a plane of 14,336 bytes,
    3.5 x 4 KiB) put the 36 points into two sets, and that F(4x4) unit ran 2.8x slower per
    tile than one of 42 tiles (8 sets) on the Zen 5; an odd number of lines puts every
    point into a set of its own."""
    return f"((({count}) + 15L) & ~15L) | 16L"


def scratch_per_thread(c: int, part: int, tiles: int, tile: int, row: int) -> int:
    """f32 elements of one thread's Winograd scratch: the transformed tiles of ``c`` input
    channels and the products of ``part`` output channels for ``tiles`` tiles (each of the
    two a ``(tile + 2)²`` planes :func:`plane_stride` apart), then ``tile + 2`` padded input
    rows of ``row`` elements (:func:`padded_row`)."""
    return (tile + 2) ** 2 * ((c + part) * tiles + 2 * PLANE_PAD) + (tile + 2) * row
