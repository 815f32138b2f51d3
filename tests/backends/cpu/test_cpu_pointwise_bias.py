"""A 1x1 (or patch) convolution whose epilogue is a per-channel bias, then a residual tensor or
not, then ReLU or not, adds them to the accumulators in ``og_pw_pxb`` / ``og_pw_pxr`` (the
``pixels`` layout) or ``og_pw_chb`` / ``og_pw_chr`` (the ``channels`` layout, after the tile's
transpose) (``channel_bias``): the same bits as the product followed by the epilogue's pass
(``(y + bias) + residual`` in f32, ``v < 0 ? +0 : v``), on both instruction sets, over whole
tiles, pixel tails, partial panels, patches, strided inputs and batches; a bias then
hard-swish (``og_pw_pxh``, ``og_pw_chh``) gives the bits of the hard-swish pass in both
layouts; other epilogues keep their pass."""

import re
from unittest import mock

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen import pointwise, pointwise_kernels
from opgraph.backends.fused.lowering.pointwise import HardSwish, PointwiseConvStep, channel_bias

RNG = np.random.default_rng(121)
#: ``og_pw_pxb`` called with a panel's bias and the ReLU flag.
IN_REGISTERS = re.compile(r"og_pw_pxb\([^;]*b0 \+ q \* 8L, ([01])\)")
#: ``og_pw_pxr`` called with a panel's bias, the residual and the ReLU flag.
WITH_RESIDUAL = re.compile(r"og_pw_pxr\([^;]*b0 \+ q \* 8L, res \+ \(yq - y\) \+ [^;]*, ([01])\)")
#: ``og_pw_chb`` called with a panel's bias and the ReLU flag.
CHANNELS_IN_REGISTERS = re.compile(r"og_pw_chb\([^;]*b0 \+ q \* 32L, ([01])\)")
#: ``og_pw_chr`` called with a panel's bias, the residual and the ReLU flag.
CHANNELS_WITH_RESIDUAL = re.compile(
    r"og_pw_chr\([^;]*b0 \+ q \* 32L, res \+ q \* [0-9]+L, ([01])\)"
)
#: The calls per layout (``channels_first``): without and with a residual.
CALLS = {
    False: (IN_REGISTERS, WITH_RESIDUAL),
    True: (CHANNELS_IN_REGISTERS, CHANNELS_WITH_RESIDUAL),
}
#: ``og_pw_pxh`` (``og_pw_chh``) called with a panel's bias and the hard-swish line's alpha
#: and beta, per layout (``channels_first``).
HARD_SWISH = {
    False: re.compile(r"og_pw_pxh\([^;]*b0 \+ q \* 8L, \(([^()]*)\), \(([^()]*)\)\)"),
    True: re.compile(r"og_pw_chh\([^;]*b0 \+ q \* 32L, \(([^()]*)\), \(([^()]*)\)\)"),
}
#: alpha (1/6 in f32) and beta (1/2) as the calls spell them.
LINE = ("0x1.5555560000000p-3f", "0x1.0000000000000p-1f")
EPILOGUES = ["bias", "bias relu", "bias residual", "bias residual relu", "residual first relu"]


def _graph(n, c, o, size, k, stride, epilogue, filters=None, b=None):
    """The convolution alone and with ``epilogue`` (:data:`EPILOGUES`, "bias hard-swish",
    "residual before bias": ``(y + r) + b``, and the other spellings of :data:`OTHERS`), the
    bias values, the inputs (the residual's second)."""
    x = og.parameter(og.f32, (n, c, size, size))
    if filters is None:
        filters = (RNG.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    w = og.constant(filters)
    pad = (k // 2, k // 2)
    y = ops.convolution(x, w, (stride, stride), None, pad, pad)
    b = RNG.standard_normal(o).astype(np.float32) if b is None else b
    bias = ops.broadcast(og.constant(b), y.shape, (0, 2, 3))
    z = ops.add(y, bias)
    side = (size + 2 * (k // 2) - k) // stride + 1
    r = og.parameter(og.f32, (n, o, side, side))
    top = {
        "bias": z,
        "bias relu": ops.relu(z),
        "bias residual": ops.add(z, r),
        "bias residual relu": ops.relu(ops.add(z, r)),
        "residual first relu": ops.relu(ops.add(r, ops.add(bias, y))),
        "bias hard-swish": ops.hard_swish(z),
        "residual before bias": ops.add(ops.add(y, r), bias),
        "bias hard-sigmoid": ops.hard_sigmoid(z, 1 / 6, 0.5),
        "hard-swish without bias": ops.hard_swish(y),
        "bias residual hard-swish": ops.hard_swish(ops.add(z, r)),
        "bias clip-swish": ops.multiply(
            z, ops.minimum(ops.maximum(_line(z), _like(0, z)), _like(1, z))
        ),
        "bias hard-swish, bound first": ops.multiply(
            z, ops.maximum(_like(0, z), ops.minimum(_line(z), _like(1, z)))
        ),
    }[epilogue]
    residual = "residual" in epilogue
    params = [x, r] if residual else [x]
    args = [RNG.standard_normal((n, c, size, size)).astype(np.float32)]
    if residual:
        args.append(RNG.standard_normal((n, o, side, side)).astype(np.float32))
        _special(args[1], ((np.inf, -0.0), (-np.inf, np.nan)))
    _special(args[0], ((np.nan, np.inf, -np.inf),))  # NaN and infinities through the tile
    return og.Function([y], [x]), og.Function([top], params), b, args


def _special(a, rows):
    """Row ``c`` of ``rows`` into channel ``c`` of ``a`` (N, C, H, W) at its first pixels,
    image after image."""
    side = a.shape[3]
    for c, values in enumerate(rows):
        for i, value in enumerate(values):
            img, pixel = divmod(i, a.shape[2] * side)
            a[img, c, pixel // side, pixel % side] = value


SHAPES = {  # (n, c, o, size, kernel, stride)
    "panels outer, 112x112": (1, 16, 64, 112, 1, 1),
    "pixel blocks": (1, 24, 72, 56, 1, 1),
    "tail columns, partial panel": (1, 40, 20, 10, 1, 1),
    "batch of 2": (2, 24, 16, 28, 1, 1),
    "3x3 stride-2 patches": (1, 3, 16, 56, 3, 2),
    "wide patches, partial panel": (1, 16, 12, 28, 3, 2),
}


#: ``channels``-layout shapes (n, c, o, size, kernel, stride) on both instruction sets: tiles
#: of 12 and 13 pixels (AVX2: 6) transposed in registers, a range's rest of 4 (AVX-512:
#: stored element by element) and of 1, one-pixel planes (``og_pw_ch_one``), partial panels
#: (AVX-512: a panel's second vector partial, or empty), strided inputs and batches.
CHANNEL_SHAPES = {
    "14x14": (1, 256, 64, 14, 1, 1),
    "7x7, a panel of 8 channels": (1, 256, 104, 7, 1, 1),
    "7x7, a panel of 16 channels": (1, 160, 80, 7, 1, 1),
    "batch of two, 7x7": (2, 128, 64, 7, 1, 1),
    "40 pixels, a panel of 5 channels": (10, 512, 229, 2, 1, 1),
    "one-pixel planes, a panel of 24 channels": (3, 96, 56, 1, 1, 1),
    "stride 2, 13x13 -> 7x7": (1, 64, 64, 13, 1, 2),
}


def _like(value, x):
    return ops.broadcast(og.constant(np.float32(value)), x.shape, tuple(range(len(x.shape))))


def _line(z):
    return ops.add(ops.multiply(z, _like(1 / 6, z)), _like(0.5, z))


def _steps(exe, channels_first):
    return [
        s
        for s in exe.program.steps
        if isinstance(s, PointwiseConvStep) and s.channels_first is channels_first
    ]


def _assert_bits(got, want):
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def _check_pass_bits(cpu, shape, epilogue, channels_first):
    """``shape``'s convolution with ``epilogue`` (:data:`EPILOGUES`) in the layout
    ``channels_first`` calls its kernel's variant and gives the products' bits plus numpy's
    f32 adds (then ReLU)."""
    plain, fused, b, args = _graph(*shape, epilogue)
    exe = cpu.compile(fused)
    (step,) = _steps(exe, channels_first)
    found = channel_bias(step)
    assert found is not None and found.relu is epilogue.endswith("relu")
    assert (found.residual is not None) is ("residual" in epilogue)
    calls = CALLS[channels_first][found.residual is not None]
    assert set(calls.findall(exe.source())) == {str(int(found.relu))}
    products = cpu.compile(plain)(args[0])[0]
    want = products + b[None, :, None, None]
    if found.residual is not None:
        want = want + args[1]
    if found.relu:
        want = np.where(want < 0, np.float32(0), want)
    _assert_bits(exe(*args)[0], want)


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("epilogue", EPILOGUES)
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_bias_in_registers_gives_the_pass_bits(request, backend, epilogue, shape):
    _check_pass_bits(request.getfixturevalue(backend), SHAPES[shape], epilogue, False)


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("epilogue", EPILOGUES)
@pytest.mark.parametrize("shape", list(CHANNEL_SHAPES), ids=list(CHANNEL_SHAPES))
def test_channels_bias_in_registers_gives_the_pass_bits(request, backend, epilogue, shape):
    _check_pass_bits(request.getfixturevalue(backend), CHANNEL_SHAPES[shape], epilogue, True)


def _pass_bits(cpu, plain, b, args):
    """The products of ``plain``, then ``hard_swish(y + b)`` as a pass of its own (a kernel on
    the products as an input): the pass ``og_pw_pxh`` and ``og_pw_chh`` replace."""
    products = cpu.compile(plain)(args[0])[0]
    y = og.parameter(og.f32, products.shape)
    bias = ops.broadcast(og.constant(b), y.shape, (0, 2, 3))
    return cpu.compile(og.Function([ops.hard_swish(ops.add(y, bias))], [y]))(products)[0]


def _check_hard_swish(cpu, shape, channels_first):
    """``shape``'s convolution with a bias then hard-swish in the layout ``channels_first``
    calls its kernel's hard-swish form and gives the bits of the products then the pass."""
    plain, fused, b, args = _graph(*shape, "bias hard-swish")
    exe = cpu.compile(fused)
    (step,) = _steps(exe, channels_first)
    found = channel_bias(step)
    assert found is not None and found.hard_swish == HardSwish(float(np.float32(1 / 6)), 0.5)
    assert not found.relu and found.residual is None
    assert set(HARD_SWISH[channels_first].findall(exe.source())) == {LINE}
    assert "_ep(" not in exe.source()  # no epilogue pass
    got = exe(*args)[0]
    want = _pass_bits(cpu, plain, b, args)
    # -0 where v <= -3 (v * +0); one-pixel planes: every output reads a NaN or an infinity
    assert (np.signbit(want) & (want == 0)).any() or not np.isfinite(want).any()
    _assert_bits(got, want)


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_hard_swish_in_registers_gives_the_pass_bits(request, backend, shape):
    _check_hard_swish(request.getfixturevalue(backend), SHAPES[shape], False)


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("shape", list(CHANNEL_SHAPES), ids=list(CHANNEL_SHAPES))
def test_channels_hard_swish_in_registers_gives_the_pass_bits(request, backend, shape):
    """``og_pw_chh``: transposed tiles (12, 13, 6 and 4 pixels), tiles stored element by
    element (AVX-512 rests under 8 pixels, one-pixel tiles), partial panels (biases of 5, 8,
    16 and 24 channels: ``og_pw_biasv``'s partial vectors), strided inputs and batches."""
    _check_hard_swish(request.getfixturevalue(backend), CHANNEL_SHAPES[shape], True)


#: (images, input channels, output channels, plane side, layout) of the chosen-values test:
#: a ``pixels`` plane; a 7x7 plane in the ``channels`` layout (tiles of 12 and 13 or 6 and
#: one pixel); 2x2 planes (AVX-512: tiles stored element by element; AVX2: transposed
#: 4-pixel tiles).
CHOSEN = {
    "pixels 8x8": (1, 2, 16, 8, False),
    "channels 7x7": (1, 16, 32, 7, True),
    "channels 2x2, 64 channels": (3, 16, 64, 2, True),
}


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("case", list(CHOSEN), ids=list(CHOSEN))
def test_hard_swish_in_registers_on_chosen_values(request, backend, case):
    """Input channels all zero (weights and values) but the second, so that each output
    channel is one rounding of a chosen scale of the second; the biases chosen: ties of the
    clamps (v = 3 and -3), zeros of both signs (-1e-30 times 1e-30 rounds to -0), infinities,
    NaN and values just inside the bounds."""
    cpu = request.getfixturevalue(backend)
    n, c, o, size, channels_first = CHOSEN[case]
    scales = np.resize(np.array([1, -1e-30, 1, 1, -1, 1, 2, 0.5], np.float32), o)
    filters = np.zeros((o, c, 1, 1), np.float32)
    filters[:, 1, 0, 0] = scales
    biases = np.resize(np.array([0, -0.0, -0.0, 0, 1.5, -1.5, 3, -3], np.float32), o)
    plain, fused, _, args = _graph(n, c, o, size, 1, 1, "bias hard-swish", filters, biases)
    values = [3, -3, 1e-30, -0.0, 0.0, np.inf, -np.inf, np.nan, 2.9999998, -2.9999998, 6, -6]
    args[0][:] = 0
    args[0][:, 1] = np.resize(np.array(values, np.float32), (n, size, size))
    exe = cpu.compile(fused)
    assert len(_steps(exe, channels_first)) == 1
    assert HARD_SWISH[channels_first].search(exe.source()) is not None
    want = _pass_bits(cpu, plain, biases, args)
    assert (np.signbit(want) & (want == 0)).any() and np.isnan(want).any()
    _assert_bits(exe(*args)[0], want)


OTHERS = [
    "residual before bias",
    "bias hard-sigmoid",
    "hard-swish without bias",
    "bias residual hard-swish",
    "bias clip-swish",
    "bias hard-swish, bound first",
]


@pytest.mark.parametrize("channels_first", [False, True])
@pytest.mark.parametrize("epilogue", OTHERS)
def test_other_epilogues_keep_their_pass(avx2_cpu, epilogue, channels_first):
    shape = CHANNEL_SHAPES["14x14"] if channels_first else SHAPES["pixel blocks"]
    _, fused, _, args = _graph(*shape, epilogue)
    exe = avx2_cpu.compile(fused)
    (step,) = _steps(exe, channels_first)
    assert channel_bias(step) is None
    source = exe.source()
    for calls in CALLS[channels_first]:
        assert calls.search(source) is None
    assert "og_pw_pxr(" not in source and "og_pw_chr(" not in source
    assert "og_pw_pxh(" not in source and "og_pw_chh(" not in source
    want = og.backend("INTERPRETER").compile(fused)(*args)[0]
    np.testing.assert_allclose(exe(*args)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
def test_prefetches_are_hints(request, backend):
    """A ``pixels`` unit whose input is more than half the L2 prefetches the next block's
    input rows (``NEXT_BLOCK_PREFETCH``) and ``og_pw_pxr``'s tile (the grouped one too) the
    next panel's residual (``RESIDUAL_PREFETCH``): the build without them gives the same bits."""
    cpu = request.getfixturevalue(backend)
    shape = SHAPES["pixel blocks"]  # a 294 KiB input
    n, c, o = shape[:3]
    filters = (RNG.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    _, fused, _, args = _graph(*shape, "bias residual relu", filters, b)
    with mock.patch.object(pointwise, "l2_cache_bytes", lambda: 1 << 19):
        exe = cpu.compile(fused)
    assert "__builtin_prefetch(x + k * ldx + je + v, 0, 3);" in exe.source()
    assert "__builtin_prefetch(res + (8 + k / nv) * ldy" in exe.source()
    assert "__builtin_prefetch(res + (8 + g + k / 3) * ldy" in exe.source()  # AVX2's groups
    with (
        mock.patch.object(pointwise, "l2_cache_bytes", lambda: 1 << 19),
        mock.patch.object(pointwise, "NEXT_BLOCK_PREFETCH", False),
        mock.patch.object(pointwise_kernels, "RESIDUAL_PREFETCH", False),
    ):
        _, again, _, _ = _graph(*shape, "bias residual relu", filters, b)
        bare = cpu.compile(again)
    assert "__builtin_prefetch(x + k * ldx" not in bare.source()
    assert "__builtin_prefetch(res + " not in bare.source()
    _assert_bits(exe(*args)[0], bare(*args)[0])


def test_inputs_that_fit_half_the_l2_are_not_prefetched(avx2_cpu):
    """The same step with an L2 of more than twice its input: no input prefetch."""
    shape = SHAPES["pixel blocks"]
    _, fused, _, _ = _graph(*shape, "bias residual relu")
    with mock.patch.object(pointwise, "l2_cache_bytes", lambda: 1 << 20):
        source = avx2_cpu.compile(fused).source()
    assert "__builtin_prefetch(x + k * ldx" not in source
