"""The panel GEMM (products by constant matrices) cuts the inner dimension into equal blocks
of at most ``GEMM_BLOCKING``'s depth: every inner size around and across the block
boundaries gives INTERPRETER's values, on one thread and split between threads."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.config import supports_isa
from opgraph.backends.fused.program import GemmStep

RNG = np.random.default_rng(23)


@pytest.fixture(scope="module")
def avx2_cpu() -> CpuBackend | None:
    """AVX2 code generation (its own tile and blocking), where this CPU runs it."""
    if not supports_isa("avx2"):
        return None
    return CpuBackend(dataclasses.replace(default_config(), isa="avx2", num_threads=2))


@pytest.mark.parametrize("inner", [1, 383, 1023, 1024, 1025, 2049, 3072])
@pytest.mark.parametrize(("rows", "cols"), [(13, 45), (128, 96)])
def test_inner_blocks(cpu, parallel_cpu, avx2_cpu, inner, rows, cols):
    x = og.parameter(og.f32, (rows, inner))
    w = (RNG.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    fn = og.Function([ops.matmul(x, og.constant(w))], [x])
    data = RNG.standard_normal((rows, inner)).astype(np.float32)
    want = data.astype(np.float64) @ w.astype(np.float64)
    for backend in (b for b in (cpu, parallel_cpu, avx2_cpu) if b is not None):
        exe = backend.compile(fn)
        assert [s.panel for s in exe.program.steps if isinstance(s, GemmStep)] == [32]
        (got,) = exe(data)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
