"""Records for shape_of (ranks 0 to 3, an empty axis) and non_zero (random values, fixed
zeros, all zero, none zero, NaN). Neither is differentiable (integer results). non_zero
records are tagged ``data_dependent`` and listed apart (``DATA_DEPENDENT``): CPU and GPU
refuse data-dependent output sizes, and file format 1 stores static shapes only, so they run
on INTERPRETER only."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.testing.records.base import ALL, FLOATS, In, OpRecord

_DATA = frozenset({"data_dependent"})
_ZEROS = [[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 4, 5]]

#: Records every backend runs.
RECORDS: list[OpRecord] = [
    OpRecord("shape_of", ops.shape_of, (In((2, 3, 4)),), ALL, differentiable=False),
    OpRecord("shape_of_scalar", ops.shape_of, (In(()),), ALL, differentiable=False),
    OpRecord("shape_of_empty_axis", ops.shape_of, (In((3, 0)),), ALL, differentiable=False),
]

#: Records with a data-dependent output size (INTERPRETER only, see the module doc).
DATA_DEPENDENT: list[OpRecord] = [
    OpRecord(
        "non_zero_random",
        ops.non_zero,
        (In((3, 4), low=-1, high=2),),
        ALL,
        differentiable=False,
        tags=_DATA,
    ),
    OpRecord(
        "non_zero_fixed",
        ops.non_zero,
        (In((3, 4), values=_ZEROS),),
        ALL,
        differentiable=False,
        tags=_DATA,
    ),
    OpRecord(
        "non_zero_all_zero",
        ops.non_zero,
        (In((2, 3), values=[[0] * 3] * 2),),
        ALL,
        differentiable=False,
        tags=_DATA,
    ),
    OpRecord(
        "non_zero_1d_none_zero",
        ops.non_zero,
        (In((5,), values=[1, 2, 3, 4, 5]),),
        ALL,
        differentiable=False,
        tags=_DATA,
    ),
    OpRecord(
        "non_zero_nan",
        ops.non_zero,
        (In((4,), values=[0.0, float("nan"), 0.0, -1.5]),),
        FLOATS,
        differentiable=False,
        tags=_DATA,
    ),
    OpRecord(
        "non_zero_bool",
        ops.non_zero,
        (In((2, 2), element_type=et.boolean, values=[[True, False], [False, True]]),),
        (et.f32,),
        differentiable=False,
        tags=_DATA,
    ),
]
