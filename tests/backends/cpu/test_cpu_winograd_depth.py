"""Winograd units whose products run over more than ``PRODUCT_DEPTH`` input channels split
them into OpenBLAS calls of that many, each after the first adding to ``M[ξ]``
(``winograd.product_depth``): within tolerance of INTERPRETER and of the same build in one
call (a rounding change only), on one and two threads, with depths that do and do not divide
evenly, in AVX-512 builds; AVX2 builds, the bf16 emitter and large products keep one call (no
timing)."""

import dataclasses
from unittest import mock

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfig, default_config
from opgraph.backends.cpu.codegen import bf16, winograd
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.program import WinogradStep

RNG = np.random.default_rng(1128)


def _backend(threads: int, isa: str | None = None) -> CpuBackend:
    config = dataclasses.replace(default_config(), num_threads=threads)
    return CpuBackend(dataclasses.replace(config, isa=isa) if isa else config)


def _splits(config: CpuConfig) -> bool:
    return config.vector_lanes() == winograd.PRODUCT_DEPTH_LANES


def _conv(c: int, o: int, size: int):
    """relu(conv3x3(x) + b + r), constant filters and bias, one image."""
    x = og.parameter(og.f32, (1, c, size, size))
    r = og.parameter(og.f32, (1, o, size, size))
    w = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    y = ops.convolution(x, og.constant(w), (1, 1), (1, 1), (1, 1), (1, 1))
    b = og.constant(RNG.standard_normal(o).astype(np.float32))
    y = ops.relu(ops.add(ops.add(y, ops.broadcast(b, y.shape, (0, 2, 3))), r))
    arrays = [
        RNG.standard_normal((1, c, size, size)).astype(np.float32),
        RNG.standard_normal((1, o, size, size)).astype(np.float32),
    ]
    return og.Function([y], [x, r]), arrays


CASES = {  # name: (c, o, size)
    "ResNet-18 256 x 14x14": (256, 256, 14),
    "an uneven depth (320 = 128 + 128 + 64)": (320, 128, 14),
}


def test_product_depth():
    assert winograd.product_depth(64, 49, 128) == 128
    assert winograd.product_depth(64, 49, 256) == winograd.PRODUCT_DEPTH
    assert winograd.product_depth(128, 49, 256) == winograd.PRODUCT_DEPTH
    assert winograd.product_depth(256, 128, 256) == 256  # past PRODUCT_DEPTH_WORK
    assert bf16.Bf16WinogradEmitter.splits_depth is False


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_split_products_match_the_interpreter_and_one_call(name, threads):
    c, o, size = CASES[name]
    fn, arrays = _conv(c, o, size)
    backend = _backend(threads)
    exe = backend.compile(fn)
    assert any(isinstance(s, WinogradStep) for s in exe.program.steps)
    assert (f"k0 += {winograd.PRODUCT_DEPTH}L" in exe.source()) == _splits(backend.config)
    with mock.patch.object(winograd, "PRODUCT_DEPTH_WORK", 0):
        whole = _backend(threads).compile(fn)
    assert "k0 += " not in whole.source()
    want = og.backend("INTERPRETER").compile(fn)(*arrays)[0].astype(np.float64)
    got = exe(*arrays)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=1e-4 * scale, rtol=1e-4)
    np.testing.assert_allclose(got, whole(*arrays)[0], atol=2e-5 * scale, rtol=0)


def test_avx2_builds_keep_one_call():
    if not supports_isa("avx2"):
        pytest.skip("this CPU has no AVX2")
    fn, arrays = _conv(256, 64, 14)
    exe = _backend(2, "avx2").compile(fn)
    assert "k0 += " not in exe.source()
    want = og.backend("INTERPRETER").compile(fn)(*arrays)[0]
    np.testing.assert_allclose(exe(*arrays)[0], want, atol=1e-4 * (np.max(np.abs(want)) + 1))
