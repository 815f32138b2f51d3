"""Patch convolutions whose products read the input's phase planes in place of patch blocks
(``PointwiseConvStep.from_planes``: ``og_pw_pl`` and its bias, residual and hard-swish
variants, the patch rows' offsets in ``<name>_off``): taken where every output row is whole
vectors of 16 pixels, bitwise the outputs of the patch blocks (the same products in the same
order) and INTERPRETER's within tolerance, on both instruction sets, one and several threads,
batches, partial panels and the epilogues in registers or as a pass."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.lowering import pointwise
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep

RNG = np.random.default_rng(130)

CASES = {  # name: (n, c, o, (h, w), kernel, strides, padding)
    "7x7 stride 2 stem, 224x224": (1, 3, 20, (224, 224), (7, 7), (2, 2), (3, 3)),
    "3x3 stride 1, batch of 4": (4, 3, 24, (48, 48), (3, 3), (1, 1), (1, 1)),
    "7x7 stride 2, 64x96 -> 32x48, batch of 2": (2, 2, 8, (64, 96), (7, 7), (2, 2), (3, 3)),
    # 9 taps per 4 stride steps: planes only because the products read them (PLANE_REUSE)
    "3x3 stride 2 stem, 224x224 (MobileNetV3's)": (1, 3, 16, (224, 224), (3, 3), (2, 2), (1, 1)),
}
EPILOGUES = ["bias relu", "bias", "bias residual relu", "bias hard-swish", "gelu pass"]


def _graph(n, c, o, hw, kernel, strides, padding, epilogue):
    """The convolution with ``epilogue`` (:data:`EPILOGUES`) and its inputs."""
    x = og.parameter(og.f32, (n, c, *hw))
    weights = RNG.standard_normal((o, c, *kernel)) / np.sqrt(c * int(np.prod(kernel)))
    y = ops.convolution(x, og.constant(weights.astype(np.float32)), strides, None, padding,
                        padding)  # fmt: skip
    b = og.constant(RNG.standard_normal(o).astype(np.float32))
    z = ops.add(y, ops.broadcast(b, y.shape, (0, 2, 3)))
    r = og.parameter(og.f32, y.shape)
    half = ops.multiply(y, og.constant(np.full(y.shape, 0.5, np.float32)))
    erf = ops.erf(ops.divide(y, og.constant(np.full(y.shape, 2**0.5, np.float32))))
    top = {
        "bias relu": ops.relu(z),
        "bias": z,
        "bias residual relu": ops.relu(ops.add(z, r)),
        "bias hard-swish": ops.hard_swish(z),
        "gelu pass": ops.multiply(half, ops.add(erf, og.constant(np.ones(y.shape, np.float32)))),
    }[epilogue]
    params = [x, r] if "residual" in epilogue else [x]
    args = [RNG.standard_normal(tuple(int(d) for d in p.shape)).astype(np.float32) for p in params]
    return og.Function([top], params), args


def _backend(isa, threads):
    if not supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    config = dataclasses.replace(default_config(), isa=isa, num_threads=threads,
                                 parallel_threshold=1)  # fmt: skip
    return CpuBackend(config)


def _conv(exe):
    (conv,) = [s for s in exe.program.steps if isinstance(s, PointwiseConvStep)]
    return conv


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_products_from_the_planes_match_the_patch_blocks(name, threads, isa, monkeypatch):
    backend = _backend(isa, threads)
    fn, args = _graph(*CASES[name], "bias relu")
    direct = backend.compile(fn)
    conv = _conv(direct)
    assert conv.unit_patches and conv.plane_rows > 0 and conv.from_planes
    assert conv.planes_at == 0 and "og_pw_plb(" in direct.source()
    monkeypatch.setattr(pointwise, "reads_planes", lambda out_hw: False)
    blocks = backend.compile(fn)
    assert not _conv(blocks).from_planes and "og_pw_pl" not in blocks.source()
    got = direct(*args)[0]
    np.testing.assert_array_equal(got, blocks(*args)[0])
    want = og.backend("INTERPRETER").compile(fn)(*args)[0]
    scale = float(np.max(np.abs(want))) + 1
    np.testing.assert_allclose(got, want, atol=2e-5 * scale, rtol=1e-5)


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_planes_with_every_epilogue(epilogue, isa, monkeypatch):
    """The bias (``og_pw_plb``), residual (``og_pw_plr``) and hard-swish (``og_pw_plh``)
    forms, and the plain ``og_pw_pl`` before an epilogue pass: bitwise the patch blocks'."""
    backend = _backend(isa, 2)
    fn, args = _graph(*CASES["7x7 stride 2, 64x96 -> 32x48, batch of 2"], epilogue)
    direct = backend.compile(fn)
    assert _conv(direct).from_planes
    kernel = {"bias relu": "plb", "bias": "plb", "bias residual relu": "plr",
              "bias hard-swish": "plh", "gelu pass": "pl"}[epilogue]  # fmt: skip
    assert f"og_pw_{kernel}(" in direct.source()
    monkeypatch.setattr(pointwise, "reads_planes", lambda out_hw: False)
    blocks = backend.compile(fn)
    np.testing.assert_array_equal(direct(*args)[0], blocks(*args)[0])
    want = og.backend("INTERPRETER").compile(fn)(*args)[0]
    scale = float(np.max(np.abs(want))) + 1
    np.testing.assert_allclose(direct(*args)[0], want, atol=2e-5 * scale, rtol=1e-5)


def test_rows_of_partial_vectors_keep_the_patch_blocks(parallel_cpu):
    """A 112x112 input (56 output columns: not whole vectors of 16) copies patch blocks."""
    fn, args = _graph(1, 3, 16, (112, 112), (7, 7), (2, 2), (3, 3), "bias relu")
    exe = parallel_cpu.compile(fn)
    conv = _conv(exe)
    assert conv.unit_patches and conv.plane_rows > 0 and not conv.from_planes
    assert conv.planes_at > 0 and "og_pw_pl" not in exe.source()


@pytest.mark.parametrize(("width", "whole"), [(112, True), (32, True), (56, False), (8, False)])
def test_reads_planes_needs_whole_vectors_per_output_row(width, whole):
    assert pointwise.reads_planes((7, width)) is whole


def test_offsets_point_at_the_patch_rows_in_the_planes():
    """``<name>_off`` of the 7x7 stride-2 stem: row (c, ki, kj) at plane (c, kj % 2), row
    ki, column kj // 2 (planes of 229 x 115)."""
    fn, _ = _graph(1, 3, 16, (224, 224), (7, 7), (2, 2), (3, 3), "bias relu")
    exe = CpuBackend(default_config()).compile(fn)
    conv = _conv(exe)
    rows, cols = conv.plane_rows, conv.plane_cols
    assert (rows, cols) == (229, 115)
    line = next(t for t in exe.source().splitlines() if "_off[147] = {" in t)
    off = [int(v) for v in line.split("{")[1].rstrip("};").split(",")]
    want = [((c * 2 + kj % 2) * rows + ki) * cols + kj // 2
            for c in range(3) for ki in range(7) for kj in range(7)]  # fmt: skip
    assert off == want
