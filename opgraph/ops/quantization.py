"""Linear quantization (ONNX QuantizeLinear / DequantizeLinear), per tensor or per axis.

``quantize_linear``: ``y = saturate(round_half_to_even(x / scale) + zero_point)``;
``dequantize_linear``: ``y = (x - zero_point) · scale``. ``scale`` and ``zero_point`` are
scalars (per-tensor, ``axis=None``) or 1-D along ``axis`` (per-axis). ONNX 21's blocked
quantization (``block_size``) is not supported.

``matmul_integer`` and ``conv_integer`` (ONNX MatMulInteger / ConvInteger) are the exact
integer products of 8-bit operands minus their zero points, as i32: what a quantized model's
``matmul(dequantize(a), dequantize(w))`` computes before its scales (the pass
``fuse_quantized_products`` rewrites one into the other).

Gradients: ``QuantizeLinear`` is marked not differentiable (its derivative is zero almost
everywhere and its output is an integer). A straight-through estimator is a graph choice, not
an op property: ``x + stop_gradient(dequantize_linear(quantize_linear(x, …), …) - x)``.
``DequantizeLinear`` is differentiable in ``scale`` (``Σ ct · (x - zero_point)``).
"""

from __future__ import annotations

from typing import Any

from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import DimShape, as_int, as_int_tuple, normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import require_element_type
from opgraph.ops.conversion import convert
from opgraph.ops.convolution import Convolution
from opgraph.ops.elementwise import multiply, subtract
from opgraph.ops.movement import broadcast
from opgraph.ops.reduction import reduce_sum

__all__ = [
    "QuantizationBase",
    "QuantizeLinear",
    "quantize_linear",
    "DequantizeLinear",
    "dequantize_linear",
    "MatMulInteger",
    "matmul_integer",
    "ConvInteger",
    "conv_integer",
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


# ------------------------------------------------------------------- integer products
#: Element types of the integer products' operands (ONNX MatMulInteger / ConvInteger).
BYTES = (et.u8, et.i8)


def _check_zero_point(name: str, point: TensorType, of: TensorType, per: Dim | None) -> None:
    require(
        point.element_type is of.element_type,
        f"{name} element type {point.element_type.name} differs from its operand's "
        f"{of.element_type.name}",
    )
    allowed: tuple[DimShape, ...] = ((),) if per is None else ((), (per,))
    what = "a scalar" if per is None else f"a scalar or shape [{per}]"
    require(point.shape in allowed, f"{name} must be {what}, got {point}")


@opclass
class MatMulInteger(Op):
    """``(a - a_zero_point) @ (b - b_zero_point)`` accumulated exactly, as i32 (ONNX
    MatMulInteger with a 2-D right operand).

    Inputs: ``a`` (u8 or i8, rank >= 2, ``(..., M, K)``), ``b`` (u8 or i8, ``(K, N)``),
    ``a_zero_point`` (a scalar of a's type), ``b_zero_point`` (b's type: a scalar or one per
    column, ``(N,)``). The result ``(..., M, N)`` is the exact integer sum wrapped to 32 bits
    (two's complement; it cannot wrap for ``K < 33025``).
    """

    contracting = True
    differentiable = False
    num_inputs = 4

    def infer(
        self, a: TensorType, b: TensorType, a_zero: TensorType, b_zero: TensorType
    ) -> TensorType:
        require_element_type(a, BYTES, "a")
        require_element_type(b, BYTES, "b")
        require(a.rank >= 2, f"a must have rank >= 2 (..., M, K), got {a}")
        require(b.rank == 2, f"b must be a matrix (K, N), got {b}")
        require(
            a.shape[-1] == b.shape[0],
            f"contracted dimensions differ: a {a} has {a.shape[-1]} columns, b {b} has "
            f"{b.shape[0]} rows",
        )
        _check_zero_point("a_zero_point", a_zero, a, None)
        _check_zero_point("b_zero_point", b_zero, b, b.shape[1])
        return TensorType(et.i32, (*a.shape[:-1], b.shape[1]))


def matmul_integer(
    a: Output, b: Output, a_zero_point: Output | None = None, b_zero_point: Output | None = None
) -> Output:
    """The exact integer product ``(a - a_zero_point) @ (b - b_zero_point)`` as i32.

    Args:
        a: u8 or i8 ``(..., M, K)``.
        b: u8 or i8 ``(K, N)``.
        a_zero_point: a scalar of ``a``'s type (default 0).
        b_zero_point: ``b``'s type, a scalar or ``(N,)`` (default 0).

    Returns:
        i32 ``(..., M, N)``.

    Raises:
        OpTypeError: element types or shapes do not fit.
    """
    a_zero = a_zero_point if a_zero_point is not None else constant(0, a.element_type)
    b_zero = b_zero_point if b_zero_point is not None else constant(0, b.element_type)
    return MatMulInteger()(a, b, a_zero, b_zero)


@opclass
class ConvInteger(Op):
    """2-D (or 1-D) convolution of ``x - x_zero_point`` with ``w - w_zero_point``,
    accumulated exactly as i32 (ONNX ConvInteger).

    Inputs: ``x`` (u8 or i8, ``(N, C, d...)``), ``w`` (u8 or i8, ``(O, C / groups, f...)``),
    ``x_zero_point`` (a scalar of x's type), ``w_zero_point`` (w's type: a scalar or one per
    output channel, ``(O,)``). Padding adds zeros to ``x - x_zero_point`` (positions whose
    data is ``x_zero_point``). Attributes as :class:`~opgraph.ops.convolution.Convolution`
    (no data dilation); the result ``(N, O, out...)`` is wrapped to 32 bits like
    :class:`MatMulInteger`.
    """

    contracting = True
    differentiable = False
    num_inputs = 4
    strides: tuple[int, ...] | None = None
    dilations: tuple[int, ...] | None = None
    padding_below: tuple[int, ...] | None = None
    padding_above: tuple[int, ...] | None = None
    groups: int = 1

    def __post_init__(self) -> None:
        for name in ("strides", "dilations", "padding_below", "padding_above"):
            value = getattr(self, name)
            if value is not None:
                set_attr(self, name, as_int_tuple(value, name))
        set_attr(self, "groups", as_int(self.groups, "groups"))

    def float_convolution(self) -> Convolution:
        """The Convolution with the same windows (its type rule and output shape)."""
        return Convolution(
            self.strides, self.dilations, self.padding_below, self.padding_above, None, self.groups
        )

    def canonicalize(
        self, x: TensorType, w: TensorType, xz: TensorType, wz: TensorType
    ) -> ConvInteger:
        conv = self.float_convolution().canonicalize(_as_float(x), _as_float(w))
        return ConvInteger(
            conv.strides, conv.dilations, conv.padding_below, conv.padding_above, conv.groups
        )

    def infer(
        self, x: TensorType, w: TensorType, x_zero: TensorType, w_zero: TensorType
    ) -> TensorType:
        require_element_type(x, BYTES, "x")
        require_element_type(w, BYTES, "w")
        require(x.rank >= 3, f"x must be (N, C, d...), got {x}")
        fx, fw = _as_float(x), _as_float(w)
        out = self.float_convolution().canonicalize(fx, fw).infer(fx, fw)
        _check_zero_point("x_zero_point", x_zero, x, None)
        _check_zero_point("w_zero_point", w_zero, w, w.shape[0])
        return TensorType(et.i32, out.shape)


def _as_float(t: TensorType) -> TensorType:
    return TensorType(et.f32, t.shape)


def conv_integer(
    x: Output,
    w: Output,
    x_zero_point: Output | None = None,
    w_zero_point: Output | None = None,
    strides: Any = None,
    dilations: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    groups: int = 1,
) -> Output:
    """The exact integer convolution of ``x - x_zero_point`` with ``w - w_zero_point`` as i32.

    Args:
        x: u8 or i8 ``(N, C, d...)``.
        w: u8 or i8 ``(O, C / groups, f...)``.
        x_zero_point: a scalar of ``x``'s type (default 0; padding reads it).
        w_zero_point: ``w``'s type, a scalar or ``(O,)`` (default 0).
        strides, dilations, padding_below, padding_above, groups: as ``convolution``.

    Returns:
        i32 ``(N, O, out...)``.

    Raises:
        OpTypeError: element types, shapes or window attributes do not fit.
    """
    x_zero = x_zero_point if x_zero_point is not None else constant(0, x.element_type)
    w_zero = w_zero_point if w_zero_point is not None else constant(0, w.element_type)
    op = ConvInteger(strides, dilations, padding_below, padding_above, groups)
    return op(x, w, x_zero, w_zero)
