"""Records for convolutions, with nGraph's convolution generator cases as data
(``test/ref_generators/generate_convolution_ref.py``: data dilation, negative padding, uneven
3-D strides/filters/dilations). Small records are gradient-checked; the nGraph-sized ones are
too big for central differences and only checked against the oracle."""

from __future__ import annotations

from typing import Any

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.testing.records.base import FLOATS, In, OpRecord

WIDE = (et.f32, et.f64)  # large sums: half-precision rounding would dominate the comparison


def _conv(**attributes: Any) -> Any:
    return lambda x, w: ops.convolution(x, w, **attributes)


def _transposed(**attributes: Any) -> Any:
    return lambda x, w: ops.convolution_backprop_data(x, w, **attributes)


def _filters(filter_shape: tuple[int, ...], **attributes: Any) -> Any:
    return lambda x, ct: ops.convolution_backprop_filters(x, ct, filter_shape, **attributes)


RECORDS: list[OpRecord] = [
    # ---------------------------------------------------------------- small, gradient-checked
    OpRecord(
        "convolution_2d_strided_padded",
        _conv(strides=(2, 1), padding_below=(1, 0), padding_above=(0, 1)),
        (In((1, 2, 5, 5)), In((3, 2, 3, 3))),
        FLOATS,
    ),
    OpRecord(
        "convolution_2d_data_dilated_negative_padding",
        _conv(
            strides=(1, 2),
            dilations=(1, 2),
            padding_below=(-1, 1),
            padding_above=(1, -1),  # (10 - 3) % 2: the data gradient needs output padding
            data_dilations=(2, 3),
        ),
        (In((1, 1, 3, 4)), In((2, 1, 2, 2))),
        FLOATS,
    ),
    OpRecord(
        "convolution_1d_depthwise_dilated",
        _conv(dilations=(2,), padding_below=(2,), padding_above=(1,), groups=3),
        (In((2, 3, 6)), In((3, 1, 3))),
        FLOATS,
    ),
    OpRecord(
        "convolution_2d_grouped",
        _conv(strides=(1, 2), groups=2),
        (In((1, 4, 3, 5)), In((4, 2, 2, 2))),
        FLOATS,
    ),
    OpRecord(
        "convolution_3d_uneven_small",
        _conv(
            strides=(1, 2, 1),
            dilations=(2, 1, 1),
            padding_below=(1, 0, -1),
            padding_above=(0, 1, 1),
            data_dilations=(1, 1, 2),
        ),
        (In((1, 1, 4, 3, 3)), In((2, 1, 2, 2, 2))),
        FLOATS,
    ),
    OpRecord(
        "convolution_same_upper",
        _conv(strides=(2, 2), auto_pad="same_upper"),
        (In((1, 1, 5, 4)), In((2, 1, 3, 2))),
        FLOATS,
    ),
    OpRecord(
        "convolution_backprop_data_2d",
        _transposed(
            strides=(2, 2), padding_below=(1, 0), padding_above=(1, 1), output_padding=(1, 0)
        ),
        (In((1, 2, 3, 3)), In((2, 2, 2, 3))),
        FLOATS,
    ),
    OpRecord(
        "convolution_backprop_data_1d_grouped_dilated",
        _transposed(
            strides=(3,), dilations=(2,), padding_below=(-1,), groups=2, output_shape=(12,)
        ),
        (In((1, 4, 3)), In((4, 1, 2))),
        FLOATS,
    ),
    OpRecord(
        "convolution_backprop_filters_2d",
        _filters((2, 3), strides=(2, 1), padding_below=(1, 1), padding_above=(0, 1)),
        (In((2, 2, 4, 4)), In((2, 3, 2, 4))),
        FLOATS,
    ),
    OpRecord(
        "convolution_backprop_filters_1d_grouped_data_dilated",
        _filters((2,), dilations=(2,), data_dilations=(2,), padding_below=(-1,), groups=2),
        (In((1, 4, 4)), In((1, 2, 4))),
        FLOATS,
    ),
    # -------------------------------------------------- nGraph's generator cases (oracle only)
    OpRecord(
        "convolution_2d_1item_2o1i_data_dilated",
        _conv(data_dilations=(2, 2)),
        (In((1, 1, 3, 5)), In((2, 1, 2, 2))),
        FLOATS,
    ),
    OpRecord(
        "convolution_2d_2items_strided_padded",
        _conv(strides=(2, 2), padding_below=(4, 2), padding_above=(5, 7)),
        (In((2, 1, 3, 5)), In((2, 1, 2, 2))),
        FLOATS,
        differentiable=False,
    ),
    OpRecord(
        "convolution_4d_4items_padded_neg",
        _conv(padding_below=(-1, 2, -3, 2), padding_above=(1, 0, 0, -3)),
        (In((4, 3, 3, 5, 8, 7)), In((4, 3, 2, 2, 3, 1))),
        WIDE,
        differentiable=False,
    ),
    OpRecord(
        "convolution_3d_2item_large_5o3i_padded_strided_uneven_filter_uneven_data_dilation_"
        "filter_dilated_data_dilated",
        _conv(
            strides=(2, 3, 2),
            dilations=(3, 2, 2),
            padding_below=(2, 1, 2),
            padding_above=(1, 2, 3),
            data_dilations=(2, 3, 2),
        ),
        (In((2, 3, 8, 8, 8)), In((5, 3, 2, 3, 4))),
        WIDE,
        differentiable=False,
    ),
]
