"""How bf16 convolutions split between two threads (``codegen/bf16_units.py``): the units a
two-thread build takes, and its results bit for bit those of a one-thread build (every
tile's or pixel's products sum the same values in the same order, whoever runs its unit)."""

import dataclasses

import numpy as np
import pytest
from test_cpu_bf16 import BOUND, needs_bf16, relative
from test_cpu_bf16_winograd import conv

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import bf16_units
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters
from opgraph.backends.fused.program import ConvStep, WinogradStep


def _backend(threads: int) -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), num_threads=threads))


def _winograd(exe: og.Executable) -> list[WinogradStep]:
    return [s for s in exe.program.steps if isinstance(s, WinogradStep)]  # type: ignore[attr-defined]


def _units(step: WinogradStep) -> int:
    assert step.x is not None and step.out is not None
    n, oh = step.x.shape[0], step.out.shape[2]
    assert type(n) is int and type(oh) is int
    th = -(-oh // 2)
    return -(-n // step.images) * -(-th // step.block_rows) * step.channel_blocks


CASES = [  # (n, c, h, o, pad): the f32 layout's units on two threads -> the bf16 units
    (1, 64, 56, 64, 1),  # ResNet-18 b1's 56x56 stage: 6 units of 5 tile rows -> 10 of 2-3
    (1, 128, 28, 128, 1),  # its 28x28 stage: 4 units of 4 (uneven: 4, 4, 4, 2) -> 14 of 1
    (32, 256, 8, 256, 1),  # CIFAR's 8x8 stage: 4 units of 8 images -> 8 of 4
    (1, 64, 27, 32, 1),  # an odd plane: 14 tile rows, the last half outside
    (5, 32, 8, 64, 1),  # 5 images, one unit -> 2 of 3 and 2 (the most even there is)
    (1, 32, 14, 32, 1),  # one unit of 7 tile rows -> 2 of 3 and 4
    (1, 256, 14, 256, 1),  # ResNet-18 b1's 14x14: output-channel blocks, shared transform
    (32, 128, 4, 256, 1),  # CIFAR's 4x4 stage in small: pair panels, shared transform
]


@needs_bf16
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_two_threads_equal_one_thread_bitwise(case):
    fn, xv = conv(case)
    one = _backend(1).compile(fn, precision="bf16")
    backend = _backend(2)
    two = backend.compile(fn, precision="bf16")
    (step,) = _winograd(two)
    assert _units(step) >= 2, "one unit: the second thread has nothing to do"
    lib = backend.toolchain.runtime()
    before = runtime_counters(lib)
    got = two(xv)[0]
    after = runtime_counters(lib)
    assert after.jobs > before.jobs, "the two-thread build ran its step on one thread"
    np.testing.assert_array_equal(got, one(xv)[0])
    assert relative(got, og.backend("CPU").compile(fn)(xv)[0]) < BOUND


@needs_bf16
def test_units_the_threads_divide():
    """ResNet-18 b1's 56x56 stage: 28 tile rows; 5 a unit (6 units) and 4 (7) leave fewer
    than four units a thread or one thread a unit more; 3 a unit gives 10 units of 2-3."""
    fn, _ = conv((1, 64, 56, 64, 1))
    (step,) = _winograd(_backend(2).compile(fn, precision="bf16"))
    assert (step.block_rows, _units(step)) == (3, 10)
    assert _units(step) >= 2 * bf16_units.UNITS_PER_THREAD
    (one,) = _winograd(_backend(1).compile(fn, precision="bf16"))
    assert _units(one) < 10, "a one-thread build keeps the lowering's units"


@needs_bf16
def test_a_small_plane_takes_the_most_even_units_it_has():
    """A 14x14 plane of 32 channels is one unit of 7 tile rows for the lowering (one unit
    for two threads). A row of 7 tiles is under LEAST_TILES, and no split into units of
    2-6 rows gives a thread less than 4 of the 7 rows: the largest such units, 3 and 4 rows."""
    fn, _ = conv((1, 32, 14, 32, 1))
    (one,) = _winograd(_backend(1).compile(fn, precision="bf16"))
    (two,) = _winograd(_backend(2).compile(fn, precision="bf16"))
    assert (_units(one), _units(two), two.block_rows) == (1, 2, 4)


@needs_bf16
@pytest.mark.parametrize("case", [(1, 256, 14, 256, 1), (32, 128, 4, 256, 1)], ids=str)
def test_output_channel_blocks_transform_once(case):
    """Units of output-channel blocks read the tiles one phase (``<name>_in``, shared out
    by chunks of channels) transformed once, on one thread as on two."""
    fn, _ = conv(case)
    for threads in (1, 2):
        exe = _backend(threads).compile(fn, precision="bf16")
        (step,) = _winograd(exe)
        assert step.channel_blocks > 1 and step.shared == 1
        assert "g0_in(" in exe.source()


@needs_bf16
def test_output_channel_blocks_of_one_panel_on_two_threads():
    """ResNet-18 b1's 14x14 stage: one block of tiles in 4 blocks of 64 channels for the
    lowering; on two threads 8 blocks of 32 (one panel each), 4 units a thread."""
    fn, _ = conv((1, 256, 14, 256, 1))
    (step,) = _winograd(_backend(2).compile(fn, precision="bf16"))
    assert (step.channel_blocks, _units(step)) == (8, 8)


@needs_bf16
def test_the_stem_rows_are_even_and_bitwise_one_thread():
    """ResNet-18's stem (7x7, stride 2, 112 output rows): the lowering's 8 blocks of 15 rows
    (the last of 7) become 8 of 14 on two threads, with one thread's result bit for bit."""
    rng = np.random.default_rng(3)
    x = og.parameter(og.f32, (1, 3, 224, 224), name="x")
    w = (rng.standard_normal((64, 3, 7, 7)) / np.sqrt(147)).astype(np.float32)
    pads = {"padding_below": (3, 3), "padding_above": (3, 3)}
    y = ops.relu(ops.convolution(x, og.constant(w), strides=(2, 2), **pads))
    fn = og.Function([y], [x], name="stem")
    xv = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    one = _backend(1).compile(fn, precision="bf16")
    two = _backend(2).compile(fn, precision="bf16")
    rows = [s.block_rows for s in two.program.steps if isinstance(s, ConvStep)]
    assert rows == [14], rows
    np.testing.assert_array_equal(two(xv)[0], one(xv)[0])
