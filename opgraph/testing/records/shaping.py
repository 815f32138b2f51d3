"""Records for squeeze, unsqueeze, flatten, stack and expand (every element type)."""

from __future__ import annotations

from opgraph import ops
from opgraph.testing.records.base import ALL, In, OpRecord

RECORDS: list[OpRecord] = [
    OpRecord("squeeze_all", ops.squeeze, (In((1, 3, 1, 2)),), ALL),
    OpRecord("squeeze_axes", lambda x: ops.squeeze(x, (-1, 0)), (In((1, 3, 1)),), ALL),
    OpRecord("squeeze_nothing", ops.squeeze, (In((2, 3)),), ALL),
    OpRecord("unsqueeze", lambda x: ops.unsqueeze(x, (0, -1)), (In((2, 3)),), ALL),
    OpRecord("unsqueeze_scalar", lambda x: ops.unsqueeze(x, 0), (In(()),), ALL),
    OpRecord("flatten", ops.flatten, (In((2, 3, 4)),), ALL),
    OpRecord("flatten_axis_0", lambda x: ops.flatten(x, 0), (In((2, 3)),), ALL),
    OpRecord("flatten_negative_axis", lambda x: ops.flatten(x, -1), (In((2, 3, 4)),), ALL),
    OpRecord("flatten_empty", lambda x: ops.flatten(x, 2), (In((2, 0, 3)),), ALL),
    OpRecord(
        "stack",
        lambda a, b, c: ops.stack([a, b, c], 1),
        (In((2, 4)), In((2, 4)), In((2, 4))),
        ALL,
    ),
    OpRecord("stack_last_axis", lambda a, b: ops.stack([a, b], -1), (In((3,)), In((3,))), ALL),
    OpRecord("stack_scalars", lambda a, b: ops.stack([a, b]), (In(()), In(())), ALL),
    OpRecord("expand", lambda x: ops.expand(x, (2, 1, 6)), (In((3, 1)),), ALL),
    OpRecord("expand_scalar", lambda x: ops.expand(x, (2, 3)), (In(()),), ALL),
    OpRecord("expand_same_shape", lambda x: ops.expand(x, (1, 3)), (In((2, 3)),), ALL),
]
