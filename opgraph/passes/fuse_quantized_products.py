"""Quantized products: ``matmul`` / ``convolution`` of dequantized 8-bit values become exact
integer products (``matmul_integer`` / ``conv_integer``) scaled once, in f32.

A QDQ model (ONNX QuantizeLinear/DequantizeLinear around MatMul and Conv, as onnxruntime's
quantization tool writes it) computes ``matmul(dequantize(a), dequantize(w))`` with ``a`` the
8-bit activations and ``w`` constant 8-bit weights. Since dequantization is
``(q - zero_point) · scale``, the product is

    ``convert(matmul_integer(a, w, a_zero, w_zero), f32) · (a_scale · w_scale)``

with the per-tensor activation scale and a per-tensor or per-output-channel weight scale. The
integer product is exact, so the rewritten value differs from the f32 original only by the
original's own rounding (it is the more exact of the two). Backends then run the integer
product on 8-bit kernels (the CPU's VNNI ``vpdpbusd``) and fuse the scaling, the bias, the
activation and the next ``quantize_linear`` into its epilogue.
"""

from __future__ import annotations

from opgraph.core import element_type as et
from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.ops.conversion import convert
from opgraph.ops.convolution import Convolution
from opgraph.ops.elementwise import multiply
from opgraph.ops.linalg import MatMul
from opgraph.ops.movement import broadcast
from opgraph.ops.quantization import BYTES, DequantizeLinear, conv_integer, matmul_integer
from opgraph.pattern import P, Rules, rewrite
from opgraph.pattern.rewrite import MatchContext

__all__ = ["QUANTIZED_PRODUCT_RULES", "fuse_quantized_products"]


def _activation(value: Output) -> bool:
    """A per-tensor f32 dequantization of 8-bit values."""
    op = value.op
    assert isinstance(op, DequantizeLinear)
    return op.axis is None and value.element_type is et.f32 and _bytes(value.node.inputs[0])


def _weights_along(axis: int) -> object:
    """A dequantization of constant 8-bit weights, per tensor or along ``axis``."""

    def accept(value: Output) -> bool:
        op = value.op
        assert isinstance(op, DequantizeLinear)
        return op.axis in (None, axis) and value.element_type is et.f32

    return accept


def _bytes(value: Output) -> bool:
    return value.element_type in BYTES


def _scale(a_scale: Output, w_scale: Output) -> Output:
    """``a_scale · w_scale``: a scalar, or one per output channel."""
    if w_scale.rank == 0:
        return multiply(a_scale, w_scale)
    return multiply(broadcast(a_scale, w_scale.shape, (0,)), w_scale)


def _scaled(product: Output, scale: Output, channel: int) -> Output:
    """``convert(product, f32)`` times ``scale`` spread along ``channel``."""
    wide = convert(product, et.f32)
    kept = () if scale.rank == 0 else (channel,)
    axes = tuple(axis for axis in range(product.rank) if axis not in kept)
    return multiply(wide, broadcast(scale, product.shape, axes))


def _matmul(ctx: MatchContext, da: Output, dw: Output, w: Output) -> Output | None:
    a, a_scale, a_zero = da.node.inputs
    _, w_scale, w_zero = dw.node.inputs
    if a.rank < 2 or w.rank != 2:
        return None
    product = matmul_integer(a, w, a_zero, w_zero)
    return _scaled(product, _scale(a_scale, w_scale), product.rank - 1)


def _convolution(ctx: MatchContext, dx: Output, dw: Output, w: Output) -> Output | None:
    op = ctx.root.op
    assert isinstance(op, Convolution)
    if op.data_dilations is not None and any(d != 1 for d in op.data_dilations):
        return None
    x, x_scale, x_zero = dx.node.inputs
    _, w_scale, w_zero = dw.node.inputs
    product = conv_integer(
        x, w, x_zero, w_zero, op.strides, op.dilations, op.padding_below, op.padding_above,
        op.groups,
    )  # fmt: skip
    return _scaled(product, _scale(x_scale, w_scale), 1)


def _dequantized_weights(axis: int) -> P:
    return P(
        DequantizeLinear,
        P.const(name="w", where=_bytes, broadcast=False),
        P.any(),
        P.any(),
        name="dw",
        where=_weights_along(axis),  # type: ignore[arg-type]
    )


_ACTIVATIONS = P(DequantizeLinear, name="da", where=_activation)
_DATA = P(DequantizeLinear, name="dx", where=_activation)

#: The rewrites, as data: a product of a dequantized activation and dequantized constant
#: weights (per tensor, or per output channel: MatMul's columns, Conv's filters).
QUANTIZED_PRODUCT_RULES = Rules(
    [
        (P(MatMul, _ACTIVATIONS, _dequantized_weights(1)), _matmul),
        (P(Convolution, _DATA, _dequantized_weights(0)), _convolution),
    ]
)


def fuse_quantized_products(fn: Function) -> Function:
    """Rewrite products of dequantized 8-bit values into exact integer products scaled in
    f32 (:data:`QUANTIZED_PRODUCT_RULES`; see the module docstring).

    Needs: nothing (it runs before constant folding, which would fold the dequantization of
    constant weights into f32 weights). Guarantees: no ``matmul`` (2-D weights) or 2-D/1-D
    ``convolution`` (no data dilation) reads a per-tensor f32 dequantization of 8-bit values
    and a dequantization of constant 8-bit weights; the value changes only by the f32
    rounding of the original product.
    """
    return rewrite(fn, QUANTIZED_PRODUCT_RULES)
