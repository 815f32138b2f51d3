"""Golden tests of the generated CUDA: each case's module must match ``golden/<case>.cu``
exactly (regenerate with ``python tests/backends/gpu/regen_golden.py --write`` after an
intended change, and review the diff). Runs anywhere: no GPU, no CUDA compiler."""

import difflib

import pytest
from gpu_cases import CASES, GOLDEN, generated_source


@pytest.mark.parametrize("name", list(CASES))
def test_generated_cuda_matches_golden(name):
    path = GOLDEN / f"{name}.cu"
    assert path.exists(), f"missing {path}; run python tests/backends/gpu/regen_golden.py --write"
    want = path.read_text()
    got = generated_source(CASES[name])
    if got != want:
        diff = "".join(
            difflib.unified_diff(
                want.splitlines(True), got.splitlines(True), str(path), "generated", n=2
            )
        )
        pytest.fail(
            f"generated CUDA for {name} differs from {path.name} (if intended, run "
            f"python tests/backends/gpu/regen_golden.py --write):\n{diff[:6000]}"
        )


def test_w2_is_one_vectorized_kernel():
    source = (GOLDEN / "w2.cu").read_text()
    assert source.count('extern "C" __global__') == 1
    assert "og_v4<float>" in source and "og_aligned4(p0) && og_aligned4(q0)" in source
    assert "tanhf(" in source and "expf(" in source and "__restrict__" in source


def test_broadcast_operand_is_read_per_row():
    source = (GOLDEN / "broadcast_add.cu").read_text()
    assert "const int o_p1 = 0;" in source  # the row vector does not move with the rows
    assert "og_v4<float>" in source


def test_f16_is_computed_in_f32_and_rounded_back():
    source = (GOLDEN / "convert_f16.cu").read_text()
    assert "__half2float(" in source and "__float2half_rn(" in source
    assert "og_f2i_i32(" in source and "trunc(" in source  # f16 -> i32 saturates via helper
    assert "_Float16" not in source and "__builtin_" not in source.split("#else")[-1]


def test_softmax_and_layer_norm_are_block_row_kernels():
    for name in ("softmax_rows", "layer_norm_rows"):
        source = (GOLDEN / f"{name}.cu").read_text()
        assert source.count('extern "C" __global__') == 1, name
        assert "og_shfl_xor(" in source and "__syncthreads();" in source, name
        assert "for (int r_ = blockIdx.x;" in source, name


def test_reductions_pick_block_or_thread_per_row():
    source = (GOLDEN / "reduction.cu").read_text()
    column_sum, row_max = source.split("reduction_k1_0:")
    assert "for (int r_ = blockIdx.x;" in column_sum  # rows of 512: a block each
    assert "for (int i_ = 0; i_ < 16; ++i_)" in row_max  # rows of 16: a thread each
    assert "og_nan_f32()" in row_max  # max propagates NaN
