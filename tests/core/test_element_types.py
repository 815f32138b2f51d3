import ml_dtypes
import numpy as np
import pytest

import opgraph as og

NAMES = [
    "boolean",
    "f16",
    "bf16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
]


@pytest.mark.parametrize("name", NAMES)
def test_element_type_names(name):
    t = getattr(og, name)
    assert t is getattr(og.element, name)
    assert t.name == name
    assert og.element.from_name(name) is t
    assert og.element.from_dtype(t.dtype) is t


def test_dtypes():
    assert og.bf16.dtype == np.dtype(ml_dtypes.bfloat16)
    assert og.boolean.dtype == np.bool_
    assert og.u64.dtype == np.uint64
    assert len(og.element.ALL) == 13


def test_properties():
    assert og.f32.is_real and og.f32.is_signed and og.f32.bitwidth == 32
    assert og.u8.is_integral and not og.u8.is_signed
    assert og.boolean.is_boolean


def test_unknown_names():
    with pytest.raises(og.OpTypeError, match="unknown element type 'float32'"):
        og.element.from_name("float32")
    with pytest.raises(og.OpTypeError, match="has no opgraph element type"):
        og.element.from_dtype(np.complex64)
