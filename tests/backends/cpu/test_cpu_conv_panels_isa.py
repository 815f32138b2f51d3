"""Convolutions on each forced ISA against INTERPRETER: panel convolutions (few output
pixels, constant filters: AVX2 builds multiply a unit's block one panel at a time,
``codegen/conv_panels.py`` PANEL_BY_PANEL, AVX-512 builds the whole block per call; both from
one source, chosen by the preprocessor), and the patch-block convolutions of ResNet's stem and
stride-2 layers (``og_pw_px``: AVX2 tiles of 3 vectors x 4-row groups,
``codegen/pointwise_kernels.py``)."""

import dataclasses
import subprocess

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import conv_panels, dialect
from opgraph.backends.cpu.compiler import CFLAGS
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep

FORCED = ("avx2", "avx512")


def backend_for(isa: str, threads: int) -> CpuBackend:
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    return CpuBackend(dataclasses.replace(default_config(), isa=isa, num_threads=threads))


# (batch, channels, outputs, size, stride, padding, dilation, residual): every case has at
# most 256 output pixels, K = C·9 >= 512 and >= 64 outputs (a PanelConvStep).
CASES = [
    (1, 64, 64, 7, 1, 1, 1, False),  # 49 pixels: pixel tiles of 24, 24, 1
    (1, 64, 70, 7, 1, 1, 1, True),  # a panel of 6 outputs: tiles of 4 then 2 rows
    (1, 60, 96, 14, 2, 1, 1, False),  # stride 2 at 14x14: 7x7 outputs
    (2, 64, 72, 5, 1, 1, 1, True),  # two images: 50 pixels, image-major
    (1, 64, 64, 9, 1, 2, 2, False),  # dilation 2, padding 2
    (1, 64, 64, 8, 1, 0, 1, False),  # no padding: 6x6 = 36 pixels
    (1, 64, 64, 16, 2, 1, 1, False),  # 64 pixels: tiles of 24, 24, 16, no partial vector
    (1, 64, 64, 30, 2, 1, 1, True),  # 225 pixels: ten pixel tiles
]


def _function(case, kernel=3):
    n, c, o, size, stride, pad, dil, residual = case
    rng = np.random.default_rng(c * o + size)
    w = rng.standard_normal((o, c, kernel, kernel)) / np.sqrt(kernel * kernel * c)
    w = w.astype(np.float32)
    b = rng.standard_normal((o, 1, 1)).astype(np.float32)
    x = og.parameter(og.f32, (n, c, size, size))
    y = ops.convolution(x, og.constant(w), strides=(stride, stride), padding_below=(pad, pad),
                        padding_above=(pad, pad), dilations=(dil, dil))  # fmt: skip
    y = ops.add(y, ops.broadcast_to(og.constant(b), y.shape))
    params = [x]
    if residual:
        r = og.parameter(og.f32, y.shape)
        y = ops.add(y, r)
        params.append(r)
    fn = og.Function([ops.relu(y)], params)
    inputs = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    return fn, inputs


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", FORCED)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])) + "r" * c[7])
def test_panel_convolutions_match_interpreter(case, isa, threads):
    fn, inputs = _function(case)
    exe = backend_for(isa, threads).compile(fn)
    assert f"#if {conv_panels.PANEL_BY_PANEL}" in exe.source()
    (got,) = exe(*inputs)
    (want,) = og.backend("INTERPRETER").compile(fn)(*inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(9 * case[1]))


def test_only_avx2_builds_multiply_panel_by_panel():
    """The per-panel loop is one preprocessor branch: AVX2 without AVX-512 (the AVX-512
    branch is the call it was)."""
    assert conv_panels.PANEL_BY_PANEL == (
        "defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)"
    )


# (batch, channels, outputs, size, stride, padding, dilation, residual), kernel: patch blocks
# (PointwiseConvStep with unit patches): output channels of partial 8-row panels (a 4-row
# group only, or one and a half), pixel counts that leave 1- and 2-vector tails.
PATCH_CASES = [
    ((1, 3, 64, 60, 2, 3, 1, False), 7),  # the stem's shape, smaller: 30x30 outputs
    ((1, 3, 20, 45, 2, 3, 1, False), 7),  # 20 outputs: panels of 8, 8, 4; 23x23 outputs
    ((1, 16, 70, 34, 2, 1, 1, True), 3),  # 70 outputs (last panel 6 rows), 17x17
    ((2, 8, 12, 29, 2, 1, 1, False), 3),  # 12 outputs (a panel of 4), 15x15, two images
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", FORCED)
@pytest.mark.parametrize("case", PATCH_CASES, ids=lambda c: "x".join(map(str, c[0][:5])))
def test_patch_block_convolutions_match_interpreter(case, isa, threads):
    fn, inputs = _function(*case)
    exe = backend_for(isa, threads).compile(fn)
    assert any(isinstance(s, PointwiseConvStep) for s in exe.program.steps)
    (got,) = exe(*inputs)
    (want,) = og.backend("INTERPRETER").compile(fn)(*inputs)
    k = case[1] * case[1] * case[0][1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_avx2_pixel_tiles_keep_accumulators_and_inputs_in_registers(tmp_path):
    """``og_pw_px`` compiled for AVX2 as modules are (``-mtune=native``): no multiply-add
    takes a memory operand (no accumulator on the stack, and each input vector loaded once
    per k rather than folded into every multiply-add: 16 loads per 12 of them, slower; the
    check fails without the kernel's empty ``asm``)."""
    if not cpu_config.supports_isa("avx2"):
        pytest.skip("this CPU cannot run avx2 code")
    compiler = default_config().compiler
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "pw_px.c"
    source.write_text(
        "\n".join(
            [
                dialect.PRELUDE,
                dialect.HELPERS["pw_tile"](),
                dialect.HELPERS["pw_px"](),
                "void entry(const float* w, const float* x, float* y, long K, long n) {",
                "  og_pw_px(w, x, 336, K, y, 12544, 8, n);",
                "}",
            ]
        )
    )
    flags = [CFLAGS[0], *cpu_config.ISA_FLAGS["avx2"], *CFLAGS[1:]]
    flags = [f for f in flags if f not in ("-shared", "-pipe")]
    asm = tmp_path / "pw_px.s"
    done = subprocess.run(
        [compiler, *flags, "-S", str(source), "-o", str(asm)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    fmas = [line.strip() for line in asm.read_text().splitlines() if "vfmadd" in line]
    assert len(fmas) >= 12 + 8 + 4  # the 3-, 2- and 1-vector tiles of 4-row groups
    assert [f for f in fmas if "(" in f] == []


# (batch, channels, outputs, size (h, w), kernel, strides, padding below / above, dilations):
# panel convolutions whose pixels' windows lie inside the image, cross its rows only, its
# columns only, or both; uneven padding, rectangular kernels and strides.
WINDOW_CASES = [
    (1, 64, 64, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    (1, 64, 64, (9, 11), (3, 5), (2, 1), (0, 2), (2, 1), (1, 1)),
    (2, 48, 64, (8, 6), (5, 3), (1, 2), (2, 0), (1, 1), (1, 2)),
    (1, 72, 64, (6, 9), (2, 4), (1, 1), (1, 0), (0, 3), (2, 1)),
]


@pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda c: "x".join(map(str, c[3] + c[4])))
def test_patches_of_inside_windows_equal_the_tested_copy(case, monkeypatch):
    """The patches of pixels whose windows' columns lie inside the image, copied at constant
    offsets (``conv_panels.INSIDE_PATCHES``), give the outputs of the tap-by-tap copy bit for
    bit, and both match INTERPRETER."""
    n, c, o, size, kernel, strides, below, above, dilations = case
    rng = np.random.default_rng(c + o + kernel[1])
    w = (rng.standard_normal((o, c, *kernel)) / np.sqrt(c * kernel[0] * kernel[1])).astype(
        np.float32
    )
    x = og.parameter(og.f32, (n, c, *size))
    y = ops.convolution(x, og.constant(w), strides=strides, padding_below=below,
                        padding_above=above, dilations=dilations)  # fmt: skip
    fn = og.Function([y], [x])
    data = rng.standard_normal(x.shape).astype(np.float32)
    outputs = []
    for inside in (False, True):
        monkeypatch.setattr(conv_panels, "INSIDE_PATCHES", inside)
        exe = CpuBackend(dataclasses.replace(default_config(), num_threads=2)).compile(fn)
        assert any(type(s).__name__ == "PanelConvStep" for s in exe.program.steps)
        assert ("iw0 >= 0" in exe.source()) is inside
        outputs.append(exe(data)[0])
    np.testing.assert_array_equal(outputs[0], outputs[1])
    (want,) = og.backend("INTERPRETER").compile(fn)(data)
    k = c * kernel[0] * kernel[1]
    np.testing.assert_allclose(outputs[1], want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
