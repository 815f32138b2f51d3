"""Records for the indexing ops: negative and duplicate indices, batch dimensions, every scatter
reduction, and one_hot's out-of-range rows (nGraph ``one_hot_scalar_oob_in_3``)."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.testing.records.base import ALL, FLOATS, NUMERIC, In, OpRecord

REDUCTIONS = ("none", "add", "mul", "max", "min")

GATHER = [
    OpRecord(
        "gather_negative_indices",
        lambda x, i: ops.gather(x, i, axis=1),
        (In((3, 4)), In((2, 3), et.i64, values=[[0, -1, 2], [3, -4, 0]])),
        ALL,
    ),
    OpRecord(
        "gather_scalar_index_i32",
        ops.gather,
        (In((3, 4)), In((), et.i32, values=-1)),
        ALL,
    ),
    OpRecord(
        "gather_batch_dims",
        lambda x, i: ops.gather(x, i, axis=-1, batch_dims=1),
        (In((2, 3, 4)), In((2, 5), et.i32, values=[[0, 3, 3, -1, 1], [2, 2, 0, -4, 1]])),
        NUMERIC,
    ),
    OpRecord(
        "gather_batch_dims_at_axis",
        lambda x, i: ops.gather(x, i, axis=1, batch_dims=-1),
        (In((2, 3, 4)), In((2, 2), et.i64, values=[[2, 0], [1, 1]])),
        NUMERIC,
    ),
    OpRecord("gather_empty_indices", ops.gather, (In((3, 2)), In((0,), et.i64)), NUMERIC),
    OpRecord(
        "gather_nd",
        ops.gather_nd,
        (In((3, 4, 2)), In((3, 2), et.i64, values=[[0, 1], [-1, 3], [0, 1]])),
        ALL,
    ),
    OpRecord(
        "gather_nd_elements_i32",
        ops.gather_nd,
        (In((3, 4)), In((2, 2, 2), et.i32, values=[[[0, 0], [2, -1]], [[1, 2], [0, 0]]])),
        NUMERIC,
    ),
    OpRecord(
        "gather_nd_batch_dims",
        lambda x, i: ops.gather_nd(x, i, batch_dims=1),
        (In((2, 3, 4)), In((2, 2, 1), et.i64, values=[[[2], [-3]], [[1], [1]]])),
        NUMERIC,
    ),
    OpRecord(
        "gather_elements",
        lambda x, i: ops.gather_elements(x, i, axis=1),
        (In((3, 4)), In((3, 2), et.i64, values=[[0, 3], [-1, 1], [2, 2]])),
        ALL,
    ),
    OpRecord(
        "gather_elements_smaller_i32",
        lambda x, i: ops.gather_elements(x, i, axis=0),
        (In((3, 4)), In((2, 3), et.i32, values=[[2, 0, -3], [1, 1, 0]])),
        NUMERIC,
    ),
]

# Duplicates: column 0 writes row 1 twice, column 2 writes row 2 twice (once as -1).
_ELEMENT_INDICES = In((2, 4), et.i64, values=[[1, 0, 2, 2], [1, 2, -1, 0]])
# Tuples 0 and 2 name the same row (once as -3).
_ND_INDICES = In((3, 1), et.i32, values=[[1], [2], [-3]])

SCATTER = [
    *(
        OpRecord(
            f"scatter_elements_{reduction}",
            lambda x, i, u, r=reduction: ops.scatter_elements(x, i, u, 0, r),
            (In((3, 4)), _ELEMENT_INDICES, In((2, 4))),
            ALL if reduction == "none" else NUMERIC,
        )
        for reduction in REDUCTIONS
    ),
    *(
        OpRecord(
            f"scatter_nd_{reduction}",
            lambda x, i, u, r=reduction: ops.scatter_nd(x, i, u, r),
            (In((4, 3)), _ND_INDICES, In((3, 3))),
            ALL if reduction == "none" else NUMERIC,
        )
        for reduction in REDUCTIONS
    ),
    OpRecord(
        "scatter_elements_axis1_smaller",
        lambda x, i, u: ops.scatter_elements(x, i, u, axis=-1, reduction="add"),
        (In((3, 4)), In((2, 3), et.i32, values=[[3, 3, 0], [-1, 1, 1]]), In((2, 3))),
        NUMERIC,
    ),
    OpRecord(
        "scatter_nd_elements",
        lambda x, i, u: ops.scatter_nd(x, i, u, "max"),
        (In((3, 4)), In((4, 2), et.i64, values=[[0, 1], [2, 3], [0, 1], [-1, 0]]), In((4,))),
        NUMERIC,
    ),
    # Zeros among the factors exercise the product adjoint without a division by zero.
    OpRecord(
        "scatter_elements_mul_zeros",
        lambda x, i, u: ops.scatter_elements(x, i, u, 0, "mul"),
        (
            In((3, 4), values=[[1, 0, 2, 3]] * 3),
            _ELEMENT_INDICES,
            In((2, 4), values=[[0, 2, 0, 1], [3, 0, 2, 0]]),
        ),
        FLOATS,
    ),
]

ONE_HOT = [
    *(
        OpRecord(
            f"one_hot_to_{t.name}",
            lambda i, t=t: ops.one_hot(i, 3, element_type=t),
            (In((2, 3), et.i64, values=[[0, 2, 3], [-1, -3, -4]]),),
            (et.i64,),
        )
        for t in ALL
    ),
    OpRecord(
        "one_hot_axis0_indices_types",
        lambda i: ops.one_hot(i, 4, axis=0, on_value=5, off_value=2, element_type=et.i32),
        (In((2, 3), values=[[0, 3, 4], [1, 9, 2]]),),
        et.INTS,
    ),
    # nGraph one_hot_scalar_oob_in_3: the out-of-range position gets only off values.
    OpRecord(
        "one_hot_scalar_oob_in_3",
        lambda i: ops.one_hot(i, 3, element_type=et.i32),
        (In((), et.i32, values=3000000),),
        (et.i32,),
    ),
    OpRecord(
        "one_hot_float_values",
        lambda i: ops.one_hot(i, 5, axis=1, on_value=0.75, off_value=-2.5, element_type=et.f16),
        (In((3, 2), et.i32, values=[[4, -5], [-6, 5], [0, 1]]),),
        (et.i32,),
    ),
]

RECORDS: list[OpRecord] = [*GATHER, *SCATTER, *ONE_HOT]
