"""1x1 convolutions by filters packed at compile time (``PointwiseConvStep``): both layouts,
pixel tails, partial channel panels, strides, batches, fused epilogues, one and several
threads, against INTERPRETER."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.pointwise_kernels import INPUT_PREFETCHED_LANES
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep, layout_waste
from opgraph.backends.fused.program import ConvStep

RNG = np.random.default_rng(51)


def bias_of(y, o):
    return ops.broadcast(og.constant(RNG.standard_normal(o).astype(np.float32)), y.shape, (0, 2, 3))


EPILOGUES = {
    "none": lambda y, o, r: y,
    "bias relu": lambda y, o, r: ops.relu(ops.add(y, bias_of(y, o))),
    "bias relu6": lambda y, o, r: ops.clamp(ops.add(y, bias_of(y, o)), 0.0, 6.0),
    "bias silu": lambda y, o, r: (lambda z: ops.multiply(z, ops.sigmoid(z)))(ops.add(y, bias_of(y, o))),
    "bias hard-swish": lambda y, o, r: ops.hard_swish(ops.add(y, bias_of(y, o))),
    "bias residual": lambda y, o, r: ops.add(ops.add(y, bias_of(y, o)), r),
}  # fmt: skip


def graph(n, c, o, size, stride=1, epilogue="bias relu"):
    x = og.parameter(og.f32, (n, c, size, size))
    w = og.constant((RNG.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32))
    y = ops.convolution(x, w, (stride, stride), None, (0, 0), (0, 0))
    side = (size - 1) // stride + 1
    r = og.parameter(og.f32, (n, o, side, side))
    y = EPILOGUES[epilogue](y, o, r)
    residual = epilogue == "bias residual"
    params = [x, r] if residual else [x]
    args = [RNG.standard_normal((n, c, size, size)).astype(np.float32)]
    if residual:
        args.append(RNG.standard_normal((n, o, side, side)).astype(np.float32))
    return og.Function([y], params), args


def check(backend, fn, args):
    exe = backend.compile(fn)
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=1e-5)
    return [s for s in exe.program.steps if isinstance(s, ConvStep)]


SHAPES = {  # (n, c, o, size, stride): the layout each takes
    "pixels, whole vectors": ((1, 24, 40, 28, 1), False),
    "pixels, tail columns": ((1, 40, 40, 14, 1), False),  # (40 -> 80: channels on AVX2)
    "pixels, a partial panel of rows": ((1, 17, 13, 12, 1), False),
    "pixels, many blocks of pixels": ((1, 16, 24, 112, 1), False),
    "channels, 7x7": ((1, 192, 64, 7, 1), True),
    "channels, a partial panel": ((1, 256, 80, 7, 1), True),
    "channels, 14x14": ((1, 256, 256, 14, 1), True),
    "stride 2, even plane": ((1, 32, 48, 16, 2), False),
    "stride 2, odd plane": ((1, 64, 64, 13, 2), True),
    "stride 3": ((2, 8, 16, 10, 3), False),
    "batch of three": ((3, 20, 36, 9, 1), False),
    "two input channels": ((1, 2, 16, 8, 1), False),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_pointwise_shapes(name, backend_name, request):
    backend = request.getfixturevalue(backend_name)
    (n, c, o, size, stride), channels_first = SHAPES[name]
    fn, args = graph(n, c, o, size, stride)
    steps = check(backend, fn, args)
    (step,) = steps
    assert type(step) is PointwiseConvStep
    assert step.channels_first is channels_first
    assert step.compact is (stride != 1)
    assert step.epilogue is not None  # the bias and ReLU run on the unit's tile


@pytest.mark.parametrize("epilogue", list(EPILOGUES))
@pytest.mark.parametrize("shape", [(1, 48, 40, 14), (1, 96, 192, 7), (2, 16, 24, 20)])
def test_pointwise_epilogues(cpu, parallel_cpu, epilogue, shape):
    fn, args = graph(*shape, epilogue=epilogue)
    for backend in (cpu, parallel_cpu):
        steps = check(backend, fn, args)
        assert [type(s) for s in steps] == [PointwiseConvStep]
        if epilogue != "none":
            assert steps[0].epilogue is not None


def test_pointwise_reads_a_strided_image(cpu):
    """An image read through a transpose (channels last in memory) is compacted first."""
    x = og.parameter(og.f32, (1, 9, 11, 24))  # N, H, W, C
    w = og.constant(RNG.standard_normal((40, 24, 1, 1)).astype(np.float32))
    y = ops.convolution(ops.transpose(x, (0, 3, 1, 2)), w, (1, 1))
    fn = og.Function([ops.relu(y)], [x])
    (step,) = check(cpu, fn, [RNG.standard_normal((1, 9, 11, 24)).astype(np.float32)])
    assert type(step) is PointwiseConvStep and step.compact


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(groups=2),  # (padded ones run on their patches: test_cpu_conv_patches.py)
    ],
)
def test_other_1x1_convolutions_keep_the_general_path(cpu, kwargs):
    groups = kwargs.get("groups", 1)
    x = og.parameter(og.f32, (1, 8, 10, 10))
    w = og.constant(RNG.standard_normal((16, 8 // groups, 1, 1)).astype(np.float32))
    y = ops.convolution(x, w, (1, 1), **kwargs)
    steps = check(
        cpu, og.Function([y], [x]), [RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)]
    )
    assert steps and not any(isinstance(s, PointwiseConvStep) for s in steps)


def test_filters_as_a_parameter_keep_the_general_path(cpu):
    x = og.parameter(og.f32, (1, 8, 10, 10))
    w = og.parameter(og.f32, (16, 8, 1, 1))
    fn = og.Function([ops.convolution(x, w, (1, 1))], [x, w])
    args = [RNG.standard_normal((1, 8, 10, 10)).astype(np.float32),
            RNG.standard_normal((16, 8, 1, 1)).astype(np.float32)]  # fmt: skip
    steps = check(cpu, fn, args)
    assert steps and not any(isinstance(s, PointwiseConvStep) for s in steps)


def test_one_dimensional_1x1_convolution(cpu):
    x = og.parameter(og.f32, (2, 12, 30))
    w = og.constant(RNG.standard_normal((20, 12, 1)).astype(np.float32))
    fn = og.Function([ops.convolution(x, w, (1,))], [x])
    check(cpu, fn, [RNG.standard_normal((2, 12, 30)).astype(np.float32)])


@pytest.mark.parametrize(
    ("pixels", "channels", "inner", "lanes", "channels_first"),
    [
        (49, 192, 1152, 16, True),
        (196, 256, 1024, 16, True),
        (196, 480, 80, 16, True),  # EfficientNet-B0's 80 -> 480 (in registers: cheap stores)
        (196, 480, 40, 16, False),  # few input channels: the transposed stores cost more
        (196, 112, 672, 16, False),  # a half panel of 32 channels
        (784, 96, 24, 16, False),
        (3136, 256, 64, 16, False),
        # AVX2 (8 lanes): 16-channel passes, cheaper transposed stores than its pixel tiles
        (196, 112, 672, 8, True),  # MobileNetV3's 672 -> 112: no padded pass
        (196, 80, 240, 8, True),
        (196, 184, 80, 8, True),  # 4 % padded passes
        (196, 40, 120, 8, False),  # 20 % padded passes
        (49, 160, 960, 8, True),
        (784, 128, 512, 8, False),  # ResNet-50's 512 -> 128 at 28x28: whole pixel vectors
        (784, 240, 40, 8, False),
        (3136, 24, 72, 8, False),
    ],
)
def test_layout_choice(pixels, channels, inner, lanes, channels_first):
    along_pixels, along_channels = layout_waste(pixels, channels, inner, lanes)
    assert (along_channels < along_pixels) is channels_first


@pytest.mark.skipif(not supports_isa("avx2"), reason="this CPU cannot run AVX2 code")
@pytest.mark.parametrize(
    "shape", [(1, 672, 112, 14), (1, 40, 80, 14), (1, 184, 80, 14), (2, 96, 112, 13)]
)
@pytest.mark.parametrize("epilogue", ["bias hard-swish", "bias residual"])
def test_avx2_layout_matches_the_pixels_layout(monkeypatch, shape, epilogue):
    """AVX2 builds run 14x14 planes into 80-184 channels in the ``channels`` layout
    (``TRANSPOSE_COST[8]``; AVX-512 builds run them in ``pixels``): outputs bitwise those
    of the ``pixels`` layout (each output the same multiply-adds in the same order), and
    INTERPRETER's."""
    from opgraph.backends.fused.lowering import pointwise as lowering

    fn, args = graph(*shape, epilogue=epilogue)
    backend = CpuBackend(dataclasses.replace(default_config(), isa="avx2", num_threads=2))
    results = []
    for forced in (None, (1.0, 2.0)):  # the AVX2 choice, then pixels
        if forced is not None:
            monkeypatch.setattr(lowering, "layout_waste", lambda *a, f=forced: f)
        exe = backend.compile(fn)
        (step,) = [s for s in exe.program.steps if isinstance(s, PointwiseConvStep)]
        assert step.channels_first is (forced is None)
        results.append(exe(*args)[0])
    np.testing.assert_array_equal(results[0], results[1])
    assert_interpreter_values(fn, args, results[0])


@pytest.mark.skipif(not supports_isa("avx2"), reason="this CPU cannot run AVX2 code")
def test_avx2_patch_convolutions_keep_the_wide_costs():
    """A patch convolution (Whisper's k3 stride-2 Conv1d: 1500 positions, 384 patch rows)
    keeps AVX-512's layout costs on AVX2 (the ``channels`` layout would write its whole
    patch matrix first): ``pixels``, its patches built per unit; INTERPRETER's values."""
    x = og.parameter(og.f32, (1, 128, 3000))
    w = og.constant((RNG.standard_normal((64, 128, 3)) / np.sqrt(384)).astype(np.float32))
    fn = og.Function([ops.relu(ops.convolution(x, w, (2,), None, (1,), (1,)))], [x])
    args = [RNG.standard_normal((1, 128, 3000)).astype(np.float32)]
    along_pixels, along_channels = layout_waste(1500, 64, 384, 8)
    assert along_channels < along_pixels  # what a 1x1 product of this size would take
    backend = CpuBackend(dataclasses.replace(default_config(), isa="avx2", num_threads=2))
    (step,) = check(backend, fn, args)
    assert type(step) is PointwiseConvStep
    assert not step.channels_first and step.unit_patches


@pytest.mark.skipif(not supports_isa("avx2"), reason="this CPU cannot run AVX2 code")
@pytest.mark.parametrize("name", list(SHAPES))
def test_pointwise_with_avx2_blocking(name):
    """``isa="avx2"``: the AVX2 branch of the kernels (8 lanes: pixel tiles of three vectors
    with the 8-row panel in two groups of 4 rows, partial groups and 1-2 vector tails; 6
    pixels x 2 vectors per pass over a channel panel; the 16-column tail as two vectors)."""
    backend = CpuBackend(dataclasses.replace(default_config(), isa="avx2", num_threads=2))
    (n, c, o, size, stride), _ = SHAPES[name]
    fn, args = graph(n, c, o, size, stride, epilogue="bias hard-swish")
    (step,) = check(backend, fn, args)
    assert type(step) is PointwiseConvStep


PANEL_ORDER_CASES = {  # (n, c, o, size): few input channels, as EfficientNet's 16 -> 96
    "112x112, whole panels": (1, 16, 96, 112),
    "tail columns, a partial panel": (1, 16, 13, 15),
    "batch of two, three channels": (2, 3, 20, 9),
}


@pytest.mark.parametrize("epilogue", ["none", "bias silu", "bias residual"])
@pytest.mark.parametrize("name", list(PANEL_ORDER_CASES))
@pytest.mark.parametrize("threads", [1, 3])
def test_panel_outer_order_matches_the_pixel_block_order(monkeypatch, name, epilogue, threads):
    """Few input channels run a unit panel by panel (``PANEL_OUTER_CHANNELS``): the same
    products and epilogue per element as the order by blocks of pixels, so the outputs are
    bitwise those, and match INTERPRETER."""
    from opgraph.backends.cpu import CpuConfig
    from opgraph.backends.cpu.codegen import pointwise as emitter

    n, c, o, size = PANEL_ORDER_CASES[name]
    fn, args = graph(n, c, o, size, epilogue=epilogue)
    config = dataclasses.replace(default_config(), num_threads=threads, parallel_threshold=1)
    assert isinstance(config, CpuConfig)
    results, sources = [], []
    for limit in (c, c - 1):  # panels outer, then blocks of pixels outer
        monkeypatch.setattr(emitter, "PANEL_OUTER_CHANNELS", limit)
        exe = CpuBackend(config).compile(fn)
        assert any(isinstance(s, PointwiseConvStep) for s in exe.program.steps)
        results.append(exe(*args)[0])
        sources.append(exe.source())
    assert sources[0] != sources[1]
    np.testing.assert_array_equal(results[0], results[1])
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(results[0], want, atol=1e-5 * scale, rtol=1e-5)


def channels_builds(monkeypatch, fn, args, config, name, values):
    """The outputs and sources of ``fn`` built with ``pointwise_kernels.<name>`` set to each
    of ``values`` in turn; each build runs its 1x1 convolution in the ``channels`` layout."""
    from opgraph.backends.cpu.codegen import pointwise_kernels

    results, sources = [], []
    for value in values:
        monkeypatch.setattr(pointwise_kernels, name, value)
        exe = CpuBackend(config).compile(fn)
        (step,) = [s for s in exe.program.steps if isinstance(s, PointwiseConvStep)]
        assert step.channels_first
        results.append(exe(*args)[0])
        sources.append(exe.source())
    return results, sources


def assert_interpreter_values(fn, args, got):
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=1e-5)


WIDE_TAIL_CASES = {  # (n, c, o, size): channels layout, pixels = 1 mod 12 (13-pixel tile)
    "7x7, ResNet-50's 512 -> 2048 in small": (1, 160, 96, 7),
    "5x5, a partial panel": (1, 192, 80, 5),
    "13x13": (1, 256, 64, 13),
    "batch of two, 7x7": (2, 128, 64, 7),
}


@pytest.mark.parametrize("epilogue", ["none", "bias residual"])
@pytest.mark.parametrize("name", list(WIDE_TAIL_CASES))
@pytest.mark.parametrize("threads", [1, 3])
def test_wide_tail_tile_matches_the_narrow_tiles(monkeypatch, name, epilogue, threads):
    """With AVX-512 a ``channels`` range that ends 13 pixels before its end runs them as one
    13-pixel tile (``wide_tail``) instead of 12 + 1: the same products per element, so the
    outputs are bitwise those of the narrow tiles (their one-pixel tile held to the passes of
    two vectors: ``og_pw_ch_one`` sums even and odd input channels apart), and match
    INTERPRETER."""
    from opgraph.backends.cpu.codegen import pointwise_kernels

    monkeypatch.setattr(pointwise_kernels, "one_pass_pixel", lambda lanes: False)
    n, c, o, size = WIDE_TAIL_CASES[name]
    fn, args = graph(n, c, o, size, epilogue=epilogue)
    config = dataclasses.replace(default_config(), num_threads=threads, parallel_threshold=1)
    wide = [lambda lanes, rb, w=w: w for w in (True, False)]
    results, sources = channels_builds(monkeypatch, fn, args, config, "wide_tail", wide)
    assert "og_pw_ch_run(13," in sources[0] and "og_pw_ch_run(13," not in sources[1]
    np.testing.assert_array_equal(results[0], results[1])
    assert_interpreter_values(fn, args, results[0])


def test_wide_tail_only_where_the_accumulators_fit():
    from opgraph.backends.cpu.codegen.pointwise_kernels import BLOCKING, wide_tail

    assert {lanes: wide_tail(lanes, rb) for _, lanes, _, rb in BLOCKING} == {
        16: True,
        8: False,
        4: False,
    }


ONE_PIXEL_CASES = {  # (n, c, o, size): channels layout, one-pixel tiles
    "squeeze-excite 1x1, a partial panel": (1, 240, 120, 1),
    "7x7 (AVX2: 8 x 6 + 1; AVX-512 takes 3 x 12 + 13)": (1, 160, 96, 7),
    "batch of two 1x1, one partial panel": (2, 72, 24, 1),
    "3x3 (8 + 1; AVX2 6 + 2 + 1), odd K": (1, 157, 40, 3),
}
#: The builds that run one-pixel tiles in one pass, and the cases that have such a tile there.
ONE_PIXEL_ISAS = {
    "avx2": list(ONE_PIXEL_CASES),
    "avx512": [name for name in ONE_PIXEL_CASES if not name.startswith("7x7")],
}


@pytest.mark.parametrize("epilogue", ["bias hard-swish", "bias residual"])
@pytest.mark.parametrize(
    ("isa", "name"),
    [
        pytest.param(
            isa,
            name,
            marks=pytest.mark.skipif(
                not supports_isa(isa), reason=f"this CPU cannot run {isa} code"
            ),
        )
        for isa, names in ONE_PIXEL_ISAS.items()
        for name in names
    ],
)
def test_one_pixel_pass_matches_the_two_vector_passes(monkeypatch, isa, name, epilogue):
    """A one-pixel tile runs over its whole panel in one pass (``og_pw_ch_one``, four
    accumulators) instead of passes of two vectors. AVX2: the same multiply-adds per channel
    in the same order, within a rounding of the passes (GCC leaves some modules' second pass
    uncontracted: 2 x 72 -> 24 at 1x1, 14 of 48 outputs one rounding apart; the zoo models'
    outputs are bitwise). AVX-512: even and odd input channels summed apart, then added, so a
    few roundings apart (the tolerance below); and INTERPRETER's values."""
    from opgraph.backends.cpu.codegen.pointwise_kernels import one_pass_pixel

    n, c, o, size = ONE_PIXEL_CASES[name]
    fn, args = graph(n, c, o, size, epilogue=epilogue)
    config = dataclasses.replace(default_config(), isa=isa, num_threads=2)
    values = [one_pass_pixel, lambda lanes: False]
    results, sources = channels_builds(monkeypatch, fn, args, config, "one_pass_pixel", values)
    assert "og_pw_ch_one(wt" in sources[0] and "og_pw_ch_one(" not in sources[1]
    scale = float(np.max(np.abs(results[1])))
    tolerance = 1e-6 if isa == "avx2" else 1e-5
    np.testing.assert_allclose(results[0], results[1], rtol=tolerance, atol=tolerance * scale)
    assert_interpreter_values(fn, args, results[0])


def test_one_pixel_pass_where_it_gives_more_chains():
    from opgraph.backends.cpu.codegen.pointwise_kernels import (
        BLOCKING,
        one_pass_pixel,
        pixel_splits,
    )

    # AVX-512 covers a panel in one pass of two vectors already, and splits k in two for
    # four chains; SSE's 8 + 8 + 1 registers would not fit
    assert {lanes: (one_pass_pixel(lanes), pixel_splits(lanes)) for _, lanes, _, _ in BLOCKING} == {
        16: (True, 2),
        8: (True, 1),
        4: (False, 1),
    }


PREFETCHES = {  # pointwise_kernels' constant: the prefetches' text, the shapes, the ISAs
    "PANEL_PREFETCH": (
        "__builtin_prefetch(wt + k",
        [(1, 160, 96, 7), (1, 256, 256, 14)],
        ["native", "avx2"],
    ),
    # AVX-512's tiles only (INPUT_PREFETCHED_LANES): an AVX2 build compiles the text out,
    # so an AVX2 case would compare two identical programs.
    "INPUT_PREFETCH": (
        "__builtin_prefetch(x + (k + ",
        [(1, 1024, 64, 7), (1, 160, 96, 7)],
        ["native"],
    ),
}


@pytest.mark.parametrize(
    "name, shape, isa",
    [
        (name, shape, isa)
        for name, (_, shapes, isas) in PREFETCHES.items()
        for shape in shapes
        for isa in isas
    ],
)
def test_prefetch_changes_no_value(monkeypatch, name, shape, isa):
    """``PANEL_PREFETCH`` only adds prefetches of the filter panel's rows ahead (AVX-512 and
    AVX2), ``INPUT_PREFETCH`` of a ``channels`` tile's input rows (AVX-512's tiles); past
    their ends on the last rows (prefetches do not fault): bitwise the outputs without them,
    on the instruction sets that emit them."""
    from opgraph.backends.cpu.codegen import pointwise_kernels

    fn, args = graph(*shape, epilogue="bias residual")
    ahead = (getattr(pointwise_kernels, name), 0)
    config = dataclasses.replace(default_config(), isa=isa)
    if name == "INPUT_PREFETCH" and config.vector_lanes() not in INPUT_PREFETCHED_LANES:
        pytest.skip("the input rows' prefetch is AVX-512's; this build has no AVX-512 tile")
    results, sources = channels_builds(monkeypatch, fn, args, config, name, ahead)
    needle = PREFETCHES[name][0]
    assert needle in sources[0]
    assert needle not in sources[1]
    np.testing.assert_array_equal(results[0], results[1])


TRANSPOSE_CASES = {  # (n, c, o, size): channels layout; 4- to 13-pixel tiles, partial panels
    "14x14": (1, 256, 256, 14),
    "7x7, a panel of 8 channels": (1, 256, 104, 7),
    "20 pixels (12 + 8)": (5, 64, 64, 2),
    "7x7, a panel of 16 channels": (1, 160, 80, 7),
    "13x13": (1, 256, 64, 13),
    "batch of two, 7x7": (2, 128, 64, 7),
    "40 pixels (AVX2: 6 x 6 + 4), a panel of 5 channels": (10, 512, 229, 2),
}


STORES = {
    "native": "__builtin_ia32_storeups512_mask(",
    "avx2": "__builtin_ia32_vextractf128_ps256(",
}


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("name", list(TRANSPOSE_CASES))
@pytest.mark.parametrize("threads", [1, 3])
def test_transposed_store_matches_scalar_stores(monkeypatch, name, threads, isa):
    """``channels`` tiles of ``TRANSPOSED_STORES``' pixels or more (AVX-512: 8, by masked
    stores; AVX2: 4, by a 16-byte store and one of the rest per channel) are transposed in
    registers: bitwise the scalar stores' outputs (only the stores differ), nothing written
    past the tile's pixels or valid channels, and INTERPRETER's values."""
    from opgraph.backends.cpu.codegen import pointwise_kernels

    if not supports_isa(isa):
        pytest.fail(f"this CPU cannot run {isa} code")
    n, c, o, size = TRANSPOSE_CASES[name]
    fn, args = graph(n, c, o, size, epilogue="bias residual")
    config = dataclasses.replace(default_config(), num_threads=threads, parallel_threshold=1)
    if isa == "avx2":
        config = dataclasses.replace(config, isa="avx2")
    table = pointwise_kernels.TRANSPOSED_STORES
    never = {lanes: (pointwise_kernels.RB_MAX + 2, *rest) for lanes, (_, *rest) in table.items()}
    results, sources = channels_builds(
        monkeypatch, fn, args, config, "TRANSPOSED_STORES", (table, never)
    )
    for isa_store in STORES.values():  # both branches are in every build's text
        assert isa_store in sources[0] and isa_store not in sources[1]
    np.testing.assert_array_equal(results[0], results[1])
    assert_interpreter_values(fn, args, results[0])
