"""A module whose buffers fit ``dialect.RESIDENT_BYTES`` (half the L3, ``config.l3_held_bytes``)
calls the panel GEMM without the next-slice prefetch (``gemm_panels_resident``: the unit's text
with an L2 budget of 0, so panel groups of ``PANEL_GROUP_BYTES`` and rows outer as before the
budget); larger modules, and symbolic ones, call ``gemm_panels``; AVX2 builds the half panels
either way. The two units give the same bits (the W3 MLP's first layer in two-thread bands, and
a column-block product), both as INTERPRETER within f32 rounding. No timing."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from test_cpu_gemm_bands import _layer  # relu(x @ w + b), w and b constant

import opgraph as og
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import dialect, kernels
from opgraph.backends.cpu.codegen import module as codegen
from opgraph.backends.cpu.config import l3_held_bytes

WHOLE_PANELS = not default_config().panel_halves()


def _units(exe) -> set[str]:
    return {n for n in exe.generated.needs if n.startswith(kernels.NEED_PREFIX + "gemm")}


def test_the_resident_unit_is_the_panel_gemm_without_the_budget(monkeypatch):
    resident = dialect.HELPERS["gemm_panels_resident"]()
    assert "room = 0L - M * (k1 - k0) * 4L;" in resident
    monkeypatch.setattr(dialect, "NEXT_GROUP_L2_BYTES", 0)
    assert dialect.HELPERS["gemm_panels"]() == resident
    monkeypatch.setattr(dialect, "NEXT_GROUP_L2_BYTES", 896 << 10)
    assert dialect.HELPERS["gemm_panels"]() != resident
    assert dialect.HELPERS["gemm_panels_resident"]() == resident  # not the budget's


def test_the_threshold_is_half_the_l3():
    assert l3_held_bytes() // 2 == dialect.RESIDENT_BYTES
    assert dialect.panels_resident(dialect.RESIDENT_BYTES)
    assert not dialect.panels_resident(dialect.RESIDENT_BYTES + 1)


@pytest.mark.parametrize(
    ("sizes", "want"),
    [
        ([1 << 20, 3 << 20], True),
        ([8 << 20, 8 << 20], True),  # exactly half a 32 MiB L3 on such a CPU
        ([8 << 20, (8 << 20) + 1], False),
        ([1 << 10, 4 * og.dim("n", max=64)], False),  # a symbolic module's size
    ],
)
def test_the_module_counts_every_buffer(monkeypatch, sizes, want):
    monkeypatch.setattr(dialect, "RESIDENT_BYTES", 16 << 20)
    program = SimpleNamespace(buffers=[SimpleNamespace(nbytes=n) for n in sizes])
    assert codegen._resident(program) is want


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("rows", "inner", "cols"),
    [
        (256, 784, 512),  # the MLP's first layer: bands of 128 x 784 on two threads
        (128, 768, 1024),  # BERT's 768-deep shape: column blocks
        (49, 1100, 200),  # two inner blocks, a ragged last panel
    ],
)
def test_both_units_give_the_same_bits(monkeypatch, tmp_path, threads, rows, inner, cols):
    fn, x = _layer(rows, inner, cols)
    config = dataclasses.replace(default_config(), num_threads=threads, cache_dir=tmp_path)
    small = CpuBackend(config).compile(fn)
    monkeypatch.setattr(dialect, "RESIDENT_BYTES", 0)  # every module streams its panels
    large = CpuBackend(config).compile(fn)
    halves = "kernel:gemm_half_panels"
    assert _units(small) == ({"kernel:gemm_panels_resident"} if WHOLE_PANELS else {halves})
    assert _units(large) == ({"kernel:gemm_panels"} if WHOLE_PANELS else {halves})
    got = small(x)[0]
    np.testing.assert_array_equal(got, large(x)[0])
    want = og.backend("INTERPRETER").compile(fn)(x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_avx2_modules_call_the_half_panels_whatever_their_size(monkeypatch):
    fn, _ = _layer(64, 300, 96)
    config = dataclasses.replace(default_config(), isa="avx2")
    assert _units(CpuBackend(config).compile(fn)) == {"kernel:gemm_half_panels"}
    monkeypatch.setattr(dialect, "RESIDENT_BYTES", 0)
    assert _units(CpuBackend(config).compile(fn)) == {"kernel:gemm_half_panels"}
