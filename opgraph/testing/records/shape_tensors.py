"""Records for the ops whose shape-like arguments are run-time tensors (``ops/shape_tensors``):
each argument is an i64 Parameter with fixed values, so the node's output sizes are fresh
symbols bound when it runs. Tagged ``data_dependent`` (INTERPRETER runs them; CPU and GPU
refuse them); gradients are checked in tests/ops/test_shape_tensors.py."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.testing.records.base import ALL, FLOATS, In, OpRecord

_DATA = frozenset({"data_dependent"})


def _i64(shape: tuple[int, ...], values: object) -> In:
    return In(shape, et.i64, values=values)


def _record(
    name: str, build: object, inputs: tuple[In, ...], types: object = ALL, sized: bool = True
) -> OpRecord:
    """A record; ``sized``: its output sizes are decided at run time (CPU and GPU refuse it;
    without, they run the node through the reference kernel)."""
    tags = _DATA if sized else frozenset()
    return OpRecord(name, build, inputs, types, differentiable=False, tags=tags)  # type: ignore[arg-type]


DATA_DEPENDENT: list[OpRecord] = [
    _record("dynamic_reshape", ops.dynamic_reshape, (In((2, 3, 4)), _i64((2,), [4, -1]))),
    _record(
        "dynamic_reshape_zero_copies",
        ops.dynamic_reshape,
        (In((2, 3, 4)), _i64((3,), [0, 4, 3])),
    ),
    _record("dynamic_broadcast", ops.dynamic_broadcast, (In((3, 1)), _i64((3,), [2, 1, 4]))),
    _record(
        "dynamic_slice_negative_step",
        lambda x, lo, hi, st: ops.dynamic_slice(x, lo, hi, [1], st),
        (In((2, 6)), _i64((1,), [-1]), _i64((1,), [-100]), _i64((1,), [-2])),
    ),
    _record(
        "slice_gradient",
        lambda ct, like, lo, hi, st: ops.slice_gradient(ct, like, lo, hi, [1], st),
        (In((2, 2)), In((2, 5)), _i64((1,), [4]), _i64((1,), [0]), _i64((1,), [-2])),
        FLOATS,
        sized=False,  # shaped like its second input
    ),
    _record(
        "dynamic_pad_constant",
        lambda x, p: ops.dynamic_pad(x, p),
        (In((2, 3)), _i64((4,), [1, 0, 0, 2])),
    ),
    _record(
        "dynamic_pad_reflect_and_crop",
        lambda x, p: ops.dynamic_pad(x, p, mode="reflect"),
        (In((3, 4)), _i64((4,), [2, -1, 0, 1])),
        FLOATS,
    ),
    _record("dynamic_tile", ops.dynamic_tile, (In((2, 3)), _i64((2,), [2, 3]))),
    _record(
        "dynamic_resize_nearest",
        lambda x, s: ops.dynamic_resize(x, s),
        (In((1, 2, 3, 2)), _i64((4,), [1, 2, 5, 3])),
    ),
    _record(
        "dynamic_resize_linear_align_corners",
        lambda x, s: ops.dynamic_resize(x, s, "linear", "align_corners"),
        (In((1, 1, 3, 4)), _i64((4,), [1, 1, 2, 7])),
        FLOATS,
    ),
    _record(
        "dynamic_top_k",
        lambda x, k: ops.dynamic_top_k(x, k, axis=1),
        (In((3, 5)), _i64((1,), [2])),
        FLOATS,
    ),
    _record(
        "dynamic_range",
        ops.dynamic_range,
        (_i64((), 1), _i64((), 11), _i64((), 3)),
        (et.i64,),
    ),
    _record("fill", ops.fill, (_i64((2,), [2, 3]), In(()))),
    _record(
        "sum_to",
        lambda x, shape, like: ops.sum_to(ops.dynamic_broadcast(x, shape), like),
        (In((1, 3)), _i64((2,), [2, 3]), In((1, 3))),
        FLOATS,
    ),
]
