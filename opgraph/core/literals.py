"""Parameter and Constant: the two leaf ops every graph starts from."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, format_value, opclass, set_attr
from opgraph.core.provenance import user_frame
from opgraph.core.shape import Shape, ShapeAttr, as_dims, as_shape
from opgraph.core.tensor_type import TensorType


@opclass
class Parameter(Op):
    """A call argument: its position in the Function's parameter list picks the argument."""

    element_type: ElementType
    shape: ShapeAttr
    num_inputs = 0

    def __post_init__(self) -> None:
        set_attr(self, "element_type", as_element_type(self.element_type))
        set_attr(self, "shape", as_dims(self.shape))

    def infer(self) -> TensorType:
        return TensorType(self.element_type, self.shape)

    def format_attributes(self) -> str:
        return ""


def parameter(element_type: Any, shape: Any, name: str | None = None) -> Output:
    """A Parameter: a placeholder for a call argument.

    Args:
        element_type: ``og.f32`` (or its name, or a numpy dtype).
        shape: a tuple of dimensions, each a non-negative int or a symbolic dimension
            (``og.dim("batch")``; a bare string ``"batch"`` is the same); ``()`` is a scalar.
        name: optional name shown in printing and kept by serialization.

    Returns:
        The parameter's Output.
    """
    node = Parameter(element_type, shape).build(name=name, provenance=user_frame(2))
    return node.outputs[0]


_SUMMARY_LIMIT = 8


@opclass
class Constant(Op):
    """A literal tensor. ``value`` is a read-only numpy array of exactly the element type."""

    element_type: ElementType
    shape: Shape
    value: np.ndarray
    num_inputs = 0
    differentiable = False

    def __post_init__(self) -> None:
        element_type = as_element_type(self.element_type)
        shape = as_shape(self.shape)
        value = np.asarray(self.value)
        if value.dtype != element_type.dtype:
            raise OpTypeError(f"value has dtype {value.dtype}, expected {element_type.dtype}")
        if value.shape != shape:  # never broadcast here: a file could ask for terabytes
            raise OpTypeError(f"value has shape {value.shape}, expected {shape}")
        value = np.array(value, order="C")  # a private copy (ascontiguousarray makes 0-d 1-d)
        value.flags.writeable = False
        set_attr(self, "element_type", element_type)
        set_attr(self, "shape", shape)
        set_attr(self, "value", value)

    def infer(self) -> TensorType:
        return TensorType(self.element_type, self.shape)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Constant)
            and other.element_type is self.element_type
            and other.shape == self.shape
            and (other.value is self.value or np.array_equal(_bytes(other), _bytes(self)))
        )

    def __hash__(self) -> int:
        # the first 256 bytes, read in place: ``tobytes()[:256]`` copied the whole value
        # first (44 MB of weights per ResNet-18 compile in CSE, 2026-11-26)
        return hash((self.element_type.name, self.shape, _bytes(self)[:256].tobytes()))

    def format_attributes(self) -> str:
        if self.value.size <= _SUMMARY_LIMIT:
            shown = self.value.tolist()
            if self.element_type in (et.f16, et.bf16):
                shown = self.value.astype(np.float32).tolist()
            return f"value={format_value(shown)}"
        return f"value=<{self.value.size} values>"


def _bytes(constant: Constant) -> np.ndarray:
    """The value's bytes as a flat uint8 view (no copy: the value is C-contiguous); equal
    bytes, not equal numbers, make equal constants (NaN payloads, -0.0)."""
    return constant.value.reshape(-1).view(np.uint8)


def constant(value: Any, element_type: Any = None) -> Output:
    """A Constant holding ``value``.

    Args:
        value: a Python scalar, nested list, or numpy array.
        element_type: the element type; when omitted it comes from the numpy dtype (Python
            floats give f32, ints i64, bools boolean).

    Raises:
        OpTypeError: the value does not fit the type (out of range, fractional for an integer
            type, non-boolean for boolean) — never a silent wrap or truncation.
    """
    array = _to_array(value, element_type)
    node = Constant(et.from_dtype(array.dtype), array.shape, array).build(provenance=user_frame(2))
    return node.outputs[0]


def _to_array(value: Any, element_type: Any) -> np.ndarray:
    raw = value if isinstance(value, np.ndarray | np.generic) else None
    try:
        source = np.asarray(value)
    except (ValueError, TypeError) as error:
        raise OpTypeError(f"constant: cannot read {value!r:.60} as an array ({error})") from None
    if element_type is None:
        target = _default_type(source, raw is not None)
    else:
        target = as_element_type(element_type)
    check_fits(source, target)
    return source.astype(target.dtype)


def _default_type(source: np.ndarray, is_numpy: bool) -> ElementType:
    kind = source.dtype.kind
    if not is_numpy and kind in "fiub":
        return {"f": et.f32, "i": et.i64, "u": et.i64, "b": et.boolean}[kind]
    if kind not in "fiub" and source.dtype != et.bf16.dtype:
        raise OpTypeError(f"constant: values of dtype {source.dtype} are not numbers or booleans")
    return et.from_dtype(source.dtype)


def check_fits(source: np.ndarray, target: ElementType) -> None:
    """Raise ``OpTypeError`` unless every value of ``source`` is exactly representable in kind
    and range by ``target`` (floats may round, but not overflow)."""
    kind = source.dtype.kind
    if source.dtype == et.bf16.dtype:
        kind = "f"
    if kind not in "fiub":
        raise OpTypeError(f"constant: values of dtype {source.dtype} are not numbers or booleans")
    if target.is_boolean:
        if kind != "b":
            raise OpTypeError(
                f"constant: boolean needs True/False values, got dtype {source.dtype}"
            )
        return
    if kind == "b":
        raise OpTypeError(f"constant: {target.name} needs numbers, got booleans")
    if source.size == 0:
        return
    if target.is_integral:
        _check_integral(source, target)
    else:
        finite = source[np.isfinite(source)] if kind == "f" else source
        if finite.size:
            limit = float(ml_dtypes.finfo(target.dtype).max)  # np.finfo rejects bf16
            biggest = float(np.max(np.abs(finite.astype(np.float64))))
            if biggest > limit:
                raise OpTypeError(
                    f"constant: value {biggest:g} is out of range for {target.name} "
                    f"(largest finite value {limit:g})"
                )


def _check_integral(source: np.ndarray, target: ElementType) -> None:
    info = np.iinfo(target.dtype)
    if source.dtype.kind == "f":
        values = source.astype(np.float64)
        if not np.all(np.isfinite(values)) or np.any(values != np.floor(values)):
            bad = values[~np.isfinite(values) | (values != np.floor(values))].flat[0]
            raise OpTypeError(f"constant: {target.name} needs integral values, got {float(bad)!r}")
        low, high = float(values.min()), float(values.max())
    else:
        low, high = int(source.min()), int(source.max())
    if low < info.min or high > info.max:
        bad = low if low < info.min else high
        shown = int(bad) if math.isfinite(bad) else bad
        raise OpTypeError(
            f"constant: value {shown} is out of range for {target.name} [{info.min}, {info.max}]"
        )
