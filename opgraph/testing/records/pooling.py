"""Records for pooling, with nGraph's ``pool.in.cpp`` border cases as data (padding only above,
with and without padding in the divisor), ceil mode, dilated max pooling, ties and NaN."""

from __future__ import annotations

import math
from typing import Any

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.testing.records.base import FLOATS, NUMERIC, In, OpRecord

# nGraph avg_pool_2d_2channel_2image_padded_only_above_*: two 1-channel 3x3 images.
NGRAPH_IMAGES = [[[[0, 1, 0], [0, 3, 2], [2, 0, 0]]], [[[3, 5, 2], [2, 0, 9], [3, 6, 5]]]]


def _avg(*args: Any, **attributes: Any) -> Any:
    return lambda x: ops.avg_pool(x, *args, **attributes)


def _max(*args: Any, **attributes: Any) -> Any:
    return lambda x: ops.max_pool(x, *args, **attributes)


def _with_indices(*args: Any, **attributes: Any) -> Any:
    return lambda x: list(ops.max_pool_with_indices(x, *args, **attributes))


RECORDS: list[OpRecord] = [
    OpRecord(
        "avg_pool_2d_2channel_2image_padded_only_above_include_in_computation",
        _avg((2, 2), padding_below=(0, 0), padding_above=(1, 1), include_padding=True),
        (In((2, 1, 3, 3), values=NGRAPH_IMAGES),),
        FLOATS,
    ),
    OpRecord(
        "avg_pool_2d_2channel_2image_padded_only_above_do_not_include_in_computation",
        _avg((2, 2), padding_below=(0, 0), padding_above=(1, 1), include_padding=False),
        (In((2, 1, 3, 3), values=NGRAPH_IMAGES),),
        FLOATS,
    ),
    *(
        OpRecord(
            f"avg_pool_2d_padded_strided_{'include' if include else 'exclude'}",
            _avg((3, 2), (2, 1), (1, 1), (1, 1), include_padding=include),
            (In((2, 2, 5, 4)),),
            FLOATS,
        )
        for include in (False, True)
    ),
    *(
        OpRecord(
            f"avg_pool_2d_ceil_mode_{'include' if include else 'exclude'}",
            _avg((2, 3), (2, 2), (1, 0), (0, 1), include_padding=include, ceil_mode=True),
            (In((1, 2, 4, 6)),),
            FLOATS,
        )
        for include in (False, True)
    ),
    OpRecord("avg_pool_1d", _avg((3,), (2,)), (In((2, 3, 7)),), FLOATS),
    OpRecord(
        "avg_pool_3d_same_lower",
        _avg((2, 2, 3), (1, 2, 2), auto_pad="same_lower"),
        (In((1, 1, 3, 4, 5)),),
        FLOATS,
    ),
    # max pooling
    OpRecord(
        "max_pool_2d_dilated_padded_ceil",
        _max((2, 2), (2, 1), (1, 0), (1, 1), dilations=(2, 2), ceil_mode=True),
        (In((2, 2, 6, 5)),),
        FLOATS,
    ),
    OpRecord("max_pool_1d_integer", _max((3,), (2,), (1,), (1,)), (In((2, 2, 7)),), NUMERIC),
    OpRecord(
        "max_pool_3d_strided",
        _max((2, 3, 2), (2, 1, 2), dilations=(1, 1, 2)),
        (In((1, 2, 4, 4, 5)),),
        FLOATS,
    ),
    OpRecord(
        "max_pool_2d_ties",
        _max((2, 2), (1, 1)),
        (In((1, 1, 3, 3), values=[1, 1, 1, 2, 2, 1, 2, 2, 0]),),
        NUMERIC,
        differentiable=False,  # ties: the derivative does not exist
    ),
    OpRecord(
        "max_pool_nan",
        _max((3,), (1,)),
        (In((1, 1, 5), values=[1.0, math.nan, 3.0, math.nan, 2.0]),),
        FLOATS,
        differentiable=False,
    ),
    OpRecord(
        "max_pool_with_indices_2d_ceil",
        _with_indices((3, 2), (2, 2), (1, 1), (1, 0), ceil_mode=True),
        (In((2, 2, 5, 5)),),
        FLOATS,
    ),
    OpRecord(
        "max_pool_with_indices_ties_and_lowest_values",
        _with_indices((2,), (2,), (1,), (1,)),
        (In((1, 2, 4), values=[-128, -128, 5, -128, 3, 3, 3, -128]),),
        (et.i8, et.i16, et.f32),
    ),
    OpRecord(
        "max_pool_with_indices_nan",
        _with_indices((2, 2), (1, 1)),
        (In((1, 1, 2, 3), values=[math.nan, 1.0, math.nan, 2.0, math.nan, 0.0]),),
        FLOATS,
        differentiable=False,
    ),
    OpRecord(
        "max_pool_backprop_ties_go_to_the_first",
        lambda x, ct: ops.max_pool_backprop(x, ct, (2, 2), (1, 1), (1, 0), (0, 1)),
        (In((1, 1, 3, 3), values=[1, 3, 3, 3, 3, 0, 2, 2, 2]), In((1, 1, 3, 3))),
        FLOATS,
        differentiable=False,  # MaxPoolBackprop is marked not differentiable
    ),
    OpRecord(
        "max_pool_backprop_dilated",
        lambda x, ct: ops.max_pool_backprop(x, ct, (2,), (1,), dilations=(2,)),
        (In((2, 2, 6)), In((2, 2, 4))),
        FLOATS,
        differentiable=False,
    ),
]
