"""Convolutions on their patch matrix (``PointwiseConvStep`` with ``compact`` patches:
``fused/lowering/pointwise.py`` ``patch_conv_step``): kernels, strides, dilations, padding
(also asymmetric), 1-D, batches, both layouts and fused epilogues against INTERPRETER on one
and several threads; the size limit and bf16 mode keep the im2col ``ConvStep``; balanced
blocks of Winograd tile rows."""

import dataclasses

import numpy as np
import pytest
from bf16_support import needs_bf16  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.lowering import pointwise
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep
from opgraph.backends.fused.program import ConvStep, WinogradStep

RNG = np.random.default_rng(63)


def conv_graph(n, c, o, hw, kernel, strides, padding, above=None, dilations=None, act="relu"):
    x = og.parameter(og.f32, (n, c, *hw))
    weights = RNG.standard_normal((o, c, *kernel)) / np.sqrt(c * int(np.prod(kernel)))
    y = ops.convolution(x, og.constant(weights.astype(np.float32)), strides, dilations,
                        padding, above if above is not None else padding)  # fmt: skip
    bias = og.constant(RNG.standard_normal(o).astype(np.float32))
    axes = tuple(i for i in range(len(y.shape)) if i != 1)
    y = ops.add(y, ops.broadcast(bias, y.shape, axes))
    if act == "relu":
        y = ops.relu(y)
    elif act == "gelu":  # erf form, as exported models have it
        half = ops.multiply(y, og.constant(np.full(y.shape, 0.5, np.float32)))
        erf = ops.erf(ops.divide(y, og.constant(np.full(y.shape, 2**0.5, np.float32))))
        y = ops.multiply(half, ops.add(erf, og.constant(np.ones(y.shape, np.float32))))
    return og.Function([y], [x]), [RNG.standard_normal((n, c, *hw)).astype(np.float32)]


def run(backend, fn, args):
    exe = backend.compile(fn)
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got, want, atol=2e-5 * scale, rtol=1e-5)
    return exe.program.steps


CASES = {  # name: (n, c, o, (h, w), kernel, strides, padding below, padding above)
    "stem 7x7 stride 2": (1, 3, 64, (30, 30), (7, 7), (2, 2), (3, 3), None),
    "3x3 stride 2": (1, 16, 32, (28, 28), (3, 3), (2, 2), (1, 1), None),
    "3x3 stride 2, odd plane, batch": (2, 5, 24, (11, 13), (3, 3), (2, 2), (1, 1), None),
    "3x3, few channels (not Winograd)": (2, 3, 16, (12, 12), (3, 3), (1, 1), (1, 1), None),
    "5x3, asymmetric padding": (1, 6, 20, (9, 17), (5, 3), (1, 2), (2, 0), (1, 2)),
    "padded 1x1": (1, 8, 16, (10, 10), (1, 1), (1, 1), (1, 1), None),
    "unpadded 3x3 stride 3": (1, 4, 40, (16, 16), (3, 3), (3, 3), (0, 0), None),
    "channels layout, 7x7 output": (1, 64, 32, (14, 14), (3, 3), (2, 2), (1, 1), None),
    "padding wider than the kernel reach": (1, 4, 8, (5, 5), (3, 3), (1, 1), (3, 3), None),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_patch_convolutions(name, backend_name, request):
    n, c, o, hw, kernel, strides, below, above = CASES[name]
    fn, args = conv_graph(n, c, o, hw, kernel, strides, below, above)
    steps = run(request.getfixturevalue(backend_name), fn, args)
    conv = [s for s in steps if isinstance(s, ConvStep)]
    assert len(conv) == 1 and type(conv[0]) is PointwiseConvStep and conv[0].compact
    assert conv[0].kernel == kernel and conv[0].padding == below
    if name.startswith("channels"):
        assert conv[0].channels_first


def test_dilated_convolution(parallel_cpu):
    fn, args = conv_graph(1, 8, 16, (15, 15), (3, 3), (1, 1), (2, 2), dilations=(2, 2))
    steps = run(parallel_cpu, fn, args)
    (conv,) = [s for s in steps if isinstance(s, ConvStep)]
    assert type(conv) is PointwiseConvStep and conv.dilations == (2, 2)


@pytest.mark.parametrize("strides", [1, 2])
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_one_dimensional_convolution_with_gelu(strides, backend_name, request):
    """Whisper's Conv1d layers (kernel 3, padding 1, strides 1 and 2), GELU fused."""
    fn, args = conv_graph(1, 20, 48, (150,), (3,), (strides,), (1,), act="gelu")
    steps = run(request.getfixturevalue(backend_name), fn, args)
    (conv,) = [s for s in steps if isinstance(s, ConvStep)]
    assert type(conv) is PointwiseConvStep and conv.epilogue is not None


def test_patches_over_the_limit_keep_the_im2col_path(monkeypatch):
    monkeypatch.setattr(pointwise, "PATCH_FLOATS", 1000)
    fn, args = conv_graph(1, 3, 16, (20, 20), (3, 3), (2, 2), (1, 1))
    steps = run(CpuBackend(), fn, args)
    assert any(type(s) is ConvStep for s in steps)
    assert not any(isinstance(s, PointwiseConvStep) for s in steps)


@needs_bf16
def test_bf16_mode_keeps_the_im2col_path():
    """bf16 mode converts a ``ConvStep``'s product to bf16; patch steps would stay f32."""
    fn, args = conv_graph(1, 3, 16, (20, 20), (3, 3), (2, 2), (1, 1))
    exe = CpuBackend().compile(fn, precision="bf16")
    assert not any(isinstance(s, PointwiseConvStep) for s in exe.program.steps)
    want = og.backend("INTERPRETER").compile(fn)(*args)[0]
    assert np.max(np.abs(exe(*args)[0] - want)) <= 1e-2 * np.max(np.abs(want))


def test_winograd_blocks_of_tile_rows_are_balanced(parallel_cpu):
    """14 rows of 4x4 tiles in 4 units (3, 4, 3, 4 rows): every output row computed once."""
    fn, args = conv_graph(1, 16, 16, (56, 56), (3, 3), (1, 1), (1, 1))
    steps = run(parallel_cpu, fn, args)
    (wino,) = [s for s in steps if isinstance(s, WinogradStep)]
    assert wino.tile == 4 and -(-14 // wino.block_rows) > 1


UNIT_CASES = {  # the patches of each unit built in its thread's block (no patch matrix)
    "stem 7x7 stride 2, 112x112": (1, 3, 16, (112, 112), (7, 7), (2, 2), (3, 3), None),
    "3x3 stride 2, two images": (2, 32, 24, (64, 64), (3, 3), (2, 2), (1, 1), None),
    "5x5, asymmetric padding, rows split": (1, 8, 40, (60, 70), (5, 5), (1, 1), (1, 2), (3, 0)),
    "kernel 1x3, stride 2 (1-D as 2-D)": (1, 16, 40, (1, 12000), (1, 3), (1, 2), (0, 1), None),
}  # fmt: skip


@pytest.mark.parametrize("name", list(UNIT_CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_patches_built_per_unit(name, backend_name, request):
    n, c, o, hw, kernel, strides, below, above = UNIT_CASES[name]
    fn, args = conv_graph(n, c, o, hw, kernel, strides, below, above)
    steps = run(request.getfixturevalue(backend_name), fn, args)
    (conv,) = [s for s in steps if isinstance(s, ConvStep)]
    assert type(conv) is PointwiseConvStep and conv.unit_patches and not conv.compact
    _, oh, ow = conv.images
    patch_matrix = n * c * kernel[0] * kernel[1] * oh * ow
    blocks = conv.planes_at if conv.plane_rows else conv.scratch.shape[0]
    assert blocks < patch_matrix  # per-thread blocks only (then the phase planes, if any)


@pytest.mark.skipif(not supports_isa("avx2"), reason="this CPU cannot run AVX2 code")
@pytest.mark.parametrize("name", ["stem 7x7 stride 2, 112x112", "3x3 stride 2, two images"])
def test_patches_per_unit_with_avx2_blocking(name):
    """``isa="avx2"``: 8-lane tiles read each unit's patch block (rows of whole vectors)."""
    backend = CpuBackend(dataclasses.replace(default_config(), isa="avx2", num_threads=2))
    n, c, o, hw, kernel, strides, below, above = UNIT_CASES[name]
    fn, args = conv_graph(n, c, o, hw, kernel, strides, below, above)
    (conv,) = [s for s in run(backend, fn, args) if isinstance(s, ConvStep)]
    assert type(conv) is PointwiseConvStep and conv.unit_patches


PLANE_CASES = {  # unit patches copied out of the padded phase planes (``phase_planes``)
    "stem 7x7 stride 2, 112x112": (1, 3, 16, (112, 112), (7, 7), (2, 2), (3, 3), None, None),
    "7x7 stride 2, odd plane, padding above 0": (2, 3, 8, (97, 101), (7, 7), (2, 2), (3, 2),
                                                 (0, 0), None),
    "5x5 stride (2, 1), asymmetric padding": (1, 4, 24, (120, 90), (5, 5), (2, 1), (1, 2),
                                              (2, 0), None),
    "5x7 stride (3, 2), padding over the kernel": (1, 2, 16, (200, 200), (5, 7), (3, 2),
                                                   (4, 5), (1, 6), None),
    "dilated 3x3, stride 1": (1, 5, 16, (96, 96), (3, 3), (1, 1), (2, 2), None, (2, 2)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PLANE_CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_patches_from_phase_planes(name, backend_name, request):
    """Each unit copies its patch rows out of the input's padded phase planes (exact against
    INTERPRETER: the same products as patches gathered from the input)."""
    n, c, o, hw, kernel, strides, below, above, dilations = PLANE_CASES[name]
    fn, args = conv_graph(n, c, o, hw, kernel, strides, below, above, dilations)
    steps = run(request.getfixturevalue(backend_name), fn, args)
    (conv,) = [s for s in steps if isinstance(s, ConvStep)]
    assert type(conv) is PointwiseConvStep and conv.unit_patches and conv.plane_rows > 0
    _, oh, ow = conv.images
    rows, cols = pointwise.phase_planes(c, (oh, ow), (kernel, strides, dilations or (1, 1),
                                                       below))  # fmt: skip
    assert (conv.plane_rows, conv.plane_cols) == (rows, cols)
    assert conv.scratch.shape[0] == conv.planes_at + n * c * strides[1] * rows * cols


def test_phase_planes_match_the_gathered_patches(monkeypatch, parallel_cpu):
    """The same stem with planes and with patches gathered from the input: equal outputs."""
    n, c, o, hw, kernel, strides, below, above, _ = PLANE_CASES["stem 7x7 stride 2, 112x112"]
    fn, args = conv_graph(n, c, o, hw, kernel, strides, below, above)
    with_planes = parallel_cpu.compile(fn)
    monkeypatch.setattr(pointwise, "PLANE_FLOATS", 0)
    gathered = parallel_cpu.compile(fn)
    (conv,) = [s for s in gathered.program.steps if isinstance(s, ConvStep)]
    assert conv.unit_patches and conv.plane_rows == 0
    np.testing.assert_array_equal(with_planes(*args)[0], gathered(*args)[0])


def test_few_taps_per_stride_step_gather_from_the_input(parallel_cpu):
    """A 3x3 stride-2 window (9 taps < PLANE_REUSE x 4) builds no planes where its products
    cannot read them (28 output columns: ``reads_planes``)."""
    fn, args = conv_graph(2, 32, 24, (64, 56), (3, 3), (2, 2), (1, 1))
    (conv,) = [s for s in run(parallel_cpu, fn, args) if isinstance(s, ConvStep)]
    assert type(conv) is PointwiseConvStep and conv.unit_patches and conv.plane_rows == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_small_patches_panel_by_panel_match_the_pixel_block_order(monkeypatch, threads):
    """A 3x3 stem (27 patch rows, as EfficientNet-B0's, its padding only above) runs each
    unit panel by panel (``PATCH_PANEL_OUTER``): bitwise the outputs of the order by
    blocks of pixels, and INTERPRETER's."""
    from opgraph.backends.cpu.codegen import pointwise as emitter

    fn, args = conv_graph(1, 3, 36, (224, 224), (3, 3), (2, 2), (0, 0), (1, 1))
    config = dataclasses.replace(default_config(), num_threads=threads, parallel_threshold=1)
    outputs, sources = [], []
    for limit in (27, 26):
        monkeypatch.setattr(emitter, "PATCH_PANEL_OUTER", limit)
        steps = run(CpuBackend(config), fn, args)
        (conv,) = [s for s in steps if isinstance(s, ConvStep)]
        assert type(conv) is PointwiseConvStep and conv.unit_patches
        exe = CpuBackend(config).compile(fn)
        outputs.append(exe(*args)[0])
        sources.append(exe.source())
    assert sources[0] != sources[1]
    np.testing.assert_array_equal(outputs[0], outputs[1])


ROW_CASES = {  # stride-2 patch rows by masked vectors (``ROW_VECTOR_COLUMNS``): n, c, hw, ...
    "ResNet 3x3 stride 2, 28 columns": (2, 32, (56, 56), (3, 3), (1, 1), (1, 1), None),
    "odd width, 29 columns": (2, 64, (60, 57), (3, 3), (1, 1), (1, 1), None),
    "unpadded, 32 columns": (2, 64, (60, 65), (3, 3), (0, 0), (0, 0), None),
    "padding only above, dilated": (2, 64, (60, 50), (3, 3), (0, 0), (2, 2), (2, 2)),
    "33 columns: scalar rows": (2, 64, (60, 66), (3, 3), (1, 1), (1, 1), None),
}  # fmt: skip


@pytest.mark.parametrize("name", list(ROW_CASES))
def test_vector_patch_rows_match_the_scalar_rows(monkeypatch, name, parallel_cpu):
    """Each unit's stride-2 patch rows copied by masked loads and even-lane shuffles (AVX-512
    builds) or by the scalar loops: bitwise the same outputs, and INTERPRETER's."""
    from opgraph.backends.cpu.codegen import pointwise as emitter

    n, c, hw, kernel, below, above, dilations = ROW_CASES[name]
    fn, args = conv_graph(n, c, 24, hw, kernel, (2, 2), below, above, dilations)
    outputs, sources = [], []
    for columns in (32, 0):
        monkeypatch.setattr(emitter, "ROW_VECTOR_COLUMNS", columns)
        steps = run(parallel_cpu, fn, args)
        (conv,) = [s for s in steps if isinstance(s, ConvStep)]
        assert type(conv) is PointwiseConvStep and conv.unit_patches and conv.plane_rows == 0
        exe = parallel_cpu.compile(fn)
        outputs.append(exe(*args)[0])
        sources.append(exe.source())
    assert (sources[0] != sources[1]) == (conv.images[2] <= 32)
    np.testing.assert_array_equal(outputs[0], outputs[1])
