"""The channel-blocked depthwise kernel (``codegen/depthwise_blocked.py``: one-pass f32
depthwise steps on planes narrower than a vector, 16 channels per vector) against
INTERPRETER: strides 1 and 2, 3x3 (forced: by default they keep the row-wise loops), 5x5
and 7x7 filters, symmetric, asymmetric, large and no padding, dilations, channel counts that
are not a multiple of 16 (or of 8: AVX2 builds run a block as two 8-lane halves), planes of
fewer than 8 positions, fused epilogues, several threads, AVX2 and AVX-512 code; and which
steps take it."""

import dataclasses
import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfigError, default_config
from opgraph.backends.cpu.codegen.depthwise_blocked import BUILDS
from opgraph.backends.fused.lowering import convolution
from opgraph.backends.fused.lowering.convolution import CHANNEL_BLOCK, direct_plan
from opgraph.backends.fused.program import ConvStep

RNG = np.random.default_rng(73)
INTERPRETER = og.backend("INTERPRETER")


def depthwise(shape, kernel, strides=(1, 1), below=None, above=None, dilations=(1, 1),
              epilogue=False, multiplier=1, t=og.f32):  # fmt: skip
    """A depthwise convolution with constant filters (``same``-style padding by default)."""
    c = shape[1]
    (kh, kw), (dh, dw) = kernel, dilations
    below = below or ((kh - 1) * dh // 2, (kw - 1) * dw // 2)
    above = above or ((kh - 1) * dh - below[0], (kw - 1) * dw - below[1])
    weights = (RNG.standard_normal((c * multiplier, 1, kh, kw)) * 0.2).astype(t.dtype)
    x = og.parameter(t, shape)
    y = ops.convolution(x, og.constant(weights), strides, dilations, below, above, groups=c)
    if epilogue:
        bias = og.constant(RNG.standard_normal(c * multiplier).astype(t.dtype))
        y = ops.relu(ops.add(y, ops.broadcast(bias, y.shape, (0, 2, 3))))
    return og.Function([y], [x]), [RNG.standard_normal(shape).astype(t.dtype)]


CASES = {
    "7x7 on 7x7, 768 channels": dict(shape=(1, 768, 7, 7), kernel=(7, 7)),
    "7x7 on 14x14, 20 channels, epilogue": dict(
        shape=(2, 20, 14, 14), kernel=(7, 7), epilogue=True
    ),
    "5x5 on 7x7, 5 channels": dict(shape=(1, 5, 7, 7), kernel=(5, 5)),
    "5x5 stride 2, 14x14 to 7x7, 33 channels": dict(
        shape=(1, 33, 14, 14), kernel=(5, 5), strides=(2, 2)
    ),
    "5x5 stride 2, odd size 15": dict(shape=(2, 17, 15, 15), kernel=(5, 5), strides=(2, 2)),
    "7x7 stride 2 no padding": dict(
        shape=(1, 16, 20, 20), kernel=(7, 7), strides=(2, 2), below=(0, 0), above=(0, 0)
    ),
    "5x5 asymmetric padding": dict(shape=(1, 18, 9, 11), kernel=(5, 5), below=(0, 4), above=(3, 1)),
    "5x5 padding larger than the filter": dict(
        shape=(1, 16, 4, 6), kernel=(5, 5), below=(6, 5), above=(1, 6)
    ),
    "5x5 dilation 2, epilogue": dict(
        shape=(1, 40, 12, 12), kernel=(5, 5), dilations=(2, 2), epilogue=True
    ),
    "7x5 filter, rows 2 vectors": dict(shape=(3, 9, 10, 3), kernel=(7, 5)),
    "5x5 on 3x3 planes": dict(shape=(1, 24, 3, 3), kernel=(5, 5)),
    "5x5 on 2x2 planes, 12 channels": dict(shape=(2, 12, 2, 2), kernel=(5, 5), epilogue=True),
    # og_cb_in steps each position's frame offset: rows that end inside a block, every
    # position a row of its own
    "5x5 on 19x5 planes, 20 channels": dict(shape=(1, 20, 19, 5), kernel=(5, 5)),
    "5x5 on 17x1 planes": dict(shape=(1, 16, 17, 1), kernel=(5, 5)),
}

SMALL = {
    "3x3 on 7x7, 960 channels": dict(shape=(1, 960, 7, 7), kernel=(3, 3)),
    "3x3 stride 2, 13x13, 21 channels": dict(shape=(1, 21, 13, 13), kernel=(3, 3), strides=(2, 2)),
    "3x3 on 14x14, 3 channels, epilogue": dict(shape=(2, 3, 14, 14), kernel=(3, 3), epilogue=True),
}


def check(backend, fn, args):
    """Compile ``fn``, check that its one step ran channel-blocked and that it agrees with
    INTERPRETER within f32 rounding of the sums; its C."""
    exe = backend.compile(fn)
    steps = [s for s in exe.program.steps if isinstance(s, ConvStep)]
    assert len(steps) == 1 and steps[0].direct
    assert direct_plan(steps[0], 1).blocked
    assert "og_cb_in(" in exe.source()
    want = INTERPRETER.compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale)
    return exe.source()


@pytest.fixture
def small_filters(monkeypatch):
    """3x3 filters channel-blocked too (by default they keep the row-wise loops)."""
    monkeypatch.setattr(convolution, "DIRECT_BLOCKED_TAPS", 9)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_blocked(name, backend_name, request):
    check(request.getfixturevalue(backend_name), *depthwise(**CASES[name]))


@pytest.mark.parametrize("name", list(SMALL))
def test_blocked_small_filters(name, small_filters, parallel_cpu):
    check(parallel_cpu, *depthwise(**SMALL[name]))


#: The channel-blocked function's C under the builds that run it (the row-wise form's
#: under ``#else``).
BLOCKED_C = re.compile(re.escape(f"#if {BUILDS}") + r"\n/\* \w+: channel-blocked depthwise")


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("name", list(CASES))
def test_isa(isa, name):
    """AVX-512 and AVX2 code run the channel-blocked form (AVX2: two 8-lane halves a block,
    8 x 8 transposes), within the blocked plan's per-thread scratch."""
    try:
        backend = CpuBackend(dataclasses.replace(default_config(), isa=isa, num_threads=2))
        source = check(backend, *depthwise(**CASES[name]))
    except CpuConfigError as e:
        pytest.skip(f"this CPU cannot run {isa} code: {e}")
    assert BLOCKED_C.search(source)


@pytest.mark.parametrize("name", list(CASES))
def test_avx2_halves_match_avx512_bitwise(name):
    """AVX2's two 8-lane halves and 8 x 8 transposes give each channel the AVX-512 form's
    values: the same taps, in the same order, per output."""
    fn, args = depthwise(**CASES[name])
    got = []
    for isa in ("avx2", "avx512"):
        try:
            backend = CpuBackend(dataclasses.replace(default_config(), isa=isa, num_threads=2))
            got.append(backend.compile(fn)(*args)[0])
        except CpuConfigError as e:
            pytest.skip(f"this CPU cannot run {isa} code: {e}")
    np.testing.assert_array_equal(got[0], got[1])


def test_isa_small_filters(small_filters):
    try:
        backend = CpuBackend(dataclasses.replace(default_config(), isa="avx2", num_threads=1))
    except CpuConfigError as e:
        pytest.skip(f"this CPU cannot run AVX2 code: {e}")
    check(backend, *depthwise(**SMALL["3x3 stride 2, 13x13, 21 channels"]))


@pytest.mark.parametrize(
    "params",
    [
        dict(shape=(1, 8, 7, 7), kernel=(5, 5), multiplier=2),  # channel multiplier
        dict(shape=(1, 8, 16, 16), kernel=(5, 5)),  # rows of a whole vector
        dict(shape=(1, 8, 7, 7), kernel=(3, 3)),  # 3x3: row-wise by default
        dict(shape=(1, 8, 7, 7), kernel=(5, 5), t=og.f64),  # not f32
    ],
)
def test_other_steps_keep_the_row_wise_kernel(params, cpu):
    fn, args = depthwise(**params)
    exe = cpu.compile(fn)
    for step in exe.program.steps:
        if isinstance(step, ConvStep) and step.direct:
            assert not direct_plan(step, 1).blocked
    assert "og_cb_in(" not in exe.source()
    want = INTERPRETER.compile(fn)(*args)[0]
    np.testing.assert_allclose(exe(*args)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_frame_holds_every_read(name, cpu):
    """The padded frame holds the whole image at its padding offset and every element a tap
    reads; the thread's scratch holds the frame, the filters and the outputs as channel
    vectors."""
    fn, _ = depthwise(**CASES[name])
    (step,) = [s for s in cpu.compile(fn).program.steps if isinstance(s, ConvStep)]
    plan = direct_plan(step, 3)
    assert plan.frame is not None
    rows, cols = plan.frame
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = step.kernel, step.strides, step.dilations, step.padding
    _, _, h, w = step.x.shape
    oh, ow = step.images[1:]
    assert pt + h <= rows and pl + w <= cols
    assert (oh - 1) * sh + (kh - 1) * dh < rows and (ow - 1) * sw + (kw - 1) * dw < cols
    used = (rows * cols + kh * kw + oh * ow) * CHANNEL_BLOCK
    assert plan.per_thread >= used
    assert plan.per_thread >= direct_plan(step, 3, blocked=False).per_thread  # AVX2 builds
    assert plan.rows == oh == step.block_rows
