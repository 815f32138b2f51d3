"""Records for the collective ops, run in one process: every reduction over one rank and the
broadcast from rank 0 give the input, on every element type they accept (edge values
included: integer extremes, NaN and infinities, empty and rank-0 tensors)."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.ops.collective import all_reduce, broadcast_distributed
from opgraph.testing.records.base import ALL, FLOATS, NUMERIC, In, OpRecord

SPECIAL = [0.0, -0.0, 1.5, float("nan"), float("inf"), float("-inf")]

RECORDS: list[OpRecord] = [
    *(
        OpRecord(
            f"all_reduce_{op}",
            lambda x, op=op: all_reduce(x, op),
            (In((2, 3), low=-100, high=100),),
            FLOATS if op == "mean" else NUMERIC,
            differentiable=False,  # collectives are not differentiable
        )
        for op in ("sum", "prod", "min", "max", "mean")
    ),
    OpRecord(
        "all_reduce_scalar_and_empty",
        lambda x, y: (all_reduce(x, "max"), all_reduce(y, "sum")),
        (In(()), In((0, 4))),
        NUMERIC,
        differentiable=False,
    ),
    OpRecord(
        "all_reduce_special_values",
        lambda x: (all_reduce(x, "sum"), all_reduce(x, "mean"), all_reduce(x, "min")),
        (In((6,), values=SPECIAL),),
        FLOATS,
        differentiable=False,
    ),
    OpRecord(
        "all_reduce_integer_extremes",
        lambda x: (all_reduce(x, "sum"), all_reduce(x, "prod")),
        (In((2,), values=[-(2**63), 2**63 - 1]),),
        (et.i64,),
        differentiable=False,
    ),
    OpRecord(
        "all_reduce_of_a_computed_value",
        lambda x, y: ops.multiply(all_reduce(ops.add(x, y), "mean"), x),
        (In((3, 2)), In((3, 2))),
        FLOATS,
        differentiable=False,
    ),
    OpRecord(
        "broadcast_distributed",
        lambda x: broadcast_distributed(x, 0),
        (In((2, 3), low=-100, high=100),),
        ALL,
        differentiable=False,
    ),
    OpRecord(
        "broadcast_distributed_scalar_and_empty",
        lambda x, y: (broadcast_distributed(x), broadcast_distributed(y, root=0)),
        (In(()), In((3, 0))),
        ALL,
        differentiable=False,
    ),
]
