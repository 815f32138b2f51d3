"""Records for reductions: boolean all/any and the reductions defined by decomposition (mean,
L1, L2, log-sum, log-sum-exp, sum of squares), over several axis sets, empty axes (identities,
NaN for the mean) and with ``keep_dims``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph import ops
from opgraph.core.element_type import ElementType
from opgraph.core.node import Output
from opgraph.testing.records.base import BOOL, FLOATS, NUMERIC, In, OpRecord

NAN = float("nan")
INF = float("inf")

Builder = Callable[..., Output]

_AXES: tuple[tuple[str, Any], ...] = (
    ("axis1", (1,)),
    ("all", (0, 1, 2)),
    ("negative", (-1, 0)),
    ("none", ()),
)

# name, builder, element types, (low, high) of the random inputs
_REDUCTIONS: tuple[tuple[str, Builder, tuple[ElementType, ...], tuple[float, float]], ...] = (
    ("reduce_all", ops.reduce_all, BOOL, (0, 1)),
    ("reduce_any", ops.reduce_any, BOOL, (0, 1)),
    ("reduce_mean", ops.reduce_mean, FLOATS, (-2, 2)),
    ("reduce_l1", ops.reduce_l1, NUMERIC, (-2, 2)),
    ("reduce_l2", ops.reduce_l2, FLOATS, (-2, 2)),
    ("reduce_log_sum", ops.reduce_log_sum, FLOATS, (0.1, 2)),
    ("reduce_log_sum_exp", ops.reduce_log_sum_exp, FLOATS, (-2, 2)),
    ("reduce_sum_square", ops.reduce_sum_square, NUMERIC, (-2, 2)),
)


def _records(
    name: str, builder: Builder, types: tuple[ElementType, ...], low: float, high: float
) -> list[OpRecord]:
    shape = (2, 3, 4)
    return [
        *(
            OpRecord(
                f"{name}_{suffix}",
                lambda x, a=axes: builder(x, a),
                (In(shape, low=low, high=high),),
                types,
            )
            for suffix, axes in _AXES
        ),
        OpRecord(
            f"{name}_keep_dims",
            lambda x: builder(x, (0, 2), keep_dims=True),
            (In(shape, low=low, high=high),),
            types,
        ),
        # an empty reduced axis: the identity (NaN for the mean), the input is never read
        OpRecord(f"{name}_rows_zero", lambda x: builder(x, (1,)), (In((3, 0)),), types),
        OpRecord(
            f"{name}_rows_zero_keep_dims",
            lambda x: builder(x, (1,), keep_dims=True),
            (In((3, 0)),),
            types,
        ),
    ]


def _fixed(name: str, builder: Builder, rows: list[list[float]]) -> OpRecord:
    shape = (len(rows), len(rows[0]))
    return OpRecord(name, builder, (In(shape, values=rows),), FLOATS, differentiable=False)


RECORDS: list[OpRecord] = [
    *(r for name, b, types, (lo, hi) in _REDUCTIONS for r in _records(name, b, types, lo, hi)),
    # no overflow for large values; groups of -inf give -inf, a +inf gives +inf, NaN propagates
    _fixed(
        "reduce_log_sum_exp_extremes",
        lambda x: ops.reduce_log_sum_exp(x, (1,)),
        [[1000.0, 1000.0, 999.0], [-INF, -INF, -INF], [1.0, INF, 2.0], [NAN, 1.0, 2.0]],
    ),
    _fixed(
        "reduce_log_sum_exp_large_negative",
        lambda x: ops.reduce_log_sum_exp(x, (0, 1)),
        [[-1000.0, -1001.0], [-1002.0, -1000.5]],
    ),
    _fixed("reduce_log_sum_zero", lambda x: ops.reduce_log_sum(x, (1,)), [[0.0, 0.0], [1.0, -1.0]]),
    OpRecord(
        "reduce_all_any_mixed",
        lambda x: [ops.reduce_all(x, (1,)), ops.reduce_any(x, (1,))],
        (In((4, 2), values=[[True, True], [True, False], [False, True], [False, False]]),),
        BOOL,
    ),
]
