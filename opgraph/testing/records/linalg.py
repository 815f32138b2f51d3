"""Records for MatMul and Gemm (Dot's are in core_ops)."""

from __future__ import annotations

from opgraph import ops
from opgraph.testing.records.base import FLOATS, NUMERIC, In, OpRecord

RECORDS: list[OpRecord] = [
    OpRecord("matmul_2d", ops.matmul, (In((2, 3)), In((3, 4))), NUMERIC),
    OpRecord("matmul_1d_1d", ops.matmul, (In((4,)), In((4,))), NUMERIC),
    OpRecord("matmul_1d_nd", ops.matmul, (In((3,)), In((2, 3, 4))), NUMERIC),
    OpRecord("matmul_nd_1d", ops.matmul, (In((2, 3, 4)), In((4,))), NUMERIC),
    OpRecord("matmul_batch_broadcast", ops.matmul, (In((2, 1, 3, 4)), In((5, 4, 2))), NUMERIC),
    OpRecord("matmul_batch_left", ops.matmul, (In((2, 2, 3, 4)), In((4, 5))), NUMERIC),
    OpRecord("matmul_batch_right", ops.matmul, (In((1, 3, 4)), In((2, 4, 5))), NUMERIC),
    OpRecord("matmul_batch_both", ops.matmul, (In((3, 2, 4)), In((3, 4, 2))), NUMERIC),
    OpRecord("matmul_empty_batch", ops.matmul, (In((0, 2, 3)), In((1, 3, 2))), NUMERIC),
    OpRecord("matmul_empty_both_batched", ops.matmul, (In((0, 2, 3)), In((0, 3, 2))), NUMERIC),
    OpRecord("matmul_empty_rows", ops.matmul, (In((0, 3)), In((3, 2))), NUMERIC),
    OpRecord("matmul_k_zero", ops.matmul, (In((2, 0)), In((0, 3))), NUMERIC),
    OpRecord("gemm", ops.gemm, (In((2, 3)), In((3, 4)), In((2, 4))), NUMERIC),
    OpRecord(
        "gemm_transposed_scaled",
        lambda a, b, c: ops.gemm(a, b, c, alpha=2.0, beta=3.0, trans_a=True, trans_b=True),
        (In((3, 2)), In((4, 3)), In((4,))),
        NUMERIC,
    ),
    OpRecord(
        "gemm_c_column",
        lambda a, b, c: ops.gemm(a, b, c, trans_b=True),
        (In((2, 3)), In((4, 3)), In((2, 1))),
        NUMERIC,
    ),
    OpRecord("gemm_c_scalar", ops.gemm, (In((2, 3)), In((3, 4)), In(())), NUMERIC),
    OpRecord(
        "gemm_no_c",
        lambda a, b: ops.gemm(a, b, alpha=0.5, beta=4.0),
        (In((2, 3)), In((3, 2))),
        FLOATS,
    ),
]
