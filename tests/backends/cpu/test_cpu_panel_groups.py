"""The AVX-512 panel GEMM walks the panels in groups (``dialect.PANEL_GROUP_BYTES``) with the
row tiles outer inside each group: products with more panels than a group holds, a last group
of one panel, a ragged last panel and rows that are not whole tiles give the float64 product's
values, and every split between threads (other groups per call) gives the same bits, since
each output's sum runs over the same inner blocks in the same order whatever the tile order."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(105)


def test_groups_hold_several_slices():
    """Groups of four 768-row slices and three 1024-row ones (where ``a``'s inner block leaves
    no L2 room for single panels and the next one's prefetch: ``NEXT_GROUP_L2_BYTES``)."""
    assert dialect.PANEL_GROUP_BYTES // (768 * 32 * 4) == 4
    assert dialect.PANEL_GROUP_BYTES // (1024 * 32 * 4) == 3
    text = dialect.HELPERS["gemm_panels"]()
    avx512 = text.split("#elif")[0]
    assert "long slice = (k1 - k0) * 128L" in avx512
    assert f"{dialect.PANEL_GROUP_BYTES}L / slice" in avx512
    assert "group" not in text.split("#elif")[1]  # AVX2 keeps its order


@pytest.mark.parametrize(
    ("rows", "inner", "cols"),
    [
        (40, 768, 416),
        (29, 3072, 300),
        (128, 768, 3072),
        (7, 64, 100),
        (96, 200, 1000),
        (256, 1024, 520),  # a's 1 MiB block over NEXT_GROUP_L2_BYTES: groups of three
    ],
)
def test_grouped_panels_match(cpu, parallel_cpu, rows, inner, cols):
    x = og.parameter(og.f32, (rows, inner))
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    fn = og.Function([ops.matmul(x, og.constant(w))], [x])
    data = RNG.standard_normal((rows, inner)).astype(np.float32)
    want = data.astype(np.float64) @ w.astype(np.float64)
    results = []
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        assert [s.panel for s in exe.program.steps if isinstance(s, GemmStep)] == [32]
        (got,) = exe(data)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        results.append(got)
    np.testing.assert_array_equal(results[0], results[1])
