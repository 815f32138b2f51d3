"""Records for layer, group and instance normalization."""

from __future__ import annotations

from opgraph import ops
from opgraph.testing.records.base import FLOATS, In, OpRecord

RECORDS: list[OpRecord] = [
    OpRecord("layer_norm", ops.layer_norm, (In((2, 3, 4)), In((4,)), In((4,))), FLOATS),
    OpRecord(
        "layer_norm_two_axes",
        lambda x, s, b: ops.layer_norm(x, s, b, axis=1, epsilon=1e-3),
        (In((2, 3, 4)), In((3, 4)), In((3, 4))),
        FLOATS,
    ),
    OpRecord(
        "layer_norm_plain_all_axes", lambda x: ops.layer_norm(x, axis=0), (In((3, 4)),), FLOATS
    ),
    OpRecord("layer_norm_scale_only", ops.layer_norm, (In((3, 4)), In((4,))), FLOATS),
    OpRecord(
        "layer_norm_bias_only",
        lambda x, b: ops.layer_norm(x, bias=b),
        (In((3, 4)), In((4,))),
        FLOATS,
    ),
    OpRecord(
        "group_norm",
        lambda x, s, b: ops.group_norm(x, s, b, num_groups=3),
        (In((2, 6, 2, 2)), In((6,)), In((6,))),
        FLOATS,
    ),
    OpRecord(
        "group_norm_no_spatial",
        lambda x, s, b: ops.group_norm(x, s, b, 2, epsilon=1e-3),
        (In((3, 4)), In((4,)), In((4,))),
        FLOATS,
    ),
    OpRecord("instance_norm", ops.instance_norm, (In((2, 3, 5)), In((3,)), In((3,))), FLOATS),
    OpRecord(
        "instance_norm_2d",
        lambda x, s, b: ops.instance_norm(x, s, b, 1e-3),
        (In((1, 2, 2, 3)), In((2,)), In((2,))),
        FLOATS,
    ),
]
