"""Records for the movement ops of the core catalogue: pad, reverse, reverse_sequence, tile,
split, depth_to_space, space_to_depth and range_, with nGraph's pad edge cases as data."""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.testing.records.base import ALL, NUMERIC, In, OpRecord


def _pad(
    below: tuple[int, ...], above: tuple[int, ...], mode: str = "constant", value: int = 0
) -> Callable[[Output], Output]:
    return lambda x: ops.pad(x, below, above, mode, value)


def _range_plus(start: float, stop: float, step: float) -> Callable[[Output], Output]:
    def build(x: Output) -> Output:
        return ops.add(x, ops.range_(start, stop, step, x.element_type))

    return build


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

REVERSE = [
    OpRecord("reverse", lambda x: ops.reverse(x, (0, -1)), (In((2, 3, 4)),), ALL),
    OpRecord("reverse_none", lambda x: ops.reverse(x, ()), (In((2, 3)),), NUMERIC),
    OpRecord("reverse_empty", lambda x: ops.reverse(x, 1), (In((2, 0)),), NUMERIC),
    OpRecord(
        "reverse_sequence",
        ops.reverse_sequence,
        (In((3, 5, 2)), In((3,), et.i64, values=[5, 0, 3])),
        ALL,
    ),
    OpRecord(
        "reverse_sequence_seq_major_i32",
        lambda x, n: ops.reverse_sequence(x, n, batch_axis=-1, seq_axis=0),
        (In((4, 2, 3)), In((3,), et.i32, values=[1, 4, 2])),
        NUMERIC,
    ),
]

TILE_SPLIT = [
    OpRecord("tile", lambda x: ops.tile(x, (2, 3)), (In((2, 3)),), ALL),
    OpRecord("tile_zero_repeats", lambda x: ops.tile(x, (0, 2)), (In((2, 3)),), NUMERIC),
    OpRecord("tile_scalar", lambda x: ops.tile(x, ()), (In(()),), NUMERIC),
    OpRecord("split_equal", lambda x: ops.split(x, 0, 3), (In((6, 2)),), ALL),
    OpRecord(
        "split_sizes_zero_length",
        lambda x: ops.split(x, -1, (1, 0, 3, 1)),
        (In((2, 5)),),
        ALL,
    ),
    # Zero-length pieces reassembled, in another order; one piece of several used.
    OpRecord(
        "split_concat_zero_length",
        lambda x: ops.concat(list(ops.split(x, 0, (2, 0, 3)))[::-1], 0),
        (In((5, 2)),),
        NUMERIC,
    ),
    OpRecord("split_one_piece_used", lambda x: ops.split(x, 1, 3)[1], (In((2, 6)),), NUMERIC),
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

RANGE = [
    OpRecord("range_integral", _range_plus(1, 13, 2), (In((6,)),), NUMERIC),
    OpRecord(
        "range_negative_step", _range_plus(2.5, -1, -0.5), (In((7,)),), (et.f16, et.f32, et.f64)
    ),
    OpRecord("range_empty", _range_plus(3, 3, 1), (In((0,)),), NUMERIC),
]

RECORDS: list[OpRecord] = [*PAD, *REVERSE, *TILE_SPLIT, *BLOCKS, *RANGE]
