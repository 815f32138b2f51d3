"""Quantized convolutions on channel quads (``QConvStep.interleaved``: groups of whole
channel quads; the input rows interleaved once per unit, the patch rows copied from them)
agree exactly with INTERPRETER's reference in every unit layout (blocks of rows, shared,
batched), with padding, strides, dilations, groups, i8 data and two threads."""

import dataclasses

import numpy as np
import pytest
from int8_graphs import conv_integer_graph  # beside this file (rootdir import)

import opgraph as og
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.fused.lowering.quantized import QConvStep, channel_quads

INTERPRETER = og.backend("INTERPRETER")
HAS_AVX2 = {"avx2", "fma", "bmi2"} <= cpu_config.cpu_flags()


@pytest.fixture(scope="module", params=[("native", 1), ("native", 2), ("avx2", 1)])
def backend(request: pytest.FixtureRequest) -> CpuBackend:
    """This CPU's best path on one and two threads (per-thread interleaved areas), and the
    portable 8-bit kernels (x86-64-v3)."""
    isa, threads = request.param
    if isa == "avx2" and not HAS_AVX2:
        pytest.skip("this CPU has no AVX2")
    return CpuBackend(dataclasses.replace(default_config(), isa=isa, num_threads=threads))


def _qconv_steps(exe: object) -> list[QConvStep]:
    return [s for s in getattr(exe, "program").steps if isinstance(s, QConvStep)]  # noqa: B009


CASES = [  # (N, C, H, W, O, kernel, strides, padding, dilations, groups, type, zero)
    (1, 64, 40, 40, 24, (3, 3), (1, 1), (1, 1), (1, 1), 1, og.u8, 9),  # blocks of 11 rows
    (2, 16, 17, 15, 24, (3, 3), (2, 2), (1, 1), (1, 1), 1, og.u8, 128),  # shared, odd sizes
    (1, 8, 9, 9, 12, (3, 3), (1, 1), (2, 2), (2, 2), 2, og.i8, -3),  # groups of 4, dilated, i8
    (1, 32, 14, 14, 40, (1, 1), (2, 2), (0, 0), (1, 1), 1, og.u8, 17),  # 1x1 strided
    (3, 16, 9, 9, 20, (3, 3), (2, 2), (0, 0), (1, 1), 1, og.i8, 5),  # last column unread
    (4, 32, 4, 4, 40, (3, 3), (1, 1), (1, 1), (1, 1), 1, og.u8, 7),  # batched, whole panels
    (3, 16, 5, 5, 26, (3, 3), (1, 1), (3, 3), (1, 1), 2, og.i8, -9),  # padding past the taps
    (2, 12, 6, 7, 16, (2, 4), (1, 3), (1, 2), (2, 1), 1, og.u8, 250),  # uneven windows
]


@pytest.mark.parametrize(
    ("n", "c", "h", "w", "o", "kernel", "strides", "padding", "dilations", "groups", "t", "zero"),
    CASES,
)
def test_channel_quad_convolutions_are_exact(
    backend: CpuBackend,
    n: int,
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    padding: tuple[int, int],
    dilations: tuple[int, int],
    groups: int,
    t: og.ElementType,
    zero: int,
) -> None:
    rng = np.random.default_rng(c * o + h)
    fn, data = conv_integer_graph(
        rng, (n, c, h, w), o, kernel, strides, padding, dilations, groups, t, zero
    )
    exe = backend.compile(fn)
    steps = _qconv_steps(exe)
    assert steps and all(s.interleaved > 0 for s in steps)
    np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))


def test_one_dimensional_convolution_on_channel_quads(cpu: CpuBackend) -> None:
    rng = np.random.default_rng(4)
    fn, data = conv_integer_graph(
        rng, (2, 8, 30), 10, (5,), (2,), (2,), (1,), 1, og.u8, 3, padding_end=(1,)
    )
    exe = cpu.compile(fn)
    assert any(s.interleaved for s in _qconv_steps(exe))
    np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))


def test_channels_not_in_quads_keep_the_byte_patches(cpu: CpuBackend) -> None:
    """Three input channels (an image stem) are not whole quads: the patches are built tap
    by tap as before, and stay exact."""
    rng = np.random.default_rng(5)
    fn, data = conv_integer_graph(
        rng, (1, 3, 16, 16), 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, og.u8, 60
    )
    exe = cpu.compile(fn)
    steps = _qconv_steps(exe)
    assert steps and steps[0].interleaved == 0
    np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))


def test_interleaved_rows_cover_every_tap() -> None:
    """The interleaved block holds every input row and column a block of output rows reads:
    the taps' reach, the padding below, and the whole input row."""
    windows = ((3, 3), (2, 2), (1, 1), (1, 1))
    rows, cols = channel_quads((17, 15), (9, 8), 4, windows, 16)
    assert rows == 3 * 2 + 2 + 1  # (block - 1) * stride + (kh - 1) * dilation + 1
    assert cols == 1 + max(15, 7 * 2 - 1 + 2 + 1)
    assert channel_quads((17, 15), (9, 8), 4, windows, 6) == (0, 0)
