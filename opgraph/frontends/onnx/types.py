"""ONNX element types and opgraph element types."""

from __future__ import annotations

import onnx

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.errors import ConversionError

# TensorProto.DataType values (stable numbers in the ONNX spec).
_FROM_ONNX: dict[int, ElementType] = {
    1: et.f32,
    2: et.u8,
    3: et.i8,
    4: et.u16,
    5: et.i16,
    6: et.i32,
    7: et.i64,
    9: et.boolean,
    10: et.f16,
    11: et.f64,
    12: et.u32,
    13: et.u64,
    16: et.bf16,
}
_TO_ONNX = {v: k for k, v in _FROM_ONNX.items()}


def from_onnx(code: int, where: str) -> ElementType:
    """The element type for ONNX data type ``code``; ConversionError when unsupported."""
    try:
        return _FROM_ONNX[code]
    except KeyError:
        raise ConversionError(f"{where}: ONNX data type {_name(code)} is not supported") from None


def to_onnx(element_type: ElementType) -> int:
    return _TO_ONNX[element_type]


_ONNX_NAMES = {
    1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16",
}  # fmt: skip


def onnx_type_name(code: int) -> str:
    """ONNX's name of data type ``code`` as type constraints spell it (``float``, ``int64``)."""
    return _ONNX_NAMES.get(code) or _name(code)


def _name(code: int) -> str:
    try:
        return str(onnx.TensorProto.DataType.Name(code))
    except (ImportError, ValueError):
        return str(code)
