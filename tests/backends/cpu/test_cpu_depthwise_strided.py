"""3x3 and 5x5 stride-2 f32 depthwise steps straight from the input rows (``codegen/
depthwise_strided.py``, AVX-512 and AVX2 builds) against INTERPRETER and bitwise against the
copy-in form they replace: widths that are and are not a multiple of the vector, odd
heights (a last row whose third filter row is below the image), padding 0 or 1 above and
to the left (PyTorch's and TensorFlow's "same"), an odd width without padding, fused epilogues, several
images, one and three threads, the AVX2 build's 8-lane vectors; and the steps the form must
not take."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import depthwise_strided
from opgraph.backends.fused.program import ConvStep

RNG = np.random.default_rng(31)
CALL = "og_dws2_rows"


def depthwise(shape, below=(1, 1), above=(1, 1), epilogue=True, kernel=(3, 3), strides=(2, 2)):
    """A depthwise convolution with constant filters (and a bias + ReLU epilogue)."""
    c = shape[1]
    weights = (RNG.standard_normal((c, 1, *kernel)) * 0.3).astype(np.float32)
    x = og.parameter(og.f32, shape)
    y = ops.convolution(x, og.constant(weights), strides, None, below, above, groups=c)
    if epilogue:
        bias = og.constant(RNG.standard_normal(c).astype(np.float32))
        y = ops.relu(ops.add(y, ops.broadcast(bias, y.shape, (0, 2, 3))))
    return og.Function([y], [x]), [RNG.standard_normal(shape).astype(np.float32)]


def run(backend, fn, args):
    """The compiled step's output after checking it against INTERPRETER, and its source."""
    exe = backend.compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, ConvStep)]
    assert step.direct
    want = og.backend("INTERPRETER").compile(fn)(*args)[0].astype(np.float64)
    got = exe(*args)[0]
    scale = np.max(np.abs(want)) + 1
    np.testing.assert_allclose(got.astype(np.float64), want, atol=1e-5 * scale, rtol=1e-5)
    return got, exe.source()


CASES = {
    "112 -> 56 (vectors and an overlapping last one)": dict(shape=(1, 4, 112, 112)),
    "32 -> 16 wide, one vector a row": dict(shape=(2, 3, 20, 32)),
    "odd height": dict(shape=(1, 5, 33, 40)),
    "no epilogue": dict(shape=(1, 2, 18, 48), epilogue=False),
    "padding below and right (TF same), 112 -> 56": dict(
        shape=(1, 3, 112, 112), below=(0, 0), above=(1, 1)
    ),
    "no padding, odd width 41 -> 20": dict(shape=(2, 2, 21, 41), below=(0, 0), above=(0, 0)),
    "padding above only": dict(shape=(1, 2, 24, 40), below=(1, 0), above=(0, 1)),
    "padding left only": dict(shape=(1, 2, 25, 40), below=(0, 1), above=(0, 0)),
    "3x3, padding 2 to the left": dict(shape=(1, 2, 24, 40), below=(2, 2), above=(0, 0)),
    "wider input than twice the output": dict(shape=(1, 2, 24, 37), below=(1, 1), above=(0, 0)),
    "5x5, 56 -> 28": dict(shape=(1, 3, 56, 56), kernel=(5, 5), below=(2, 2), above=(2, 2)),
    "5x5, TF same, 56 -> 28": dict(shape=(1, 3, 56, 56), kernel=(5, 5), below=(1, 1), above=(2, 2)),
    "5x5, odd height, 19 wide": dict(
        shape=(2, 2, 35, 38), kernel=(5, 5), below=(2, 2), above=(2, 2), epilogue=False
    ),
    "5x5, no padding above": dict(shape=(1, 2, 40, 36), kernel=(5, 5), below=(0, 2), above=(1, 1)),
}


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_rows_match_the_copy_in_form_bitwise(name, threads, monkeypatch):
    config = dataclasses.replace(default_config(), num_threads=threads)
    fn, args = depthwise(**CASES[name])
    got, source = run(CpuBackend(config), fn, args)
    assert CALL in source
    monkeypatch.setattr(depthwise_strided, "takes", lambda *a: False)
    old, old_source = run(CpuBackend(config), fn, args)
    assert CALL not in old_source
    np.testing.assert_array_equal(got, old)


@pytest.mark.parametrize("name", list(CASES))
def test_avx2_build_matches_the_copy_in_form_bitwise(name, avx2_cpu, monkeypatch):
    """The AVX2 build runs the helper on 8-lane vectors (a row of 16 outputs: two vectors,
    an odd width: a last vector overlapping), bitwise the copy-in form's outputs."""
    fn, args = depthwise(**CASES[name])
    got, source = run(avx2_cpu, fn, args)
    assert CALL in source
    monkeypatch.setattr(depthwise_strided, "takes", lambda *a: False)
    old, old_source = run(avx2_cpu, fn, args)
    assert CALL not in old_source
    np.testing.assert_array_equal(got, old)


NOT_TAKEN = {
    "padding as tall as the filter": dict(shape=(1, 2, 32, 32), below=(3, 1), above=(0, 0)),
    "5x5, padding 3 to the left": dict(shape=(1, 2, 40, 40), kernel=(5, 5), below=(2, 3)),
    "5x5, no padding to the left": dict(shape=(1, 2, 40, 40), kernel=(5, 5), below=(2, 0)),
    "odd width with padding to the left": dict(shape=(1, 2, 32, 33)),
    "rows narrower than a vector": dict(shape=(1, 2, 28, 28)),
    "stride 1": dict(shape=(1, 2, 32, 32), strides=(1, 1)),
    "7x7": dict(shape=(1, 2, 40, 40), kernel=(7, 7), below=(3, 3), above=(3, 3)),
}


@pytest.mark.parametrize("name", list(NOT_TAKEN))
def test_other_steps_keep_the_copy_in_form(name, cpu):
    fn, args = depthwise(**NOT_TAKEN[name])
    _, source = run(cpu, fn, args)
    assert CALL not in source


@pytest.mark.parametrize(
    "name", ["112 -> 56 (vectors and an overlapping last one)", "5x5, 56 -> 28"]
)
@pytest.mark.parametrize("isa", ["native", "avx2"])
def test_prefetch_beyond_l2_changes_no_value(name, isa, monkeypatch):
    """Inputs larger than the L2 cache prefetch the rows ``PREFETCH_ROWS`` output rows ahead
    (past the plane and the tensor too: a prefetch never faults); the outputs are bitwise
    those without it, and inputs within L2 are read without it."""
    config = dataclasses.replace(default_config(), num_threads=2, isa=isa)
    fn, args = depthwise(**CASES[name])
    plain, source = run(CpuBackend(config), fn, args)
    assert CALL in source and ", 0L);" in source.split(CALL)[-1].split("\n")[0]
    monkeypatch.setattr(depthwise_strided, "l2_cache_bytes", lambda: 4096)
    ahead = f", {depthwise_strided.PREFETCH_ROWS}L);"
    fetched, source = run(CpuBackend(config), fn, args)
    assert ahead in source.split(CALL)[-1].split("\n")[0]
    np.testing.assert_array_equal(fetched, plain)
