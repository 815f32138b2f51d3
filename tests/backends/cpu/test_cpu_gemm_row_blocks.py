"""Tall panel products (at least ``blas.ROW_SPLIT`` rows: Whisper's 1500 frames, ConvNeXt's
pixels) are shared between threads as blocks of rows, each a whole number of the panel
GEMM's row tiles, with the fused epilogue on each block's rows: exact against INTERPRETER
and the same on any thread count (no timing). Four blocks a thread, more for a product of
more than ``blas.ROW_UNIT_MACS`` multiply-adds a block (Whisper's FFN: 28 on two threads)."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import blas
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(72)


def _backend(threads: int) -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), num_threads=threads))


def _layer(shape: tuple[int, ...], inner: int, cols: int, gelu: bool):
    """x @ w + b (w, b constant), then GELU (erf form) or nothing."""
    x = og.parameter(og.f32, (*shape, inner), name="x")
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    b = RNG.standard_normal(cols).astype(np.float32)
    y = ops.matmul(x, og.constant(w))
    y = ops.add(y, ops.broadcast(og.constant(b), y.shape, tuple(range(len(shape)))))
    if gelu:
        half = ops.multiply(y, og.constant(np.full(y.shape, 0.5, np.float32)))
        erf = ops.erf(ops.divide(y, og.constant(np.full(y.shape, 2**0.5, np.float32))))
        y = ops.multiply(half, ops.add(erf, og.constant(np.ones(y.shape, np.float32))))
    data = RNG.standard_normal((*shape, inner)).astype(np.float32)
    return og.Function([y], [x]), data


CASES = {  # name: (leading shape, inner, cols, gelu)
    "Whisper's 1500 x 384 -> 1536 with GELU": ((1, 1500), 384, 1536, True),
    "Whisper's 1500 x 384 -> 384": ((1, 1500), 384, 384, False),
    "rows not a multiple of the tile, columns not of the panel": ((1031,), 70, 45, False),
    "the smallest split product": ((blas.ROW_SPLIT,), 16, 40, True),
}
#: (name, threads): blocks where not four a thread. Whisper's FFN product, 885 M
#: multiply-adds: 28 blocks of at most ``ROW_UNIT_MACS`` (a whole number a thread) on two
#: threads, 27 on three; its 384-column products (221 M) keep four a thread.
BLOCKS = {
    ("Whisper's 1500 x 384 -> 1536 with GELU", 2): 28,
    ("Whisper's 1500 x 384 -> 1536 with GELU", 3): 27,
}


def _gemm(exe) -> GemmStep:
    (step,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
    return step


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [2, 3])
def test_row_blocks_match_the_interpreter(name, threads):
    shape, inner, cols, gelu = CASES[name]
    fn, data = _layer(shape, inner, cols, gelu)
    exe = _backend(threads).compile(fn)
    step = _gemm(exe)
    assert step.panel == 32 and step.epilogue is not None  # the bias, and GELU's
    name_ = f"g{exe.program.steps.index(step)}"
    blocks = BLOCKS.get((name, threads), 4 * threads)
    assert f"og_parallel({name_}, T, A, {blocks}L" in exe.source()  # row blocks
    assert f"first = first / {blas.ROW_TILE} * {blas.ROW_TILE};" in exe.source()
    want = og.backend("INTERPRETER").compile(fn)(data)[0].astype(np.float64)
    got = exe(data)[0].astype(np.float64)
    np.testing.assert_allclose(got, want, atol=2e-5 * (np.max(np.abs(want)) + 1), rtol=1e-5)
    np.testing.assert_array_equal(got, _backend(1).compile(fn)(data)[0])


def test_many_blocks_keep_four_row_tiles_each():
    """A product of far more than ``ROW_UNIT_MACS`` a block over few rows is cut into blocks
    of at least ``ROW_UNIT_TILES`` row tiles: 1200 rows (100 tiles) x 1536 x 1536 on two
    threads, 3.6 G multiply-adds, is 25 blocks (not 86), bitwise the one-thread product."""
    fn, data = _layer((1200,), 1536, 1536, False)
    exe = _backend(2).compile(fn)
    step = _gemm(exe)
    assert f"og_parallel(g{exe.program.steps.index(step)}, T, A, 25L" in exe.source()
    np.testing.assert_array_equal(exe(data)[0], _backend(1).compile(fn)(data)[0])


def test_shorter_products_keep_column_blocks():
    """One row fewer than ``ROW_SPLIT``: no blocks of whole row tiles (column blocks, in
    bands of rows here: ``test_cpu_gemm_bands.py``)."""
    fn, data = _layer((blas.ROW_SPLIT - 1,), 16, 64, False)
    exe = _backend(2).compile(fn)
    step = _gemm(exe)
    assert step.panel == 32
    assert f"first = first / {blas.ROW_TILE} * {blas.ROW_TILE};" not in exe.source()
    want = og.backend("INTERPRETER").compile(fn)(data)[0]
    np.testing.assert_allclose(exe(data)[0], want, atol=2e-5 * (np.max(np.abs(want)) + 1))
