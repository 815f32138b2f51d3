"""ResNet-style 3x3 convolutions on the CPU backend's faster paths (H52): Winograd
F(4x4, 3x3) tiles (``WinogradStep.tile == 4``) and F(2x2, 3x3) tiles read from zero-padded
row copies, with their edges, padding, several images per unit, output-channel blocks and
fused epilogues, against INTERPRETER; and the choice between the two tiles."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.convolution import winograd_layout
from opgraph.backends.fused.lowering.winograd_tiles import filter_transform, winograd_tile
from opgraph.backends.fused.program import WinogradStep

RNG = np.random.default_rng(52)


def conv_graph(n, c, o, size, pad=1, residual=False, width=None):
    """A 3x3 convolution (constant filters) + bias + ReLU, or + residual + ReLU."""
    width = width or size
    x = og.parameter(og.f32, (n, c, size, width))
    weights = (RNG.standard_normal((o, c, 3, 3)) * (2.0 / (9 * c)) ** 0.5).astype(np.float32)
    y = ops.convolution(x, og.constant(weights), (1, 1), None, (pad, pad), (pad, pad))
    params = [x]
    args = [RNG.standard_normal((n, c, size, width)).astype(np.float32)]
    if residual:
        r = og.parameter(og.f32, y.shape)
        params.append(r)
        args.append(RNG.standard_normal(r.shape).astype(np.float32))
        y = ops.relu(ops.add(y, r))
    else:
        bias = og.constant(RNG.standard_normal(o).astype(np.float32))
        y = ops.relu(ops.add(y, ops.broadcast(bias, y.shape, (0, 2, 3))))
    return og.Function([y], params), args


CASES = {  # name: (graph, the tile the step takes)
    "one image, row blocks": (dict(n=1, c=16, o=24, size=32), 4),
    "edges: 4 does not divide the plane": (dict(n=1, c=16, o=16, size=29), 4),
    "no padding": (dict(n=1, c=16, o=16, size=30, pad=0), 4),
    "padding 2": (dict(n=1, c=16, o=16, size=27, pad=2), 4),
    "rectangular plane": (dict(n=1, c=16, o=32, size=28, width=60), 4),
    "channel blocks": (dict(n=1, c=32, o=256, size=28), 4),
    "residual epilogue": (dict(n=1, c=32, o=32, size=28, residual=True), 4),
    "many input channels": (dict(n=1, c=256, o=32, size=28), 4),
    "2x2 tiles, padded rows, images per unit": (dict(n=8, c=32, o=32, size=12), 2),
    "4x4 tiles, a batch of 16x16 planes, two images a unit": (dict(n=8, c=32, o=32, size=16), 4),
    "4x4 tiles, CIFAR 4x4: one tile an image, channel blocks": (dict(n=32, c=64, o=128, size=4), 4),
    "2x2 tiles, padding 2, odd plane": (dict(n=2, c=16, o=16, size=19, pad=2), 2),
    "2x2 tiles, residual, CIFAR 8x8": (dict(n=16, c=64, o=64, size=8, residual=True), 2),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_winograd_matches_interpreter(name, backend_name, request):
    backend = request.getfixturevalue(backend_name)
    params, tile = CASES[name]
    fn, args = conv_graph(**params)
    exe = backend.compile(fn)
    steps = [s for s in exe.program.steps if isinstance(s, WinogradStep)]
    assert [s.tile for s in steps] == [tile], exe.program.steps
    assert steps[0].epilogue is not None  # bias/residual and ReLU fused into the step
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0].astype(np.float64)
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(got, want, atol=2e-5 * scale, rtol=1e-4)


def test_f4_layout_folds_images_and_splits_channels():
    """F(4x4) units aim for F4_BLOCK tiles: F4_IMAGE_TILES of whole images when a plane has
    fewer (and have at least that many)."""
    assert winograd_layout(1, 64, 56, 56, 2, tile=4) == (7, 1, 1)  # 2 units of 98 tiles
    assert winograd_layout(1, 64, 56, 56, 4, tile=4) == (4, 1, 1)  # one a thread
    assert winograd_layout(1, 64, 56, 56, 1, tile=4) == (5, 1, 1)  # F4_BLOCK tiles
    assert winograd_layout(1, 128, 28, 28, 2) == (4, 1, 1)  # F(2x2): two units a thread
    assert winograd_layout(1, 256, 28, 28, 2, tile=4) == (7, 1, 4)
    assert winograd_layout(8, 64, 16, 16, 2, tile=4) == (4, 2, 1)  # 32 tiles
    assert winograd_layout(32, 512, 4, 4, 2, tile=4) == (1, 32, 4)
    assert winograd_layout(16, 512, 4, 4, 2, tile=4) is None  # 16 tiles: too few
    assert winograd_layout(1, 64, 14, 14, 2, tile=4) is None  # 16 tiles: too few


@pytest.mark.parametrize(
    ("shape", "tile"),
    [
        ((1, 64, 56, 56), 4),  # ResNet-18 layer 1
        ((1, 128, 28, 28), 4),  # layer 2
        ((1, 256, 14, 14), 2),  # layer 3
        ((32, 64, 32, 32), 2),  # CIFAR batch 32: level, 2x2 tiles round less
        ((32, 128, 16, 16), 4),  # CIFAR layer 2: F4_BATCH_SIDES
        ((32, 256, 8, 8), 2),  # layer 3: level in the model
        ((32, 512, 4, 4), 4),  # CIFAR layer 4: one 4x4 tile per image
        ((8, 64, 12, 12), 2),  # a side F4_BATCH_SIDES does not name
        ((32, 64, 16, 8), 2),  # not square
        ((1, 16, 6, 40), 2),  # too short for 4x4 tiles
    ],
)
def test_winograd_tile_choice(shape, tile):
    n, o, oh, ow = shape
    assert winograd_tile(n, o, oh, ow, 2) == tile


def test_small_plane_falls_back_to_2x2_tiles(cpu):
    """ResNet-18's 14x14 layer at batch 1: 16 4x4 tiles are too few for a unit, so 2x2."""
    fn, args = conv_graph(n=1, c=16, o=200, size=14)
    exe = cpu.compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, WinogradStep)]
    assert step.tile == 2
    want = og.backend("INTERPRETER").compile(fn)(*args)[0]
    np.testing.assert_allclose(exe(*args)[0], want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))


@pytest.mark.parametrize("tile", [2, 4])
def test_filter_transform_reproduces_the_correlation(tile):
    """Aᵀ[U ⊙ (Bᵀ d B)]A of one tile equals the direct 3x3 correlation (f64 check of the
    compile-time transform against the input/output transforms the C code writes out)."""
    bt = {
        2: [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        4: [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
    }[tile]
    at = {
        2: [[1, 1, 1, 0], [0, 1, -1, -1]],
        4: [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    }[tile]
    bt_, at_ = np.array(bt, np.float64), np.array(at, np.float64)
    g = RNG.standard_normal((1, 1, 3, 3))
    d = RNG.standard_normal((tile + 2, tile + 2))
    u = filter_transform(g, tile).astype(np.float64).reshape(tile + 2, tile + 2)
    y = at_ @ (u * (bt_ @ d @ bt_.T)) @ at_.T
    want = [[np.sum(d[i : i + 3, j : j + 3] * g[0, 0]) for j in range(tile)] for i in range(tile)]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_symbolic_batch_keeps_2x2_tiles_with_padded_rows(cpu):
    """A symbolic batch (one compile for every batch size) takes F(2x2) tiles, its edge
    tiles read from padded row copies; correct at two batch sizes."""
    batch = og.dim("batch", max=8)
    x = og.parameter(og.f32, (batch, 32, 30, 30))
    weights = (RNG.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    y = ops.relu(ops.convolution(x, og.constant(weights), (1, 1), None, (1, 1), (1, 1)))
    fn = og.Function([y], [x])
    exe = cpu.compile(fn)
    assert [s.tile for s in exe.program.steps if isinstance(s, WinogradStep)] == [2]
    reference = og.backend("INTERPRETER").compile(fn)
    for n in (1, 3):
        data = RNG.standard_normal((n, 32, 30, 30)).astype(np.float32)
        want = reference(data)[0]
        np.testing.assert_allclose(exe(data)[0], want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))
