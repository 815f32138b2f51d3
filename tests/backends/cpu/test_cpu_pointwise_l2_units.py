"""The ``pixels`` layout of patch and pointwise convolutions sizes its units by the L2
(``fused/lowering/pointwise.py`` ``unit_floats``, the CPU's ``config.l2_cache_bytes`` as
``TargetFeatures.l2_bytes``) where the filters take more than half of it: a quarter of it,
never under ``UNIT_FLOATS`` (the 1 MiB L2 it was measured on). Larger units read the filters
fewer times; every output is the same sum (bitwise the smaller units' module), on both ISAs
and threads."""

import dataclasses

import numpy as np
import pytest
from test_cpu_conv_patches import conv_graph  # beside this file (rootdir import)

from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import backend as cpu_backend
from opgraph.backends.fused.lowering.pointwise import (
    UNIT_FLOATS,
    PointwiseConvStep,
    pixel_blocks,
    unit_floats,
)


@pytest.mark.parametrize(
    "l2, filters, want",
    [
        (512 << 10, 1 << 20, UNIT_FLOATS),
        (1 << 20, 1 << 20, UNIT_FLOATS),
        (2 << 20, 1 << 20, UNIT_FLOATS),  # filters within half the L2: read from it
        (2 << 20, (1 << 20) + 4, 1 << 17),
        (3 << 20, 2 << 20, 3 << 16),
    ],
)
def test_units_take_a_quarter_of_a_larger_l2_for_large_filters(l2, filters, want):
    assert unit_floats(l2, filters) == want


def _step(monkeypatch, l2, config, fn):
    monkeypatch.setattr(cpu_backend, "l2_cache_bytes", lambda: l2)
    exe = CpuBackend(config).compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, PointwiseConvStep)]
    return exe, step


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("threads", [1, 2])
def test_units_of_a_larger_l2_give_the_same_outputs(monkeypatch, isa, threads):
    """Whisper's k3 stride-2 Conv1d (1152 patch rows, 384 filters: 1.77 MB, 1500
    positions): 32 units of 48 positions with a 1 MiB L2, 16 of 96 with 2 MiB (its half
    under the filters), each building its patches (``unit_patches``)."""
    fn, args = conv_graph(1, 384, 384, (3000,), (3,), (2,), (1,), act="gelu")
    config = dataclasses.replace(default_config(), isa=isa, num_threads=threads)
    small, small_step = _step(monkeypatch, 1 << 20, config, fn)
    large, large_step = _step(monkeypatch, 2 << 20, config, fn)
    assert (small_step.unit_floats, large_step.unit_floats) == (UNIT_FLOATS, 1 << 17)
    assert small_step.unit_patches and large_step.unit_patches
    assert pixel_blocks(1500, 1152, 384, small_step.unit_floats) == (32, 48)
    assert pixel_blocks(1500, 1152, 384, large_step.unit_floats) == (16, 96)
    got, want = large(*args)[0], small(*args)[0]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
