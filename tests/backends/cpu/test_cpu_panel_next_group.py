"""The AVX-512 panel GEMM walks single panels where ``a``'s inner block and two panel slices fit
``dialect.NEXT_GROUP_L2_BYTES`` (a share of the L2 cache, ``config.l2_cache_bytes``), and the
row tiles after a panel's first prefetch the next panel's slice into L2
(``dialect._NEXT_GROUP``). Neither changes a sum: the unit gives the same bits as the same unit
without the prefetch and as one with ``NEXT_GROUP_L2_BYTES`` 0 (panel groups or rows outer, no
prefetch), each built apart and called through ``ctypes`` on random floats (so any change of
the summation order would show), for products whose next slice is the next panel's in the
inner block, the first panel's of the next block, or none (one row tile, the last block,
``a``'s inner block too large), over all columns, in the 64-column units of a panel
convolution and in 96-column units (rows outer without the budget: BERT's FFN 2 in a
two-thread split), and the float64 product's values. The budget is a literal of the unit's
text, so the library unit's cache key follows it. No timing."""

import ctypes

import numpy as np
import pytest
from test_cpu_micro_kernel import _pack, _unit

from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.codegen import dialect, kernels
from opgraph.backends.cpu.compiler import Toolchain
from opgraph.backends.cpu.config import l2_cache_bytes

RNG = np.random.default_rng(129)
PREFETCH = "__builtin_prefetch(pf + (k - k0) * pfb, 0, 2);"
POINTER = ctypes.POINTER(ctypes.c_float)


def test_only_the_avx512_kernels_prefetch_the_next_group():
    text = dialect.HELPERS["gemm_panels"]()
    avx512, *others = text.split("#elif")
    # og_mk_full (Zen 4's full tiles) and og_mk_tile, once in each inner loop
    assert avx512.count(PREFETCH) == 2
    assert "nk1 = K * (kb + 2) / blocks" in avx512
    # single panels, and the prefetch, only where a's inner block leaves L2 room for two slices
    room = f"room = {dialect.NEXT_GROUP_L2_BYTES}L - M * (k1 - k0) * 4L;"
    assert room in avx512
    assert "int ahead = room >= 2 * slice;" in avx512
    assert "long group = ahead ? 1 : rows_outer ? panels :" in avx512
    # each later row tile prefetches its share of the next slice, not a line per inner step
    assert "long share = ((nk1 - nk0) * 128L + tiles - 2) / (tiles - 1);" in avx512
    assert "for (pfb = 64; pfb > 8 && pfb / 2 * (k1 - k0) >= share; pfb /= 2) {}" in avx512
    for branch in [*others, dialect.HELPERS["gemm_half_panels"]()]:
        assert "__builtin_prefetch(pf" not in branch


@pytest.mark.parametrize("tiles", range(2, 40))
@pytest.mark.parametrize("depth", [64, 550, 768, 1024])
def test_the_prefetch_step_covers_a_tiles_share(tiles, depth):
    """The step ``pfb`` (bytes further per inner index) that ``_NEXT_GROUP``'s loop picks: the
    smallest of 8, 16, 32, 64 that reaches a tile's share of the next slice (128 bytes an
    inner index, the next slice as deep as this block), so the tiles after the first reach
    all of it (their parts start a share apart), and never over a line (no line skipped)."""
    share = -(-(depth * 128) // (tiles - 1))
    pfb = 64
    while pfb > 8 and pfb // 2 * depth >= share:
        pfb //= 2
    assert pfb in (8, 16, 32, 64)
    assert pfb == 64 or pfb * depth >= share  # a tile's part reaches its share
    assert pfb == 8 or pfb * depth < 2 * share  # the smallest such step
    if tiles > 2:  # two row tiles: the second reaches half of each slice, as before
        reach = depth * 128 * (tiles - 2) // (tiles - 1) + pfb * depth
        assert reach >= depth * 128


def _product(lib: ctypes.CDLL, a: np.ndarray, panels: np.ndarray, cols: int, unit: int):
    rows, inner = a.shape
    c = np.full((rows, cols), np.nan, np.float32)
    for n0 in range(0, cols, unit):
        lib.og_gemm_panels(
            a.ctypes.data_as(POINTER), ctypes.c_long(inner), panels.ctypes.data_as(POINTER),
            c.ctypes.data_as(POINTER), ctypes.c_long(cols), ctypes.c_long(rows),
            ctypes.c_long(inner), ctypes.c_long(n0), ctypes.c_long(min(n0 + unit, cols)),
        )  # fmt: skip
    return c


@pytest.mark.parametrize("name", ["native", "avx512-zen4"])
@pytest.mark.parametrize(
    ("rows", "inner", "cols"),
    [
        (49, 4608, 512),  # ResNet-18's 7x7x512 product: five inner blocks
        (29, 3072, 300),  # three blocks, a ragged last panel
        (13, 2100, 100),  # two row tiles: the second prefetches half of each next slice
        (7, 1500, 64),  # one row tile: no prefetch
        (80, 1100, 200),  # two blocks of 550, seven panels one at a time
        (128, 768, 1024),  # BERT's 768-deep products: a's block 384 KiB, single panels
        (128, 3072, 300),  # FFN 2: 512 KiB blocks of a, rows outer in 96-column units before
        (240, 1000, 200),  # a's block (937.5 KiB) over the budget: groups, no prefetch
    ],
)
def test_same_bits_without_the_prefetch(monkeypatch, tmp_path, name, rows, inner, cols):
    monkeypatch.setattr(dialect, "NEXT_GROUP_L2_BYTES", 896 << 10)  # a 1 MiB L2's, any CPU
    units = []
    for variant in ("with", "without", "groups"):
        if variant == "without":
            monkeypatch.setattr(dialect, "_group_prefetch", lambda lanes: "")
            assert PREFETCH not in dialect.HELPERS["gemm_panels"]()
        if variant == "groups":
            monkeypatch.setattr(dialect, "NEXT_GROUP_L2_BYTES", 0)
        (tmp_path / variant).mkdir()
        units.append(_unit(name, tmp_path / variant))
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    a = RNG.standard_normal((rows, inner)).astype(np.float32)
    panels = _pack(w, False)
    want = a.astype(np.float64) @ w.astype(np.float64)
    for unit in (64, 96, cols):  # a panel convolution's units, FFN 2's, and one call
        got = _product(units[0], a, panels, cols, unit)
        for other in units[1:]:
            np.testing.assert_array_equal(got, _product(other, a, panels, cols, unit))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_budget_is_a_share_of_the_l2_and_keys_the_unit(monkeypatch):
    assert l2_cache_bytes() * 7 // 8 == dialect.NEXT_GROUP_L2_BYTES
    config = default_config()
    if config.compiler is None:
        pytest.skip("no C compiler")
    compiler = Toolchain(config)
    before = compiler.unit_key("gemm_panels")
    monkeypatch.setattr(dialect, "NEXT_GROUP_L2_BYTES", dialect.NEXT_GROUP_L2_BYTES // 2)
    for cached in (kernels._definition, kernels.suffix):  # the unit's text, once per process
        cached.cache_clear()
    try:
        assert compiler.unit_key("gemm_panels") != before
    finally:
        for cached in (kernels._definition, kernels.suffix):
            cached.cache_clear()
