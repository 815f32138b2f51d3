"""Products of two run-time matrices: OpenBLAS calls shared between threads as blocks of the
larger side (``blas.split_by_columns``: a training step's ``x @ w.T`` with more rows than
columns, its ``dy.T @ x`` weight gradient, a tall im2col product), and products with many
rows whose run-time matrix is repacked as panels each call for the panel GEMM
(``linalg.RUNTIME_PANEL_ROWS``). Each layout, thread count and split matches a float64 numpy
product, on static and symbolic sizes (no timing)."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import blas
from opgraph.backends.fused.lowering import linalg
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(91)


def _backend(threads: int, isa: str = "native") -> CpuBackend:
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    return CpuBackend(dataclasses.replace(default_config(), num_threads=threads, isa=isa))


@pytest.mark.parametrize(
    ("rows", "cols", "threads", "columns"),
    [
        (1024, 768, 2, False),  # BERT's x @ w.T: more rows than columns
        (768, 3072, 2, True),  # FFN 2's weight gradient: more columns
        (768, 768, 2, True),  # square: columns, as before
        (32768, 64, 2, False),  # ResNet-18's im2col product
        (40, 3072, 2, True),  # too few rows for a vector per thread
        (3072, 40, 2, False),  # too few columns
        (1, 100, 2, True),  # fewer rows than threads
    ],
)
def test_the_split_packs_the_smaller_operand_again(rows, cols, threads, columns):
    assert blas.split_by_columns(rows, cols, threads) is columns


def _product(rows, inner: int, cols: int, transpose_a: bool, transpose_b: bool):
    """(a or a.T) @ (b or b.T) + bias over run-time a and b, the bias add as the epilogue."""
    a_shape = (inner, rows) if transpose_a else (rows, inner)
    b_shape = (cols, inner) if transpose_b else (inner, cols)
    a = og.parameter(og.f32, a_shape, name="a")
    b = og.parameter(og.f32, b_shape, name="b")
    bias = RNG.standard_normal(cols).astype(np.float32)
    left = ops.transpose(a, (1, 0)) if transpose_a else a
    right = ops.transpose(b, (1, 0)) if transpose_b else b
    y = ops.matmul(left, right)
    y = ops.add(y, ops.broadcast(og.constant(bias), y.shape, (0,)))
    return og.Function([y], [a, b]), bias


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(False, True), (True, False)])
@pytest.mark.parametrize(("rows", "inner", "cols"), [(384, 96, 160), (160, 96, 384)])
def test_row_and_column_blocks_match_numpy(threads, transpose_a, transpose_b, rows, inner, cols):
    fn, bias = _product(rows, inner, cols, transpose_a, transpose_b)
    exe = _backend(threads).compile(fn)
    by_rows = not blas.split_by_columns(rows, cols, threads)
    count = "(int)(last - first)"
    blocks = f", {count}, {cols}, {inner}, " if by_rows else f", {rows}, {count}, {inner}, "
    assert blocks in exe.source()
    a = RNG.standard_normal(fn.parameters[0].shape).astype(np.float32)
    b = RNG.standard_normal(fn.parameters[1].shape).astype(np.float32)
    left = a.T if transpose_a else a
    right = b.T if transpose_b else b
    want = left.astype(np.float64) @ right.astype(np.float64) + bias
    (got,) = exe(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows", [64, 300, 1000])
def test_symbolic_sizes_split_by_the_same_rule(rows):
    n = og.dim("n", max=1024)
    a = og.parameter(og.f32, (n, 80), name="a")
    b = og.parameter(og.f32, (200, 80), name="b")
    fn = og.Function([ops.matmul(a, ops.transpose(b, (1, 0)))], [a, b])
    exe = _backend(2).compile(fn)
    assert blas.split_by_columns_c(2) in exe.source()
    x = RNG.standard_normal((rows, 80)).astype(np.float32)
    w = RNG.standard_normal((200, 80)).astype(np.float32)
    (got,) = exe(x, w)
    np.testing.assert_allclose(
        got, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4
    )


def _dot(rows: int, inner: int, cols: int, transpose_b: bool):
    """dot(x, w.T or w) + bias over run-time x and w (a training step's forward product and
    its data gradient)."""
    x = og.parameter(og.f32, (rows, inner), name="x")
    w = og.parameter(og.f32, (cols, inner) if transpose_b else (inner, cols), name="w")
    bias = RNG.standard_normal(cols).astype(np.float32)
    y = ops.dot(x, ops.transpose(w, (1, 0)) if transpose_b else w)
    y = ops.add(y, ops.broadcast(og.constant(bias), y.shape, (0,)))
    return og.Function([y], [x, w]), bias


@pytest.mark.parametrize("isa", ["native", "avx2"])  # AVX2 reads the panels as halves
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("transpose_b", [True, False])
@pytest.mark.parametrize(
    ("rows", "inner", "cols", "panels"),
    [
        (linalg.RUNTIME_PANEL_ROWS, 80, 96, True),  # the fewest rows that repack
        (600, 1024, 64, True),  # rows of x 4 KiB apart: also copied with padded rows
        (linalg.RUNTIME_PANEL_ROWS - 1, 80, 96, False),  # too few rows: OpenBLAS
        (600, 80, 100, False),  # columns not a whole number of panels: OpenBLAS
    ],
)
def test_products_by_run_time_matrices_repack_as_panels(
    isa, threads, transpose_b, rows, inner, cols, panels
):
    fn, bias = _dot(rows, inner, cols, transpose_b)
    exe = _backend(threads, isa).compile(fn)
    (step,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
    assert step.panel == (linalg.GEMM_PANEL if panels else 0)
    assert ("og_gemm_panels" in exe.source()) is panels
    x = RNG.standard_normal((rows, inner)).astype(np.float32)
    w = RNG.standard_normal(fn.parameters[1].shape).astype(np.float32)
    want = x.astype(np.float64) @ (w.T if transpose_b else w).astype(np.float64) + bias
    for _ in range(2):  # the panels are repacked from each call's w
        (got,) = exe(x, w)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        w = -w
        want = -(want - bias) + bias
