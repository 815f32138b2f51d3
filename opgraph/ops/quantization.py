"""Linear quantization (ONNX QuantizeLinear / DequantizeLinear), per tensor or per axis.

``quantize_linear``: ``y = saturate(round_half_to_even(x / scale) + zero_point)``;
``dequantize_linear``: ``y = (x - zero_point) · scale``. ``scale`` and ``zero_point`` are
scalars (per-tensor, ``axis=None``) or 1-D along ``axis`` (per-axis). ONNX 21's blocked
quantization (``block_size``) is not supported.

Gradients: ``QuantizeLinear`` is marked not differentiable (its derivative is zero almost
everywhere and its output is an integer). A straight-through estimator is a graph choice, not
an op property: ``x + stop_gradient(dequantize_linear(quantize_linear(x, …), …) - x)``.
``DequantizeLinear`` is differentiable in ``scale`` (``Σ ct · (x - zero_point)``).
"""

from __future__ import annotations

from typing import Any

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import DimShape, as_int, normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import require_element_type
from opgraph.ops.conversion import convert
from opgraph.ops.elementwise import multiply, subtract
from opgraph.ops.movement import broadcast
from opgraph.ops.reduction import reduce_sum

__all__ = [
    "QuantizationBase",
    "QuantizeLinear",
    "quantize_linear",
    "DequantizeLinear",
    "dequantize_linear",
]

#: Integer types a value can be quantized to (ONNX 21 adds 16-bit ones to u8/i8).
QUANTIZED = (et.u8, et.i8, et.u16, et.i16)
#: Integer types DequantizeLinear reads (ONNX also dequantizes i32, e.g. a bias).
DEQUANTIZABLE = (*QUANTIZED, et.i32)


class QuantizationBase(Op):
    """Family base: ``axis`` (None: per tensor; canonical: non-negative)."""

    __slots__ = ()
    num_inputs = 3
    axis: int | None

    def _normalise_axis(self) -> None:
        if self.axis is not None:
            set_attr(self, "axis", as_int(self.axis, "axis"))

    def _canonical_axis(self, x: TensorType) -> int | None:
        return None if self.axis is None else normalize_axis(self.axis, x.rank)

    def check_parameters(self, x: TensorType, scale: TensorType, zero_point: TensorType) -> None:
        """scale and zero point: scalars (per tensor) or ``(x.shape[axis],)`` (per axis)."""
        expected: DimShape = () if self.axis is None else (x.shape[self.axis],)
        what = (
            "a scalar (per-tensor: axis=None)"
            if self.axis is None
            else (f"shape [{expected[0]}] (x's axis {self.axis})")
        )
        require(scale.shape == expected, f"scale must be {what}, got {scale}")
        require(zero_point.shape == expected, f"zero_point must be {what}, got {zero_point}")


@opclass
class QuantizeLinear(QuantizationBase):
    """``saturate(round_half_to_even(x / scale) + zero_point)`` in ``zero_point``'s type.

    Inputs: ``x`` (floating point), ``scale`` (x's element type), ``zero_point`` (u8, i8, u16
    or i16: the result type). ``element_type``, when given, must equal ``zero_point``'s type;
    the canonical op always names it.
    """

    axis: int | None = None
    element_type: ElementType | None = None
    differentiable = False

    def __post_init__(self) -> None:
        self._normalise_axis()
        if self.element_type is not None:
            set_attr(self, "element_type", as_element_type(self.element_type))

    def canonicalize(self, x: TensorType, scale: TensorType, zp: TensorType) -> QuantizeLinear:
        return QuantizeLinear(self._canonical_axis(x), self.element_type or zp.element_type)

    def infer(self, x: TensorType, scale: TensorType, zero_point: TensorType) -> TensorType:
        require_element_type(x, et.FLOATS, "x")
        require(
            scale.element_type is x.element_type,
            f"scale element type {scale.element_type.name} differs from x's {x.element_type.name}",
        )
        require_element_type(zero_point, QUANTIZED, "zero_point")
        assert self.element_type is not None
        require(
            self.element_type is zero_point.element_type,
            f"element_type {self.element_type.name} differs from zero_point's "
            f"{zero_point.element_type.name}",
        )
        self.check_parameters(x, scale, zero_point)
        return TensorType(zero_point.element_type, x.shape)


def quantize_linear(
    x: Output,
    scale: Output,
    zero_point: Output | None = None,
    axis: int | None = None,
    element_type: Any = None,
) -> Output:
    """Quantize ``x`` (ONNX QuantizeLinear: round half to even, then saturate).

    Args:
        x: floating-point values.
        scale: of ``x``'s element type; a scalar, or ``(x.shape[axis],)`` with ``axis``.
        zero_point: u8/i8/u16/i16, shaped like ``scale``; when omitted, zeros of
            ``element_type``.
        axis: None for per-tensor quantization, else the axis ``scale`` runs along.
        element_type: the result type when ``zero_point`` is omitted (default u8); when both
            are given they must agree.

    Returns:
        The quantized values, shaped like ``x``, of ``zero_point``'s element type.

    Raises:
        OpTypeError: element types or shapes of scale and zero point do not fit.
    """
    if zero_point is None:
        zero_point = _zeros(element_type if element_type is not None else et.u8, scale)
    return QuantizeLinear(axis, element_type)(x, scale, zero_point)


def _zeros(element_type: Any, like: Output) -> Output:
    target = as_element_type(element_type)
    if target not in QUANTIZED:
        names = ", ".join(t.name for t in QUANTIZED)
        raise OpTypeError(f"QuantizeLinear: element_type {target.name} is not one of {names}")
    zero = constant(0, target)
    return broadcast(zero, like.shape, tuple(range(like.rank))) if like.rank else zero


@opclass
class DequantizeLinear(QuantizationBase):
    """``(x - zero_point) · scale`` in ``scale``'s (floating-point) type.

    Inputs: ``x`` (u8, i8, u16, i16 or i32), ``zero_point`` of x's type, ``scale``. The
    difference is exact (computed in 64-bit integers) before the multiplication.
    """

    axis: int | None = None

    def __post_init__(self) -> None:
        self._normalise_axis()

    def canonicalize(self, x: TensorType, scale: TensorType, zp: TensorType) -> DequantizeLinear:
        return DequantizeLinear(self._canonical_axis(x))

    def infer(self, x: TensorType, scale: TensorType, zero_point: TensorType) -> TensorType:
        require_element_type(x, DEQUANTIZABLE, "x")
        require_element_type(scale, et.FLOATS, "scale")
        require(
            zero_point.element_type is x.element_type,
            f"zero_point element type {zero_point.element_type.name} differs from x's "
            f"{x.element_type.name}",
        )
        self.check_parameters(x, scale, zero_point)
        return TensorType(scale.element_type, x.shape)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, _, zero_point = inputs
        kept = () if self.axis is None else (self.axis,)
        others = tuple(a for a in range(x.rank) if a not in kept)
        wide_x = convert(x, et.i64)
        shifted = subtract(wide_x, broadcast(convert(zero_point, et.i64), x.shape, others))
        d_scale = reduce_sum(multiply(ct, convert(shifted, ct.element_type)), others)
        return None, d_scale, None


def dequantize_linear(
    x: Output, scale: Output, zero_point: Output | None = None, axis: int | None = None
) -> Output:
    """Dequantize ``x`` (ONNX DequantizeLinear): ``(x - zero_point) · scale``.

    Args:
        x: u8, i8, u16, i16 or i32 values.
        scale: floating point; a scalar, or ``(x.shape[axis],)`` with ``axis``.
        zero_point: of ``x``'s element type, shaped like ``scale`` (default zeros).
        axis: None for per-tensor, else the axis ``scale`` runs along.

    Returns:
        Values of ``scale``'s element type, shaped like ``x``.

    Raises:
        OpTypeError: element types or shapes do not fit.
    """
    if zero_point is None:
        zero = constant(0, x.element_type)
        zero_point = broadcast(zero, scale.shape, tuple(range(scale.rank))) if scale.rank else zero
    return DequantizeLinear(axis)(x, scale, zero_point)
