"""Records for the movement ops of the core catalogue: reverse, reverse_sequence, tile, split
and range_."""

from __future__ import annotations

from collections.abc import Callable

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.testing.records.base import ALL, NUMERIC, In, OpRecord


def _range_plus(start: float, stop: float, step: float) -> Callable[[Output], Output]:
    def build(x: Output) -> Output:
        return ops.add(x, ops.range_(start, stop, step, x.element_type))

    return build


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

RANGE = [
    OpRecord("range_integral", _range_plus(1, 13, 2), (In((6,)),), NUMERIC),
    OpRecord(
        "range_negative_step", _range_plus(2.5, -1, -0.5), (In((7,)),), (et.f16, et.f32, et.f64)
    ),
    OpRecord("range_empty", _range_plus(3, 3, 1), (In((0,)),), NUMERIC),
]

RECORDS: list[OpRecord] = [*REVERSE, *TILE_SPLIT, *RANGE]
