"""Element types: the 13 scalar types of opgraph, each bound to exactly one numpy dtype.

There is no implicit promotion anywhere in opgraph; these objects are compared by identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from opgraph.core.errors import OpTypeError


@dataclass(frozen=True, slots=True, eq=False)
class ElementType:
    """One scalar element type (``og.f32`` …).

    Attributes:
        name: short name used in printing and serialization (``"f32"``).
        dtype: the numpy dtype that stores it (bf16 through ``ml_dtypes``).
        kind: ``"bool"``, ``"float"``, ``"int"`` or ``"uint"``.
        c_type: the C type generated code uses for it.
    """

    name: str
    dtype: np.dtype[Any]
    kind: str
    c_type: str

    @property
    def bitwidth(self) -> int:
        return self.dtype.itemsize * 8

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def is_real(self) -> bool:
        return self.kind == "float"

    @property
    def is_integral(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")

    @property
    def is_boolean(self) -> bool:
        return self.kind == "bool"

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:  # element types are singletons, also across copy/pickle
        return self.name


def _make(name: str, dtype: Any, kind: str, c_type: str) -> ElementType:
    return ElementType(name, np.dtype(dtype), kind, c_type)


boolean = _make("boolean", np.bool_, "bool", "_Bool")
f16 = _make("f16", np.float16, "float", "_Float16")
bf16 = _make("bf16", ml_dtypes.bfloat16, "float", "__bf16")
f32 = _make("f32", np.float32, "float", "float")
f64 = _make("f64", np.float64, "float", "double")
i8 = _make("i8", np.int8, "int", "int8_t")
i16 = _make("i16", np.int16, "int", "int16_t")
i32 = _make("i32", np.int32, "int", "int32_t")
i64 = _make("i64", np.int64, "int", "int64_t")
u8 = _make("u8", np.uint8, "uint", "uint8_t")
u16 = _make("u16", np.uint16, "uint", "uint16_t")
u32 = _make("u32", np.uint32, "uint", "uint32_t")
u64 = _make("u64", np.uint64, "uint", "uint64_t")

ALL: tuple[ElementType, ...] = (boolean, f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64)
FLOATS: tuple[ElementType, ...] = (f16, bf16, f32, f64)
SIGNED_INTS: tuple[ElementType, ...] = (i8, i16, i32, i64)
UNSIGNED_INTS: tuple[ElementType, ...] = (u8, u16, u32, u64)
INTS: tuple[ElementType, ...] = SIGNED_INTS + UNSIGNED_INTS
NUMERIC: tuple[ElementType, ...] = FLOATS + INTS

_BY_NAME = {t.name: t for t in ALL}
_BY_DTYPE = {t.dtype: t for t in ALL}


def from_name(name: str) -> ElementType:
    """The element type called ``name`` (``"f32"``); raises ``OpTypeError`` listing the names."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise OpTypeError(
            f"unknown element type {name!r}; expected one of {', '.join(_BY_NAME)}"
        ) from None


def from_dtype(dtype: Any) -> ElementType:
    """The element type stored as numpy ``dtype``; raises ``OpTypeError`` when there is none."""
    key = np.dtype(dtype)
    try:
        return _BY_DTYPE[key]
    except KeyError:
        raise OpTypeError(
            f"numpy dtype {key} has no opgraph element type; supported dtypes are "
            f"{', '.join(str(t.dtype) for t in ALL)}"
        ) from None


def as_element_type(value: Any) -> ElementType:
    """Normalise an ElementType, its name, or a numpy dtype to an ElementType."""
    if isinstance(value, ElementType):
        return value
    if isinstance(value, str):
        return from_name(value)  # only opgraph's names: "float" is ambiguous
    try:
        return from_dtype(value)
    except TypeError:
        raise OpTypeError(
            f"expected an element type (og.f32, 'f32' or a numpy dtype), got {value!r}"
        ) from None
