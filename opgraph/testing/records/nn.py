"""Records for nn ops: softmax on large values (stability), batch norm in both modes (training
returns all three outputs, gradient-checked through each), LRN with odd and even windows."""

from __future__ import annotations

from opgraph import ops
from opgraph.testing.records.base import FLOATS, In, OpRecord

# Naive exp() overflows on these in every float type; the stable form must not.
LARGE = [[1000.0, 1001.0, 1002.0, 998.0], [-1000.0, -1002.0, -1001.0, -999.0]]
C = 3

RECORDS: list[OpRecord] = [
    OpRecord("softmax_last_axis", ops.softmax, (In((2, 5)),), FLOATS),
    OpRecord("softmax_axis_0", lambda x: ops.softmax(x, 0), (In((3, 2, 2)),), FLOATS),
    OpRecord("softmax_large_values", ops.softmax, (In((2, 4), values=LARGE),), FLOATS),
    OpRecord("log_softmax_last_axis", ops.log_softmax, (In((2, 5)),), FLOATS),
    OpRecord("log_softmax_axis_1", lambda x: ops.log_softmax(x, -2), (In((2, 3, 2)),), FLOATS),
    OpRecord("log_softmax_large_values", ops.log_softmax, (In((2, 4), values=LARGE),), FLOATS),
    OpRecord(
        "batch_norm_inference",
        lambda x, s, b, m, v: ops.batch_norm_inference(x, s, b, m, v, epsilon=1e-3),
        (In((2, C, 2, 2)), In((C,)), In((C,)), In((C,)), In((C,), low=0.5, high=2.0)),
        FLOATS,
    ),
    OpRecord(
        "batch_norm_inference_rank_2",
        ops.batch_norm_inference,
        (In((4, C)), In((C,)), In((C,)), In((C,)), In((C,), low=0.5, high=2.0)),
        FLOATS,
    ),
    OpRecord(
        "batch_norm_training",
        lambda x, s, b: list(ops.batch_norm_training(x, s, b, epsilon=1e-3)),
        (In((3, C, 2, 2)), In((C,)), In((C,))),
        FLOATS,
    ),
    OpRecord(
        "batch_norm_training_rank_3",
        lambda x, s, b: list(ops.batch_norm_training(x, s, b)),
        (In((4, C, 3)), In((C,)), In((C,))),
        FLOATS,
    ),
    OpRecord(
        "lrn_size_3",
        lambda x: ops.lrn(x, alpha=0.5, beta=0.75, bias=2.0, size=3),
        (In((2, 5, 2, 2)),),
        FLOATS,
    ),
    OpRecord(
        "lrn_even_size_wider_than_channels",
        lambda x: ops.lrn(x, alpha=0.3, beta=0.6, bias=1.0, size=6),
        (In((1, 4, 3)),),
        FLOATS,
    ),
]
