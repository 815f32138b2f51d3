"""A parallel row kernel's blocks hold at least ``parallel_threshold // ROW_BLOCK_SHARE``
elements (whole rows; ``codegen/loops.py``): BERT's bias + residual + LayerNorm rows split
in blocks of 11 rows instead of one, with the values of the serial kernel (each row is
computed alone, whichever thread runs it)."""

import dataclasses
import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.loops import ROW_BLOCK_SHARE
from opgraph.backends.cpu.config import DEFAULT_PARALLEL_THRESHOLD
from opgraph.core.dim import Dim
from opgraph.testing.compare import assert_close

RNG = np.random.default_rng(133)
HIDDEN = 768
BIAS, GAMMA, BETA = (RNG.standard_normal(HIDDEN).astype(np.float32) for _ in range(3))


def _norm(rows: Dim) -> og.Function:
    """BERT's norm step: bias + residual + LayerNorm over rows of ``HIDDEN``."""
    x = og.parameter(og.f32, (1, rows, HIDDEN), name="x")
    r = og.parameter(og.f32, (1, rows, HIDDEN), name="r")
    h = ops.add(ops.add(x, ops.broadcast(og.constant(BIAS), x.shape, (0, 1))), r)
    return og.Function(
        [ops.layer_norm(h, og.constant(GAMMA), og.constant(BETA), -1, 1e-12)], [x, r]
    )


def _grains(source: str) -> list[int]:
    """The grain of every static row driver's ``og_parallel`` call."""
    return [int(g) for g in re.findall(r"og_parallel\(k\w+, T, A, \d+L, (\d+)L, \d+\)", source)]


def _backend(threads: int, isa: str | None = None, **changes: int) -> CpuBackend:
    config = dataclasses.replace(default_config(), num_threads=threads, **changes)
    return CpuBackend(dataclasses.replace(config, isa=isa) if isa else config)


@pytest.mark.parametrize("isa", [None, "avx2"])
@pytest.mark.parametrize("rows", [128, 197, 7])
def test_norm_rows_split_in_blocks_of_the_threshold_share(isa, rows):
    from opgraph.backends.cpu import config as cpu_config

    if isa and not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    fn = _norm(rows)
    data = [RNG.standard_normal((1, rows, HIDDEN)).astype(np.float32) for _ in range(2)]
    serial = _backend(1, isa).compile(fn)
    split = _backend(2, isa).compile(fn)
    least = -(-(DEFAULT_PARALLEL_THRESHOLD // ROW_BLOCK_SHARE) // HIDDEN)
    assert least == 11
    assert _grains(split.source()) == [least]  # 7 rows: one block, which og_parallel runs
    (want,) = serial(*data)
    for _ in range(3):
        (got,) = split(*data)
        np.testing.assert_array_equal(got, want)
    assert_close(want, og.backend("INTERPRETER").compile(fn)(*data)[0], rtol=1e-5, atol=1e-5)


def test_the_floor_scales_with_the_threshold():
    """A threshold of 1 (tests that split every kernel) keeps rows of one block each."""
    source = _backend(3, parallel_threshold=1).compile(_norm(128)).source()
    assert _grains(source) == [1]
    source = _backend(2, parallel_threshold=4 * ROW_BLOCK_SHARE * HIDDEN).compile(_norm(128))
    assert _grains(source.source()) == [4]


def test_pointwise_kernels_keep_their_grain():
    """Only row kernels take the floor: a pointwise kernel's range is elements."""
    x = og.parameter(og.f32, (1, 128, 3 * HIDDEN), name="x")
    fn = og.Function([ops.add(ops.multiply(x, x), x)], [x])
    source = _backend(2).compile(fn).source()
    grains = re.findall(r"og_parallel\(k\w+, T, A, (\d+)L, (\d+)L, 2\)", source)
    assert grains, source
    for total, grain in grains:
        assert int(total) == 128 * 3 * HIDDEN
        assert int(grain) >= DEFAULT_PARALLEL_THRESHOLD // (2 * 2)  # cost 2 at most


def test_symbolic_rows_take_the_floor_per_call():
    seq = og.dim("seq", max=512)
    fn = _norm(seq)
    exe = _backend(2).compile(fn)
    assert "if (grain_ < rows_) grain_ = rows_;" in exe.source()
    for rows in (1, 11, 12, 128, 197):
        data = [RNG.standard_normal((1, rows, HIDDEN)).astype(np.float32) for _ in range(2)]
        (want,) = _backend(1).compile(_norm(rows))(*data)
        (got,) = exe(*data)
        np.testing.assert_array_equal(got, want)
