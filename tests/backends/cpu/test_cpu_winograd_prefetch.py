"""An f32 Winograd step whose filters exceed ``winograd.PREFETCH_FILTER_BYTES`` (half the L2), in
a module that does not keep its buffers in L3 (``panels_resident``), prefetches before each
product call the unit's filter slice of the next one (``__builtin_prefetch``): in split calls
(``PRODUCT_DEPTH``, an uneven depth), in whole-depth calls and in F(4x4) steps. A hint only: the
same bits as the build without it, and INTERPRETER within f32 rounding, on one and two threads;
resident modules and small filters prefetch nothing. No timing."""

import dataclasses
from unittest import mock

import numpy as np
import pytest
from test_cpu_winograd_depth import _conv  # relu(conv3x3(x) + b + r), constant filters

import opgraph as og
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import module as codegen
from opgraph.backends.cpu.codegen import winograd
from opgraph.backends.cpu.config import l2_cache_bytes
from opgraph.backends.fused.program import WinogradStep

PREFETCH = "__builtin_prefetch(q + r * "

CASES = {  # name: (c, o, size)
    "F(2x2), ResNet-18 256 x 14x14": (256, 256, 14),
    "F(2x2), an uneven depth (320 = 128 + 128 + 64)": (320, 128, 14),
    "F(4x4), ResNet-18 128 x 28x28": (128, 128, 28),
}


def _compile(fn, threads: int, resident: bool, least: int):
    config = dataclasses.replace(default_config(), num_threads=threads)
    with (
        mock.patch.object(codegen, "_resident", lambda program: resident),
        mock.patch.object(winograd, "PREFETCH_FILTER_BYTES", least),
    ):
        return CpuBackend(config).compile(fn)


def test_the_threshold_is_half_the_l2():
    assert l2_cache_bytes() // 2 == winograd.PREFETCH_FILTER_BYTES


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_the_prefetch_keeps_the_bits(name, threads):
    c, o, size = CASES[name]
    fn, arrays = _conv(c, o, size)
    exe = _compile(fn, threads, resident=False, least=0)
    assert any(isinstance(s, WinogradStep) for s in exe.program.steps)
    assert PREFETCH in exe.source()
    plain = _compile(fn, threads, resident=False, least=1 << 60)
    assert PREFETCH not in plain.source()
    got = exe(*arrays)[0]
    np.testing.assert_array_equal(got, plain(*arrays)[0])
    want = og.backend("INTERPRETER").compile(fn)(*arrays)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=1e-4 * scale, rtol=1e-4)


def test_resident_modules_and_small_filters_prefetch_nothing():
    c, o, size = CASES["F(2x2), ResNet-18 256 x 14x14"]
    fn, _ = _conv(c, o, size)
    assert PREFETCH not in _compile(fn, 2, resident=True, least=0).source()
    filters = 16 * o * c * 4
    assert PREFETCH not in _compile(fn, 2, resident=False, least=filters).source()
    assert PREFETCH in _compile(fn, 2, resident=False, least=filters - 1).source()
