"""Records for shape_of (ranks 0 to 3, an empty axis), non_zero (random values, fixed
zeros, all zero, none zero, NaN), unique (flattened and per axis, sorted and in first-occurrence
order, ties, empty, NaN), non_max_suppression (the ONNX cases: corners in either order,
centres, identical boxes, ties, thresholds as values, absent limit) and compress /
boolean_mask (axes, negative axis, flattened, a short condition, nothing kept). The
data-dependent ones are tagged ``data_dependent`` and listed apart (``DATA_DEPENDENT``): CPU
and GPU refuse data-dependent output sizes, so they run on INTERPRETER only. Only compress
and boolean_mask are differentiable (in the data)."""

from __future__ import annotations

from typing import Any

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.testing.records.base import ALL, FLOATS, In, OpRecord

_B = et.boolean

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


def _dd(name: str, build: Any, inputs: tuple[In, ...], types: Any, grad: bool = False) -> OpRecord:
    """A data-dependent record (``differentiable``: a gradient test applies to the data)."""
    return OpRecord(name, build, inputs, types, differentiable=grad, tags=_DATA)


_REPEATS = [[2, 0, 2, 1], [1, 3, 0, 2], [0, 0, 1, 3]]
_COLUMNS = [[1, 0, 1, 2], [3, 2, 3, 1], [1, 1, 1, 0]]  # columns 0 and 2 are equal
_ROWS = [[1, 2, 0], [0, 5, 1], [1, 2, 0], [0, 5, 0]]  # rows 0 and 2 are equal

DATA_DEPENDENT += [
    _dd("unique_flat_sorted", ops.unique, (In((3, 4), values=_REPEATS),), ALL),
    _dd(
        "unique_flat_first_occurrence",
        lambda x: ops.unique(x, sorted=False),
        (In((3, 4), values=_REPEATS),),
        ALL,
    ),
    _dd("unique_random", ops.unique, (In((2, 3, 2), low=-2, high=2),), ALL),
    _dd(
        "unique_negative_axis",
        lambda x: ops.unique(x, axis=-1),
        (In((3, 4), values=_COLUMNS),),
        ALL,
    ),
    _dd(
        "unique_rows_first_occurrence",
        lambda x: ops.unique(x, axis=0, sorted=False),
        (In((4, 3), values=_ROWS),),
        ALL,
    ),
    _dd("unique_all_equal", ops.unique, (In((5,), values=[7] * 5),), ALL),
    _dd("unique_empty", ops.unique, (In((0,)),), ALL),
    _dd("unique_scalar", ops.unique, (In((), values=4),), ALL),
    _dd(
        "unique_nan",
        ops.unique,
        (In((6,), values=[1.0, float("nan"), -1.0, float("nan"), 1.0, 0.5]),),
        FLOATS,
    ),
]

_BOXES = [
    [0.0, 0.0, 1.0, 1.0],
    [0.0, 0.1, 1.0, 1.1],
    [0.0, -0.1, 1.0, 0.9],
    [0.0, 10.0, 1.0, 11.0],
    [0.0, 10.1, 1.0, 11.1],
    [0.0, 100.0, 1.0, 101.0],
]
_FLIPPED = [
    [1.0, 1.0, 0.0, 0.0],
    [0.0, 0.1, 1.0, 1.1],
    [0.0, 0.9, 1.0, -0.1],
    [0.0, 10.0, 1.0, 11.0],
    [1.0, 10.1, 0.0, 11.1],
    [1.0, 101.0, 0.0, 100.0],
]
_CENTERS = [[0.5, 0.5 + (b[1] + b[3] - 1) / 2, 1.0, 1.0] for b in _BOXES]
_SCORES = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3]
_NMS_TYPES = (et.f16, et.f32, et.f64)


def _nms(*args: Any, **kwargs: Any) -> Any:
    return lambda boxes, scores: ops.non_max_suppression(boxes, scores, *args, **kwargs)


def _nms_inputs(boxes: Any, scores: Any, classes: int = 1) -> tuple[In, In]:
    return (
        In((1, len(boxes), 4), values=[boxes]),
        In((1, classes, len(boxes)), values=[scores] * classes),
    )


DATA_DEPENDENT += [
    _dd("nms_corners", _nms(3, 0.5, 0.0), _nms_inputs(_BOXES, _SCORES), _NMS_TYPES),
    _dd("nms_flipped_corners", _nms(3, 0.5, 0.0), _nms_inputs(_FLIPPED, _SCORES), _NMS_TYPES),
    _dd(
        "nms_center_point_box",
        _nms(3, 0.5, 0.0, center_point_box=1),
        _nms_inputs(_CENTERS, _SCORES),
        _NMS_TYPES,
    ),
    _dd("nms_limit_one", _nms(1, 0.5, 0.0), _nms_inputs(_BOXES, _SCORES), _NMS_TYPES),
    _dd("nms_score_threshold", _nms(3, 0.5, 0.4), _nms_inputs(_BOXES, _SCORES), _NMS_TYPES),
    _dd("nms_no_score_threshold", _nms(9, 0.5), _nms_inputs(_BOXES, _SCORES), _NMS_TYPES),
    _dd(
        "nms_identical_boxes_tied_scores",
        _nms(3, 0.5, 0.0),
        _nms_inputs([[0.0, 0.0, 1.0, 1.0]] * 5, [0.9] * 5),
        _NMS_TYPES,
    ),
    _dd("nms_ties_kept_by_index", _nms(4, 0.5), _nms_inputs(_BOXES, [0.5] * 6), _NMS_TYPES),
    _dd("nms_absent_limit", _nms(), _nms_inputs(_BOXES, _SCORES), _NMS_TYPES),
    _dd("nms_two_classes", _nms(2, 0.5, 0.0), _nms_inputs(_BOXES, _SCORES, 2), _NMS_TYPES),
    _dd(
        "nms_random_two_batches",
        _nms(3, 0.3),
        (In((2, 5, 4), low=0, high=2), In((2, 3, 5), low=0, high=1)),
        _NMS_TYPES,
    ),
    _dd(
        "nms_thresholds_as_values",
        ops.non_max_suppression,
        (
            *_nms_inputs(_BOXES, _SCORES),
            In((1,), element_type=et.i64, values=[2]),
            In((), element_type=et.f32, values=0.5),
            In((1,), element_type=et.f32, values=[0.55]),
        ),
        (et.f32,),
    ),
]

_KEEP = [True, False, True]
DATA_DEPENDENT += [
    _dd(
        "compress_axis0",
        lambda x, c: ops.compress(x, c, axis=0),
        (In((3, 2)), In((3,), element_type=_B, values=_KEEP)),
        ALL,
        grad=True,
    ),
    _dd(
        "compress_negative_axis",
        lambda x, c: ops.compress(x, c, axis=-1),
        (In((2, 3)), In((3,), element_type=_B, values=[False, True, True])),
        ALL,
        grad=True,
    ),
    _dd(
        "compress_flat",
        ops.compress,
        (In((2, 3)), In((6,), element_type=_B, values=[1, 0, 0, 1, 1, 0])),
        ALL,
        grad=True,
    ),
    _dd(
        "compress_short_condition",
        lambda x, c: ops.compress(x, c, axis=1),
        (In((2, 4)), In((2,), element_type=_B, values=[False, True])),
        ALL,
        grad=True,
    ),
    _dd(
        "compress_nothing_kept",
        lambda x, c: ops.compress(x, c, axis=0),
        (In((3, 2)), In((3,), element_type=_B, values=[False] * 3)),
        ALL,
        grad=True,
    ),
    _dd(
        "compress_random_condition",
        lambda x, c: ops.compress(x, c, axis=1),
        (In((2, 5, 2)), In((5,), element_type=_B)),
        ALL,
        grad=True,
    ),
    _dd(
        "boolean_mask_2d",
        ops.boolean_mask,
        (In((2, 3, 2)), In((2, 3), element_type=_B, values=[[1, 0, 1], [0, 0, 1]])),
        ALL,
        grad=True,
    ),
    _dd(
        "boolean_mask_full",
        ops.boolean_mask,
        (In((2, 3)), In((2, 3), element_type=_B, values=[[0, 1, 1], [1, 0, 0]])),
        ALL,
        grad=True,
    ),
]
