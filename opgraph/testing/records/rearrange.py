"""Records for the rearrangement ops: pad (with nGraph's pad edge cases as data),
depth_to_space and space_to_depth."""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core.node import Output
from opgraph.testing.records.base import ALL, NUMERIC, In, OpRecord


def _pad(
    below: tuple[int, ...], above: tuple[int, ...], mode: str = "constant", value: int = 0
) -> Callable[[Output], Output]:
    return lambda x: ops.pad(x, below, above, mode, value)


PAD = [
    OpRecord("pad_constant", _pad((1, 0), (2, 1)), (In((2, 3)),), ALL),
    OpRecord(
        "pad_value_input",
        lambda x, v: ops.pad(x, (1, 2), (0, 1), value=v),
        (In((2, 3)), In(())),
        ALL,
    ),
    # nGraph pad_negative_exterior_1d: crop 2 at the end, pad 4 at the start.
    OpRecord(
        "pad_negative_exterior_1d",
        _pad((4,), (-2,), value=9),
        (In((6,), values=[1, 2, 3, 4, 5, 6]),),
        NUMERIC,
    ),
    OpRecord("pad_crop_both_sides", _pad((-1, 2), (1, -2)), (In((4, 5)),), ALL),
    OpRecord("pad_crop_to_empty", _pad((-2,), (-1,)), (In((3,)),), ALL),
    # nGraph pad_exterior_2d_0x3: an empty input padded to a full output of the pad value.
    OpRecord("pad_exterior_2d_0x3", _pad((2, 1), (3, 0), value=5), (In((0, 3)),), NUMERIC),
    OpRecord("pad_edge_of_empty_rows", _pad((0, 1), (0, 2), "edge"), (In((0, 3)),), ALL),
    *(
        OpRecord(f"pad_{mode}", _pad((2, 1), (1, 3), mode), (In((3, 4)),), ALL)
        for mode in ("edge", "reflect", "symmetric")
    ),
    # nGraph pad_reflect_1d_multi_reflect: padding far beyond the dimension.
    OpRecord(
        "pad_reflect_1d_multi_reflect",
        _pad((10,), (9,), "reflect"),
        (In((3,), values=[1, 2, 3]),),
        NUMERIC,
    ),
    OpRecord(
        "pad_symmetric_multi_reflect",
        _pad((7,), (8,), "symmetric"),
        (In((3,), values=[1, 2, 3]),),
        NUMERIC,
    ),
    OpRecord("pad_edge_long", _pad((5, 0), (0, 4), "edge"), (In((2, 2)),), NUMERIC),
    # A crop on one side while reflecting past the other: the window over the extension of
    # the original x (not a reflection of the cropped x).
    OpRecord("pad_reflect_crop_other_side", _pad((-2,), (5,), "reflect"), (In((4,)),), NUMERIC),
    OpRecord("pad_symmetric_crop", _pad((-1, 3), (2, -1), "symmetric"), (In((3, 4)),), NUMERIC),
    OpRecord("pad_scalar", _pad((), ()), (In(()),), NUMERIC),
]

BLOCKS = [
    *(
        OpRecord(
            f"depth_to_space_{mode}",
            lambda x, m=mode: ops.depth_to_space(x, 2, m),
            (In((2, 8, 2, 3)),),
            ALL,
        )
        for mode in ("blocks_first", "depth_first")
    ),
    *(
        OpRecord(
            f"space_to_depth_{mode}",
            lambda x, m=mode: ops.space_to_depth(x, 2, m),
            (In((2, 2, 4, 6)),),
            ALL,
        )
        for mode in ("blocks_first", "depth_first")
    ),
    OpRecord(
        "depth_to_space_3d",
        lambda x: ops.depth_to_space(x, 2, "depth_first"),
        (In((1, 16, 1, 2, 2)),),
        NUMERIC,
    ),
    OpRecord("space_to_depth_1d", lambda x: ops.space_to_depth(x, 3), (In((2, 2, 6)),), NUMERIC),
]

RECORDS: list[OpRecord] = [*PAD, *BLOCKS]
