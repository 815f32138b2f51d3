import numpy as np
import pytest

import opgraph as og


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.5, "f32[]"),
        (3, "i64[]"),
        (True, "boolean[]"),
        ([1.0, 2.0], "f32[2]"),
        ([[1, 2]], "i64[1,2]"),
        (np.array([1, 2], np.int8), "i8[2]"),
        (np.float64(2.0), "f64[]"),
        (np.zeros((0, 3), np.float16), "f16[0,3]"),
    ],
)
def test_constant_default_types(value, expected):
    assert str(og.constant(value).type) == expected


@pytest.mark.parametrize(
    ("value", "element_type", "message"),
    [
        (300, og.i8, "value 300 is out of range for i8"),
        (-1, og.u32, "value -1 is out of range for u32"),
        (1.5, og.i32, "i32 needs integral values"),
        (float("nan"), og.i64, "i64 needs integral values"),
        (1, og.boolean, "boolean needs True/False values"),
        (True, og.f32, "f32 needs numbers, got booleans"),
        (1e40, og.f32, "out of range for f32"),
        (70000.0, og.f16, "out of range for f16"),
        ("abc", None, "are not numbers or booleans"),
        ([[1, 2], [3]], og.f32, "cannot read"),
    ],
)
def test_constant_rejects_values_that_do_not_fit(value, element_type, message):
    with pytest.raises(og.OpTypeError, match=message):
        og.constant(value, element_type)


def test_constant_accepts_fitting_values():
    assert og.constant(2.0, og.i8).node.op.value.tolist() == 2
    assert og.constant(255, og.u8).node.op.value.dtype == np.uint8
    assert np.isinf(og.constant(float("inf"), og.f16).node.op.value)
    assert og.constant(2**64 - 1, og.u64).node.op.value == 2**64 - 1


def test_constant_value_is_a_private_read_only_copy():
    source = np.array([1.0, 2.0], np.float32)
    c = og.constant(source)
    source[0] = 9
    assert c.node.op.value[0] == 1.0
    with pytest.raises(ValueError):
        c.node.op.value[0] = 3


def test_parameter():
    x = og.parameter(og.f32, [2, 3], name="x")
    assert x.type == og.TensorType(og.f32, (2, 3))
    assert x.node.name == "x"
    with pytest.raises(og.OpTypeError, match=r"shape\[1\] must be >= 0"):
        og.parameter(og.f32, (2, -3))
    with pytest.raises(og.OpTypeError, match="expected an element type"):
        og.parameter(3.5, (2,))


def test_bf16_constants_and_sugar():
    assert str(og.constant(0.5, og.bf16).type) == "bf16[]"
    with pytest.raises(og.OpTypeError, match="out of range for bf16"):
        og.constant(1e39, og.bf16)
    x = og.parameter(og.bf16, (2,))
    assert str((x * 0.5 + 1).type) == "bf16[2]"
