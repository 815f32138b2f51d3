"""Records for ordering ops: arg_max/arg_min (ties first and last, NaN), top_k (ties, k equal
to the axis size, k = 0, unsorted, smallest) and cumsum (exclusive, reverse, both, empty)."""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.testing.records.base import FLOATS, NUMERIC, In, OpRecord

NAN = float("nan")
INF = float("inf")

_M = (3, 5)
_TIES = [[1, 3, 3, 2, 0], [5, 5, 5, 5, 5], [0, 1, 7, 7, 2]]
_NANS = [[1.0, NAN, 3.0, NAN, 0.0], [INF, 2.0, -INF, 1.0, INF], [-INF, 1.0, -INF, 0.5, 1.0]]


def _search_records(name: str, build: Callable[..., Output]) -> list[OpRecord]:
    """Records for ``ops.arg_max`` or ``ops.arg_min``."""
    return [
        OpRecord(f"{name}_axis1", lambda x: build(x, 1), (In(_M),), NUMERIC),
        OpRecord(
            f"{name}_axis0_keep_dims", lambda x: build(x, 0, keep_dims=True), (In(_M),), NUMERIC
        ),
        OpRecord(
            f"{name}_negative_axis_i32",
            lambda x: build(x, -1, index_element_type=et.i32),
            (In((2, 3, 4)),),
            NUMERIC,
        ),
        OpRecord(f"{name}_ties_first", lambda x: build(x, 1), (In(_M, values=_TIES),), NUMERIC),
        OpRecord(
            f"{name}_ties_last",
            lambda x: build(x, 1, select_last_index=True),
            (In(_M, values=_TIES),),
            NUMERIC,
        ),
        OpRecord(f"{name}_nan", lambda x: build(x, 1), (In(_M, values=_NANS),), FLOATS),
        OpRecord(
            f"{name}_nan_last",
            lambda x: build(x, 1, select_last_index=True),
            (In(_M, values=_NANS),),
            FLOATS,
        ),
        OpRecord(f"{name}_scalar_lanes", lambda x: build(x, 0), (In((1, 4)),), NUMERIC),
    ]


RECORDS: list[OpRecord] = [
    *_search_records("arg_max", ops.arg_max),
    *_search_records("arg_min", ops.arg_min),
    # top_k
    OpRecord("top_k", lambda x: ops.top_k(x, 3), (In(_M, low=-9, high=9),), NUMERIC),
    OpRecord(
        "top_k_smallest_axis0",
        lambda x: ops.top_k(x, 2, axis=0, largest=False),
        (In((3, 4), low=-9, high=9),),
        NUMERIC,
    ),
    OpRecord(
        "top_k_unsorted",
        lambda x: ops.top_k(x, 3, sorted=False),
        (In(_M, low=-9, high=9),),
        NUMERIC,
    ),
    OpRecord(
        "top_k_k_equals_dim_i32",
        lambda x: ops.top_k(x, 5, index_element_type="i32"),
        (In(_M, low=-9, high=9),),
        NUMERIC,
    ),
    OpRecord("top_k_zero", lambda x: ops.top_k(x, 0, axis=1), (In((2, 3, 4)),), NUMERIC),
    OpRecord("top_k_middle_axis", lambda x: ops.top_k(x, 2, axis=1), (In((2, 4, 3)),), NUMERIC),
    # ties: lower index first, largest and smallest (not differentiable at ties)
    *(
        OpRecord(name, build, (In(_M, values=_TIES),), NUMERIC, differentiable=False)
        for name, build in (
            ("top_k_ties", lambda x: ops.top_k(x, 3)),
            ("top_k_ties_smallest", lambda x: ops.top_k(x, 3, largest=False)),
            ("top_k_ties_k_equals_dim", lambda x: ops.top_k(x, 5)),
        )
    ),
    # NaN ranks above every number
    OpRecord(
        "top_k_nan",
        lambda x: ops.top_k(x, 3),
        (In(_M, values=_NANS),),
        FLOATS,
        differentiable=False,
    ),
    OpRecord(
        "top_k_nan_smallest",
        lambda x: ops.top_k(x, 3, largest=False),
        (In(_M, values=_NANS),),
        FLOATS,
        differentiable=False,
    ),
    # cumsum
    *(
        OpRecord(
            f"cumsum{suffix}",
            lambda x, a=axis, e=exclusive, r=reverse: ops.cumsum(x, a, e, r),
            (In((3, 4)),),
            NUMERIC,
        )
        for suffix, axis, exclusive, reverse in (
            ("", 1, False, False),
            ("_axis0", 0, False, False),
            ("_exclusive", -1, True, False),
            ("_reverse", 1, False, True),
            ("_exclusive_reverse", 1, True, True),
        )
    ),
    OpRecord(
        "cumsum_empty_axis", lambda x: ops.cumsum(x, 1, exclusive=True), (In((3, 0)),), NUMERIC
    ),
    OpRecord("cumsum_vector", lambda x: ops.cumsum(x, 0), (In((7,)),), NUMERIC),
    OpRecord(
        "cumsum_infinities_exclusive",
        lambda x: ops.cumsum(x, 0, exclusive=True),
        (In((4,), values=[1.0, INF, 2.0, -INF]),),
        FLOATS,
        differentiable=False,
    ),
]
