"""Winograd steps split into output-channel blocks (too few blocks of tiles to share out:
ResNet-50's 28x28 and 14x14 layers) transform their input once, in a phase of its own
(``<name>_in``, units of input channels), into shared scratch rows that every channel block
reads: exact against INTERPRETER on one, two and three threads (no timing)."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.fused.program import WinogradStep

RNG = np.random.default_rng(172)


def _backend(threads: int) -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), num_threads=threads))


def _conv(n: int, c: int, o: int, size: int, padding: tuple[int, int] = (1, 1)):
    """relu(conv3x3(x) + b), constant filters and bias."""
    x = og.parameter(og.f32, (n, c, size, size))
    w = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    y = ops.convolution(x, og.constant(w), (1, 1), (1, 1), padding, padding)
    b = og.constant(RNG.standard_normal(o).astype(np.float32))
    y = ops.relu(ops.add(y, ops.broadcast(b, y.shape, (0, 2, 3))))
    return og.Function([y], [x]), RNG.standard_normal((n, c, size, size)).astype(np.float32)


CASES = {  # name: (n, c, o, size, padding)
    "ResNet-50 128 x 28x28 (two channel blocks)": (1, 128, 128, 28, (1, 1)),
    "ResNet-50 256 x 14x14 (four channel blocks)": (1, 256, 256, 14, (1, 1)),
    "two images of an odd plane, unpadded": (2, 96, 128, 15, (0, 0)),
}


def _winograd(exe) -> WinogradStep:
    (step,) = [s for s in exe.program.steps if isinstance(s, WinogradStep)]
    return step


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_shared_input_transform_matches_the_interpreter(name, threads):
    n, c, o, size, padding = CASES[name]
    fn, data = _conv(n, c, o, size, padding)
    exe = _backend(threads).compile(fn)
    step = _winograd(exe)
    assert step.channel_blocks > 1 and step.shared > 0
    assert step.scratch.shape[0] == threads + step.shared
    name_ = f"g{exe.program.steps.index(step)}"
    assert f"static int {name_}_in(" in exe.source()
    want = og.backend("INTERPRETER").compile(fn)(data)[0].astype(np.float64)
    got = exe(data)[0].astype(np.float64)
    np.testing.assert_allclose(got, want, atol=1e-4 * (np.max(np.abs(want)) + 1), rtol=1e-4)


def test_one_channel_block_transforms_per_unit():
    """Enough blocks of tiles for the threads: no channel blocks, nothing shared."""
    fn, data = _conv(1, 64, 64, 56)
    exe = _backend(2).compile(fn)
    step = _winograd(exe)
    assert step.channel_blocks == 1 and step.shared == 0
    name_ = f"g{exe.program.steps.index(step)}"
    assert f"static int {name_}_in(" not in exe.source()
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(exe(data)[0], want, atol=1e-4 * (np.max(np.abs(want)) + 1))
