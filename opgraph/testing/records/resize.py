"""Records for Resize: nearest on every element type, linear on floats, up and down."""

from __future__ import annotations

from opgraph import ops
from opgraph.testing.records.base import ALL, FLOATS, In, OpRecord

RECORDS: list[OpRecord] = [
    OpRecord(
        "resize_nearest_upsample",
        lambda x: ops.resize(x, scales=(1, 1, 2, 2)),
        (In((1, 2, 2, 3)),),
        ALL,
    ),
    OpRecord(
        "resize_nearest_downsample_floor_asymmetric",
        lambda x: ops.resize(
            x, (1, 1, 2, 3), coordinate_transformation_mode="asymmetric", nearest_mode="floor"
        ),
        (In((1, 1, 4, 5)),),
        ALL,
    ),
    OpRecord(
        "resize_nearest_ceil_align_corners",
        lambda x: ops.resize(
            x, (2, 7), coordinate_transformation_mode="align_corners", nearest_mode="ceil"
        ),
        (In((2, 3)),),
        ALL,
    ),
    OpRecord(
        "resize_nearest_prefer_ceil_fractional",
        lambda x: ops.resize(x, scales=(1, 1, 2.5), nearest_mode="round_prefer_ceil"),
        (In((1, 2, 4)),),
        ALL,
    ),
    OpRecord(
        "resize_nearest_pytorch_half_pixel_to_one",
        lambda x: ops.resize(x, (2, 1, 3), coordinate_transformation_mode="pytorch_half_pixel"),
        (In((2, 3, 2)),),
        ALL,
    ),
    OpRecord(
        "resize_linear_half_pixel_upsample",
        lambda x: ops.resize(x, (1, 1, 4, 6), mode="linear"),
        (In((1, 1, 2, 3)),),
        FLOATS,
    ),
    OpRecord(
        "resize_linear_align_corners_upsample",
        lambda x: ops.resize(
            x, (1, 2, 5, 4), mode="linear", coordinate_transformation_mode="align_corners"
        ),
        (In((1, 2, 3, 3)),),
        FLOATS,
    ),
    OpRecord(
        "resize_linear_half_pixel_downsample",
        lambda x: ops.resize(x, scales=(1, 1, 0.5, 0.6), mode="linear"),
        (In((1, 1, 4, 5)),),
        FLOATS,
    ),
    OpRecord(
        "resize_linear_align_corners_downsample",
        lambda x: ops.resize(
            x, (1, 1, 3, 2), mode="linear", coordinate_transformation_mode="align_corners"
        ),
        (In((1, 1, 5, 5)),),
        FLOATS,
    ),
    OpRecord(
        "resize_linear_asymmetric_3d",
        lambda x: ops.resize(
            x, scales=(1.5, 1, 1.7), mode="linear", coordinate_transformation_mode="asymmetric"
        ),
        (In((2, 2, 3)),),
        FLOATS,
    ),
    OpRecord(
        "resize_linear_pytorch_half_pixel",
        lambda x: ops.resize(
            x, (1, 5), mode="linear", coordinate_transformation_mode="pytorch_half_pixel"
        ),
        (In((3, 3)),),
        FLOATS,
    ),
    OpRecord("resize_linear_1d", lambda x: ops.resize(x, (8,), mode="linear"), (In((5,)),), FLOATS),
    OpRecord(
        "resize_identity_and_empty",
        lambda x: ops.resize(x, (2, 0), mode="linear"),
        (In((2, 3)),),
        FLOATS,
    ),
]
