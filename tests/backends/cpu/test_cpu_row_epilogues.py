"""A row kernel after a product: its elementwise head becomes the product's epilogue and its
reductions a step of their own (``fused/row_split.py``), as in EfficientNet's depthwise
convolution, bias, SiLU and squeeze-excite mean; refused where the head's stores depend on a
reduction or the reductions read a head value that is not stored."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused import epilogues
from opgraph.backends.fused.builder import build_program
from opgraph.backends.fused.pipeline import lower
from opgraph.backends.fused.program import ConvStep, KKind, Level, LoopStep
from opgraph.backends.fused.row_split import split_rows

RNG = np.random.default_rng(117)


def _depthwise(x: og.Output, channels: int) -> og.Output:
    w = og.constant((RNG.standard_normal((channels, 1, 3, 3)) * 0.3).astype(np.float32))
    bias = og.constant(RNG.standard_normal(channels).astype(np.float32))
    y = ops.convolution(x, w, None, None, (1, 1), (1, 1), groups=channels)
    return ops.add(y, ops.broadcast(bias, y.shape, (0, 2, 3)))


def squeeze_excite(shape: tuple[int, int, int, int]) -> og.Function:
    """Depthwise, bias, SiLU, the mean over the plane, a 1x1 convolution of it and its sigmoid
    scaling the SiLU output."""
    x = og.parameter(og.f32, shape)
    c = shape[1]
    a = _depthwise(x, c)
    silu = ops.multiply(a, ops.sigmoid(a))
    w = og.constant((RNG.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32))
    mean = ops.reduce_mean(silu, (2, 3), keep_dims=True)
    scale = ops.sigmoid(ops.convolution(mean, w, None, None, (0, 0), (0, 0)))
    return og.Function([ops.multiply(silu, ops.broadcast_to(scale, shape))], [x])


def _check(backend: og.Backend, fn: og.Function, shape: tuple[int, ...]) -> object:
    exe = backend.compile(fn)
    x = RNG.standard_normal(shape).astype(np.float32)
    want = og.backend("INTERPRETER").compile(fn)(x)
    for got, ref in zip(exe(x), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * (np.abs(ref).max() + 1))
    return exe


@pytest.mark.parametrize("shape", [(1, 24, 20, 20), (2, 40, 7, 7), (1, 16, 56, 56)])
@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu", "avx2_cpu"])
def test_the_chain_lands_in_the_depthwise_step(shape, backend_name, request):
    exe = _check(request.getfixturevalue(backend_name), squeeze_excite(shape), shape)
    steps = exe.program.steps
    at = next(i for i, s in enumerate(steps) if isinstance(s, ConvStep))
    conv, rows = steps[at], steps[at + 1]
    assert conv.direct and conv.epilogue is not None and not conv.epilogue.axes
    assert "Sigmoid" in conv.label and "ReduceSum" not in conv.label
    assert isinstance(rows, LoopStep) and rows.kernels[0].axes == (2, 3)
    assert rows.label.startswith("%") and "ReduceSum" in rows.label and "Sigmoid" not in rows.label
    kinds = {n.kind for n in rows.kernels[0].nodes if n.level is Level.FULL}
    assert kinds == {KKind.LOAD}  # the reductions read the stored SiLU output back


@pytest.mark.parametrize("backend_name", ["cpu", "avx2_cpu"])
def test_the_split_sums_as_the_row_kernel_did(backend_name, request, monkeypatch):
    """The reductions see the same values in the same blocked order: the means agree with the
    unsplit row kernel's to the rounding of the SiLU's vector and scalar ``expf``."""
    shape = (1, 24, 30, 30)
    x = og.parameter(og.f32, shape)
    a = _depthwise(x, shape[1])
    silu = ops.multiply(a, ops.sigmoid(a))
    fn = og.Function([silu, ops.reduce_mean(silu, (2, 3), keep_dims=True)], [x])
    data = RNG.standard_normal(shape).astype(np.float32)
    backend = request.getfixturevalue(backend_name)
    split = backend.compile(fn)
    assert any(isinstance(s, ConvStep) and s.epilogue is not None for s in split.program.steps)
    monkeypatch.setattr(epilogues, "split_rows", lambda kernel, product: None)
    whole = backend.compile(fn)
    assert not any(isinstance(s, ConvStep) and s.epilogue for s in whole.program.steps)
    for got, ref in zip(split(data), whole(data), strict=True):
        np.testing.assert_allclose(got, ref, rtol=4e-7, atol=0)


def test_a_store_after_a_reduction_stays_in_the_row_step(cpu):
    """Centering by the plane's mean: the stored value needs the reduction, no split."""
    shape = (1, 8, 9, 9)
    x = og.parameter(og.f32, shape)
    a = _depthwise(x, shape[1])
    mean = ops.broadcast_to(ops.reduce_mean(a, (2, 3), keep_dims=True), shape)
    exe = _check(cpu, og.Function([ops.subtract(a, mean)], [x]), shape)
    conv = next(s for s in exe.program.steps if isinstance(s, ConvStep))
    assert conv.epilogue is None


def test_a_reduction_of_an_unstored_head_value_stays_in_the_row_step(cpu):
    """The sum reads the bias add, which only the row kernel keeps: no split."""
    shape = (1, 8, 9, 9)
    x = og.parameter(og.f32, shape)
    a = _depthwise(x, shape[1])
    fn = og.Function([ops.relu(a), ops.reduce_sum(a, (2, 3))], [x])
    exe = _check(cpu, fn, shape)
    conv = next(s for s in exe.program.steps if isinstance(s, ConvStep))
    assert conv.epilogue is None


def test_the_reductions_load_again_what_the_head_loads():
    """A head load the reductions use (not the product) is loaded again by them; the head's
    store is loaded back for the reduction of the stored value."""
    shape = (1, 4, 6, 6)
    p, q = og.parameter(og.f32, shape), og.parameter(og.f32, shape)
    y = ops.relu(ops.add(p, q))
    s = ops.add(ops.reduce_sum(y, (2, 3)), ops.reduce_sum(q, (2, 3)))
    program = build_program(lower(og.Function([y, s], [p, q])))
    (step,) = [t for t in program.steps if isinstance(t, LoopStep)]
    (kernel,) = step.kernels
    split = split_rows(kernel, product=0)
    assert split is not None
    assert [n.kind for n in split.head.nodes] == [KKind.LOAD, KKind.LOAD, KKind.OP, KKind.OP]
    assert [v.shape for _, v in split.head.stores] == [shape]
    loads = [n.operand for n in split.rows.nodes if n.kind is KKind.LOAD and n.level is Level.FULL]
    assert sorted(v.buffer for v in loads) == sorted([1, split.head.stores[0][1].buffer])
    assert [n.phase for n in split.rows.nodes if n.kind is KKind.REDUCE] == [0, 0]
    assert split_rows(kernel, product=1) is None  # q's load feeds the reductions too
