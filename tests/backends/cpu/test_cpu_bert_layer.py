"""The BERT layer's CPU paths (issue 17, items 3 and 5): a panel GEMM whose rows of ``a``
are a multiple of 4 KiB apart reads them from a padded copy (``row_padding.py``), and every
such product gives INTERPRETER's values."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.row_padding import ALIASING, PAD
from opgraph.backends.fused.program import GemmStep, LoopStep

RNG = np.random.default_rng(53)


def _product(rows: int, inner: int, cols: int) -> tuple[og.Function, np.ndarray, np.ndarray]:
    x = og.parameter(og.f32, (1, rows, inner))
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    fn = og.Function([ops.matmul(ops.relu(x), og.constant(w))], [x])
    data = RNG.standard_normal((1, rows, inner)).astype(np.float32)
    return fn, data, np.maximum(data, 0).astype(np.float64) @ w.astype(np.float64)


@pytest.mark.parametrize(
    ("rows", "inner", "padded"),
    [(128, 3072, True), (37, 1024, True), (128, 2048, True), (12, 3072, False),
     (128, 768, False), (64, 1536, False)],
)  # fmt: skip
def test_aliased_rows_are_padded(cpu, parallel_cpu, rows, inner, padded):
    fn, data, want = _product(rows, inner, 96)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        (gemm,) = [s for s in exe.program.steps if isinstance(s, GemmStep)]
        assert gemm.panel == 32
        assert gemm.a is not None
        stride = gemm.a.strides[0]
        assert (stride == inner + PAD) is padded
        assert stride % ALIASING != 0 or not padded
        (got,) = exe(data)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        reference = og.backend("INTERPRETER").compile(fn)(data)[0]
        np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)


def test_padding_copy_is_one_loop_step(cpu):
    fn, data, want = _product(128, 3072, 64)
    exe = cpu.compile(fn)
    steps = exe.program.steps
    index = next(i for i, s in enumerate(steps) if isinstance(s, GemmStep))
    assert any(isinstance(s, LoopStep) for s in steps[:index])
    np.testing.assert_allclose(exe(data)[0], want, rtol=1e-4, atol=1e-4)
