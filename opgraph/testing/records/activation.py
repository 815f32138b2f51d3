"""Records for the activation ops, special values included."""

from __future__ import annotations

from opgraph import ops
from opgraph.testing.records.base import FLOATS, NUMERIC, SIGNED, In, OpRecord

S = (3, 4)
INF = float("inf")
NAN = float("nan")

RECORDS: list[OpRecord] = [
    OpRecord("gelu", ops.gelu, (In(S),), FLOATS),
    OpRecord("gelu_tanh", lambda x: ops.gelu(x, "tanh"), (In(S),), FLOATS),
    OpRecord(
        "gelu_extremes",
        ops.gelu,
        (In((5,), values=[-INF, -30.0, 0.0, 30.0, INF]),),
        FLOATS,
        differentiable=False,
    ),
    OpRecord("elu", lambda x: ops.elu(x, 0.5), (In(S),), FLOATS),
    OpRecord(
        "elu_extremes",
        ops.elu,
        (In((5,), values=[-60.0, -1.0, 0.0, 1.0, 60000.0]),),
        FLOATS,
        differentiable=False,
    ),
    OpRecord("selu", ops.selu, (In(S),), FLOATS),
    OpRecord("leaky_relu", lambda x: ops.leaky_relu(x, 0.1), (In(S),), FLOATS),
    OpRecord("prelu_broadcast", ops.prelu, (In((2, 3, 4)), In((4,))), SIGNED),
    OpRecord(
        "prelu_channel",
        lambda x, s: ops.prelu(x, s, axis=1),
        (In((2, 3, 2)), In((3,))),
        SIGNED,
    ),
    OpRecord("prelu_one_slope", ops.prelu, (In(S), In((1, 1))), SIGNED),
    OpRecord(
        "hard_sigmoid",
        lambda x: ops.hard_sigmoid(x, 0.3, 0.4),
        (In(S, low=-5, high=5),),
        FLOATS,
    ),
    OpRecord("hard_swish", ops.hard_swish, (In(S, low=-5, high=5),), FLOATS),
    OpRecord("softplus", ops.softplus, (In(S, low=-5, high=5),), FLOATS),
    OpRecord(
        "softplus_extremes",
        ops.softplus,
        (In((7,), values=[-100.0, -30.0, -1e-3, 0.0, 1e-3, 30.0, 100.0]),),
        FLOATS,
    ),
    OpRecord("softsign", ops.softsign, (In(S),), FLOATS),
    OpRecord("mish", ops.mish, (In(S, low=-5, high=5),), FLOATS),
    OpRecord("clamp", lambda x: ops.clamp(x, -1.0, 1.5), (In(S),), FLOATS),
    OpRecord("clamp_rounded_bounds", lambda x: ops.clamp(x, -1.5, 2.5), (In(S),), NUMERIC),
    OpRecord("clamp_min_only", lambda x: ops.clamp(x, min=0), (In(S),), NUMERIC),
    OpRecord("clamp_max_only", lambda x: ops.clamp(x, max=1), (In(S),), NUMERIC),
    OpRecord(
        "clamp_beyond_range",
        lambda x: ops.clamp(x, -1e6, 1e6),
        (In(S, low=0, high=3),),
        NUMERIC,
    ),
    # Infinite and out-of-range bounds saturate to the type (nGraph clamp_{int8..uint64}_static).
    OpRecord("clamp_infinite_max", lambda x: ops.clamp(x, 1.0, INF), (In(S),), NUMERIC),
    OpRecord("clamp_infinite_min", lambda x: ops.clamp(x, -INF, 1.0), (In(S),), NUMERIC),
    OpRecord("clamp_infinite_both", lambda x: ops.clamp(x, -INF, INF), (In(S),), NUMERIC),
    OpRecord(
        "clamp_huge_int_bounds",
        lambda x: ops.clamp(x, -(10**400), 10**400),
        (In(S),),
        NUMERIC,
    ),
    OpRecord(
        "clamp_min_above_range",
        lambda x: ops.clamp(x, 1e30, INF),
        (In(S, low=0, high=3),),
        NUMERIC,
        differentiable=False,
    ),
    OpRecord(
        "clamp_max_below_range",
        lambda x: ops.clamp(x, -INF, -1e30),
        (In(S, low=0, high=3),),
        NUMERIC,
        differentiable=False,
    ),
    OpRecord(
        "clamp_special",
        lambda x: ops.clamp(x, -1.0, 1.0),
        (In((4,), values=[NAN, -INF, INF, 0.5]),),
        FLOATS,
        differentiable=False,
    ),
    OpRecord("squared_difference", ops.squared_difference, (In(S), In(S)), NUMERIC),
    OpRecord(
        "squared_difference_broadcast",
        ops.squared_difference,
        (In((2, 1)), In((1, 3))),
        NUMERIC,
    ),
]
