"""A ``channels``-layout 1x1 convolution with fewer units than four per thread splits its
pixels into more blocks until the units share evenly among the threads
(``PointwiseConvEmitter.even_blocks``: 160 channels at 7x7 are five panels, ten units on two
threads); every output is the same sum either way (bitwise the one-thread module). A step on
one pixel is split by its filters' size (``PARALLEL_WEIGHTS``), not its multiply-adds."""

import dataclasses
import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep

RNG = np.random.default_rng(126)
UNITS = re.compile(r"og_parallel\(g\d+, T, A, (\d+)L, 1L, (\d+)\)")


def _conv(c, o, size):
    x = og.parameter(og.f32, (1, c, size, size))
    w = (RNG.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    y = ops.convolution(x, og.constant(w), (1, 1), None, (0, 0), (0, 0))
    return og.Function([y], [x]), RNG.standard_normal((1, c, size, size)).astype(np.float32)


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize(
    "c, o, size, units",
    # five or three panels split; eight units left as they were
    [(960, 160, 7, 10), (672, 160, 7, 10), (240, 96, 14, 6), (960, 320, 7, 8)],
)
def test_few_channel_units_share_evenly(isa, c, o, size, units):
    fn, data = _conv(c, o, size)
    one = dataclasses.replace(default_config(), isa=isa, num_threads=1)
    two = dataclasses.replace(one, num_threads=2)
    exe = CpuBackend(two).compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, PointwiseConvStep)]
    assert step.channels_first
    assert UNITS.findall(exe.source()) == [(str(units), "2")]
    got, want = exe(data)[0], CpuBackend(one).compile(fn)(data)[0]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize(
    "c, o, units",
    # MobileNetV3's squeeze-excite products: 113 K and 58 K filter values split, 3840 not
    [(672, 168, 6), (480, 120, 4), (120, 32, 0)],
)
def test_one_pixel_steps_split_by_filter_size(isa, c, o, units):
    fn, data = _conv(c, o, 1)
    one = dataclasses.replace(default_config(), isa=isa, num_threads=1)
    exe = CpuBackend(dataclasses.replace(one, num_threads=2)).compile(fn)
    assert UNITS.findall(exe.source()) == ([(str(units), "2")] if units else [])
    got, want = exe(data)[0], CpuBackend(one).compile(fn)(data)[0]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
