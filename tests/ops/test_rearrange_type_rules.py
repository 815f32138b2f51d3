"""Type rules of pad, depth_to_space and space_to_depth: one case per accepted form and per
error, matching stable substrings; plus canonical attributes and enum attributes given by name."""

import pytest

import opgraph as og
from opgraph import ops


def p(shape, t=og.f32):
    return og.parameter(t, shape)


ACCEPTED = [
    ("pad_mode_member_name", lambda: ops.pad(p((2,)), (1,), (1,), "EDGE"), "f32[4]"),
    ("pad", lambda: ops.pad(p((2, 3)), (1, 0), (2, 1)), "f32[5,4]"),
    ("pad_crop", lambda: ops.pad(p((6,)), (4,), (-2,)), "f32[8]"),
    ("pad_crop_all", lambda: ops.pad(p((3,)), (-2,), (-1,)), "f32[0]"),
    ("pad_empty_input", lambda: ops.pad(p((0, 3)), (2, 1), (3, 0)), "f32[5,4]"),
    ("pad_reflect_repeated", lambda: ops.pad(p((3,)), (10,), (9,), "reflect"), "f32[22]"),
    ("pad_edge_empty_other_axis", lambda: ops.pad(p((0, 3)), (0, 1), (0, 1), "edge"), "f32[0,5]"),
    ("pad_reflect_crop_short", lambda: ops.pad(p((1,)), (-1,), (0,), "reflect"), "f32[0]"),
    ("pad_mode_member", lambda: ops.pad(p((2,)), (1,), (1,), ops.PadMode.SYMMETRIC), "f32[4]"),
    ("pad_value_output", lambda: ops.pad(p((2,), og.i8), (1,), (0,), value=p((), og.i8)), "i8[3]"),
    ("pad_bool_default", lambda: ops.pad(p((2,), og.boolean), (1,), (1,)), "boolean[4]"),
    ("pad_bool_one", lambda: ops.pad(p((2,), og.boolean), (1,), (1,), value=1), "boolean[4]"),
    ("pad_u8_255", lambda: ops.pad(p((2,), og.u8), (1,), (1,), value=255), "u8[4]"),
    ("pad_bf16_value", lambda: ops.pad(p((2,), og.bf16), (1,), (1,), value=1.5), "bf16[4]"),
    ("pad_scalar", lambda: ops.pad(p(()), (), ()), "f32[]"),
    ("depth_to_space", lambda: ops.depth_to_space(p((1, 8, 2, 3)), 2), "f32[1,2,4,6]"),
    (
        "depth_to_space_depth_first",
        lambda: ops.depth_to_space(p((1, 16, 1, 2, 2)), 2, "depth_first"),
        "f32[1,2,2,4,4]",
    ),
    ("depth_to_space_1d", lambda: ops.depth_to_space(p((2, 6, 4)), 3), "f32[2,2,12]"),
    ("space_to_depth", lambda: ops.space_to_depth(p((2, 2, 4, 6)), 2), "f32[2,8,2,3]"),
    (
        "space_to_depth_member",
        lambda: ops.space_to_depth(p((1, 1, 3, 3)), 3, ops.BlockMode.DEPTH_FIRST),
        "f32[1,9,1,1]",
    ),
]


@pytest.mark.parametrize(("case", "build", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(case, build, expected):
    assert str(build().type) == expected


ERRORS = [
    (
        "pad_value_type",
        lambda: ops.pad(p((2,)), (1,), (1,), value=p((), og.f64)),
        "Pad: element types of x and the pad value differ: f32 vs f64",
    ),
    (
        "pad_value_rank",
        lambda: ops.pad(p((2,)), (1,), (1,), value=p((1,))),
        "the pad value must be a scalar, got f32[1]",
    ),
    (
        "pad_below_length",
        lambda: ops.pad(p((2, 3)), (1,), (1, 1)),
        "padding_below (1,) has 1 entries, input f32[2,3] has rank 2",
    ),
    (
        "pad_above_length",
        lambda: ops.pad(p((2, 3)), (1, 1), (1, 1, 1)),
        "padding_above (1, 1, 1) has 3 entries",
    ),
    (
        "pad_overcrop",
        lambda: ops.pad(p((2,)), (-2,), (-1,)),
        "axis 0: padding (-2, -1) crops more than the dimension 2",
    ),
    (
        "pad_reflect_short",
        lambda: ops.pad(p((3, 1)), (0, 1), (0, 0), "reflect"),
        "axis 1: reflect padding needs a dimension of at least 2, got 1",
    ),
    (
        "pad_edge_empty",
        lambda: ops.pad(p((0,)), (0,), (1,), "edge"),
        "axis 0: edge padding needs a dimension of at least 1, got 0",
    ),
    (
        "pad_symmetric_empty",
        lambda: ops.pad(p((0,)), (1,), (0,), "symmetric"),
        "symmetric padding needs a dimension of at least 1, got 0",
    ),
    (
        "pad_mode_unknown",
        lambda: ops.pad(p((2,)), (1,), (1,), "wrap"),
        "Pad: mode must be one of 'constant', 'edge', 'reflect', 'symmetric' (or a PadMode member), got 'wrap'",
    ),
    (
        "pad_value_out_of_range",
        lambda: ops.pad(p((2,), og.u8), (1,), (1,), value=300),
        "Pad: pad value 300 does not fit u8: value 300 is out of range for u8",
    ),
    (
        "pad_value_fraction",
        lambda: ops.pad(p((2,), og.i32), (1,), (1,), value=0.5),
        "pad value 0.5 does not fit i32: i32 needs integral values",
    ),
    (
        "pad_value_bool_for_float",
        lambda: ops.pad(p((2,)), (1,), (1,), value=True),
        "pad value True does not fit f32: f32 needs numbers",
    ),
    (
        "pad_value_two_for_bool",
        lambda: ops.pad(p((2,), og.boolean), (1,), (1,), value=2),
        "pad value 2 does not fit boolean",
    ),
    (
        "pad_value_bf16_overflow",
        lambda: ops.pad(p((2,), og.bf16), (1,), (1,), value=1e39),
        "pad value 1e+39 does not fit bf16",
    ),
    (
        "pad_value_not_scalar",
        lambda: ops.pad(p((2,)), (1,), (1,), value=[1, 2]),
        "pad value must be a Python scalar",
    ),
    ("pad_float_padding", lambda: ops.pad(p((2,)), (0.5,), (1,)), "must be an integer"),
    ("pad_arity", lambda: ops.Pad((1,), (1,))(p((2,))), "Pad: expected 2 input(s), got 1"),
    (
        "depth_to_space_rank",
        lambda: ops.depth_to_space(p((4, 4)), 2),
        "DepthToSpace: x must have rank >= 3",
    ),
    (
        "depth_to_space_channels",
        lambda: ops.depth_to_space(p((1, 6, 2, 2)), 2),
        "channels 6 are not divisible by block_size**2 = 4",
    ),
    (
        "depth_to_space_block",
        lambda: ops.depth_to_space(p((1, 4, 2)), 0),
        "block_size must be >= 1",
    ),
    (
        "depth_to_space_mode",
        lambda: ops.depth_to_space(p((1, 4, 2, 2)), 2, "dcr"),
        "mode must be one of 'blocks_first', 'depth_first' (or a BlockMode member), got 'dcr'",
    ),
    (
        "space_to_depth_spatial",
        lambda: ops.space_to_depth(p((1, 1, 4, 5)), 2),
        "SpaceToDepth: dimension 5 of axis 3 is not divisible by block_size 2",
    ),
    ("space_to_depth_rank", lambda: ops.space_to_depth(p((4,)), 2), "x must have rank >= 3"),
]


@pytest.mark.parametrize(("case", "build", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_error(case, build, message):
    with pytest.raises(og.OpTypeError) as info:
        build()
    assert message in str(info.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ops.pad(p((2,), og.u8), (1,), (1,), value=-1),
        lambda: ops.pad(p((2,)), (1,), (1,), "wrap"),
    ],
    ids=["pad_value", "pad_mode"],
)
def test_builder_errors_name_the_source_line(build):
    with pytest.raises(og.OpTypeError, match=r"built at test_rearrange_type_rules\.py:\d+"):
        build()


def test_canonical_attributes():
    x = p((2, 3, 4))
    assert ops.pad(x, [0, 0, 1], [1, 0, 0], "edge").node.op.mode is ops.PadMode.EDGE


def test_enum_members_and_names_build_the_same_op():
    x = p((1, 8, 2, 2))
    by_name = ops.depth_to_space(x, 2, "depth_first").node.op
    assert by_name == ops.depth_to_space(x, 2, ops.BlockMode.DEPTH_FIRST).node.op
    assert ops.Pad((1,), (1,), "reflect") == ops.Pad((1,), (1,), ops.PadMode.REFLECT)
    assert by_name.format_attributes() == "block_size=2, mode=depth_first"
