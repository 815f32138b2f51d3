"""A ``pixels``-layout 1x1 (or patch) convolution whose epilogue is a per-channel bias, or a
bias then ReLU, adds them to the accumulators in ``og_pw_px`` (``channel_bias``): the same
bits as the product followed by the epilogue's pass (the bias added in f32, ``v < 0 ? +0 :
v``), on both instruction sets, over whole tiles, pixel tails, partial panels, patches and
batches; other epilogues keep their pass."""

import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep, channel_bias

RNG = np.random.default_rng(121)
#: ``og_pw_px`` called with a panel's bias and the ReLU flag.
IN_REGISTERS = re.compile(r"og_pw_pxb\([^;]*b0 \+ q \* 8L, ([01])\)")


def _graph(n, c, o, size, k, stride, epilogue):
    """The convolution alone and with ``epilogue`` ("bias", "bias relu", "bias residual",
    "bias hard-swish"), the bias values, the inputs."""
    x = og.parameter(og.f32, (n, c, size, size))
    w = og.constant((RNG.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32))
    pad = (k // 2, k // 2)
    y = ops.convolution(x, w, (stride, stride), None, pad, pad)
    b = RNG.standard_normal(o).astype(np.float32)
    z = ops.add(y, ops.broadcast(og.constant(b), y.shape, (0, 2, 3)))
    side = (size + 2 * (k // 2) - k) // stride + 1
    r = og.parameter(og.f32, (n, o, side, side))
    top = {
        "bias": z,
        "bias relu": ops.relu(z),
        "bias residual": ops.add(z, r),
        "bias hard-swish": ops.hard_swish(z),
    }[epilogue]
    params = [x, r] if epilogue == "bias residual" else [x]
    args = [RNG.standard_normal((n, c, size, size)).astype(np.float32)]
    if epilogue == "bias residual":
        args.append(RNG.standard_normal((n, o, side, side)).astype(np.float32))
    args[0][0, 0, 0, :3] = (np.nan, np.inf, -np.inf)  # NaN and infinities through the tile
    return og.Function([y], [x]), og.Function([top], params), b, args


SHAPES = {  # (n, c, o, size, kernel, stride)
    "panels outer, 112x112": (1, 16, 64, 112, 1, 1),
    "pixel blocks": (1, 24, 72, 56, 1, 1),
    "tail columns, partial panel": (1, 40, 20, 10, 1, 1),
    "batch of 2": (2, 24, 16, 28, 1, 1),
    "3x3 stride-2 patches": (1, 3, 16, 56, 3, 2),
    "wide patches, partial panel": (1, 16, 12, 28, 3, 2),
}


def _pixel_steps(exe):
    return [
        s for s in exe.program.steps if isinstance(s, PointwiseConvStep) and not s.channels_first
    ]


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("epilogue", ["bias", "bias relu"])
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_bias_in_registers_gives_the_pass_bits(request, backend, epilogue, shape):
    cpu = request.getfixturevalue(backend)
    plain, fused, b, args = _graph(*SHAPES[shape], epilogue)
    exe = cpu.compile(fused)
    (step,) = _pixel_steps(exe)
    found = channel_bias(step)
    assert found is not None and found.relu is (epilogue == "bias relu")
    assert set(IN_REGISTERS.findall(exe.source())) == {str(int(found.relu))}
    products = cpu.compile(plain)(args[0])[0]
    want = products + b[None, :, None, None]
    if found.relu:
        want = np.where(want < 0, np.float32(0), want)
    got = exe(*args)[0]
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("epilogue", ["bias residual", "bias hard-swish"])
def test_other_epilogues_keep_their_pass(avx2_cpu, epilogue):
    _, fused, _, args = _graph(*SHAPES["pixel blocks"], epilogue)
    exe = avx2_cpu.compile(fused)
    (step,) = _pixel_steps(exe)
    assert channel_bias(step) is None
    assert IN_REGISTERS.search(exe.source()) is None
    want = og.backend("INTERPRETER").compile(fused)(*args)[0]
    np.testing.assert_allclose(exe(*args)[0], want, rtol=1e-5, atol=1e-5)
