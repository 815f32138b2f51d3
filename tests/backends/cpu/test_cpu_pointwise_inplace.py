"""A ``pixels`` 1x1 convolution that adds a residual in registers writes its output over the
residual's block when the residual dies there (``PointwiseConvStep.inplace_pairs``), and a
bottleneck block's ``(y + b1) + (r + b2)`` of two 1x1 products is split so that the shortcut
carries its own shift (``fused/epilogues.py`` ``split_shifted_residuals``): the same bits as
the build without either."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused import epilogues
from opgraph.backends.fused.lowering.pointwise import PointwiseConvStep, channel_bias
from opgraph.backends.fused.program import LoopStep

RNG = np.random.default_rng(154)


def _conv(x, c, o, bias=True):
    w = og.constant((RNG.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32))
    y = ops.convolution(x, w, (1, 1), None, (0, 0), (0, 0))
    if not bias:
        return y
    b = og.constant(RNG.standard_normal(o).astype(np.float32))
    return ops.add(y, ops.broadcast(b, y.shape, (0, 2, 3)))


def _block(shortcut: str, n=1, c=16, o=32, size=28):
    """A bottleneck block on (n, c, size, size): 1x1 c -> 8 with ReLU, 1x1 8 -> o plus a
    bias, plus the shortcut (``"conv"``: a biased 1x1 c -> o convolution of the block's
    input; ``"input"``: ``s``, a 1x1 8 -> o without bias, and the products ``o -> o`` are of
    ``s`` itself), then ReLU, then a 1x1 o -> 8."""
    x = og.parameter(og.f32, (n, c, size, size))
    a = ops.relu(_conv(x, c, 8))
    if shortcut == "conv":
        s = _conv(x, c, o)
        y = _conv(a, 8, o)
    else:
        s = _conv(a, 8, o, bias=False)
        y = _conv(s, o, o)
    out = _conv(ops.relu(ops.add(y, s)), o, 8)  # (the block's output in the arena)
    args = [RNG.standard_normal((n, c, size, size)).astype(np.float32)]
    return og.Function([out], [x]), args


def _epilogue_pass(step):
    """Whether ``step`` runs an epilogue pass (a loop step, or a convolution's epilogue
    that its kernel does not apply in registers)."""
    if isinstance(step, LoopStep):
        return True
    return (
        isinstance(step, PointwiseConvStep)
        and step.epilogue is not None
        and (channel_bias(step) is None)
    )


def _bare(cpu, fn):
    """``fn`` built without the shift split and without in-place pairs."""
    with (
        mock.patch.object(epilogues, "split_shifted_residuals", lambda program, index: None),
        mock.patch.object(PointwiseConvStep, "inplace_pairs", lambda self: []),
    ):
        return cpu.compile(fn)


def _paired(exe):
    """Whether a 1x1 convolution's output shares its block with its input's (a residual)."""
    steps = exe.program.steps
    outputs = {s.out.buffer for s in steps if isinstance(s, PointwiseConvStep)}
    return any(dst in outputs for _, dst in exe.memory_plan().inplace)


def _bits(a):
    return np.array(a).view(np.uint32)  # a copy


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize("n", [1, 2])
def test_shortcut_shift_split_and_output_over_the_residual(request, backend, n):
    cpu = request.getfixturevalue(backend)
    fn, args = _block("conv", n)
    exe = cpu.compile(fn)
    steps = exe.program.steps
    assert not any(_epilogue_pass(s) for s in steps)  # both epilogues in registers
    plan = exe.memory_plan()
    assert _paired(exe)
    bare = _bare(cpu, fn)
    assert not bare.memory_plan().inplace
    assert any(_epilogue_pass(s) for s in bare.program.steps)  # a pass without
    assert bare.memory_plan().peak > plan.peak
    assert np.array_equal(_bits(exe(*args)[0]), _bits(bare(*args)[0]))


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
@pytest.mark.parametrize(("n", "size"), [(1, 13), (2, 7)])
def test_output_over_the_residual_with_part_vector_tails(request, backend, n, size):
    """Images whose pixels end in a part vector (13x13, 7x7): the bits are the bare build's;
    the AVX-512 build pairs the output with the residual in both (the AVX2 one lays two 7x7
    images out without the pair)."""
    cpu = request.getfixturevalue(backend)
    fn, args = _block("conv", n, size=size)
    exe = cpu.compile(fn)
    assert _paired(exe) or cpu.config.vector_lanes() == 8  # (an AVX2 build: either fixture)
    bare = _bare(cpu, fn)
    assert np.array_equal(_bits(exe(*args)[0]), _bits(bare(*args)[0]))


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
def test_residual_that_is_the_products_input_is_not_overwritten(request, backend):
    """The residual is the convolution's input too: no block shared with it (a later tile
    reads the input a store would have overwritten); the bits are the bare build's."""
    cpu = request.getfixturevalue(backend)
    fn, args = _block("input")
    exe = cpu.compile(fn)
    with mock.patch.object(PointwiseConvStep, "inplace_pairs", lambda self: []):
        same = cpu.compile(fn)
    assert np.array_equal(_bits(exe(*args)[0]), _bits(same(*args)[0]))
    (step,) = [s for s in exe.program.steps if _residual_is_input(s)]
    assert step.inplace_pairs() == []
    assert not exe.memory_plan().inplace


def _residual_is_input(step):
    bias = channel_bias(step) if isinstance(step, PointwiseConvStep) else None
    residual = None if bias is None else bias.residual
    return residual is not None and step.x is not None and residual.buffer == step.x.buffer
