"""Elementwise ATen overloads: unary math, arithmetic, comparisons, logic, where, clamp.

Binary ops follow ATen type promotion (Python scalars included) and broadcasting, both made
explicit with converts, typed constants and broadcasts. Float-valued unary ops on integer
input compute in the default float type (ATen's INT_TO_FLOAT).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from opgraph import ops
from opgraph.builders.broadcasting import numpy_broadcast
from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.frontends.torch.context import NodeContext, coerce, fill, literal
from opgraph.frontends.torch.converters.common import as_bool, overloads, promoted, scale
from opgraph.frontends.torch.promotion import Operand, float_type, result_type
from opgraph.frontends.torch.registry import aten_op

Unary = Callable[[Output], Output]
Binary = Callable[[Output, Output], Output]


# ----------------------------------------------------------------- compositions (exact)
def trunc(x: Output) -> Output:
    """Round toward zero."""
    if not x.element_type.is_real:
        return x
    negative = ops.less(x, fill(0, x.element_type, x.shape))
    return ops.select(negative, ops.ceiling(x), ops.floor(x))


def expm1(x: Output) -> Output:
    """``exp(x) - 1`` without cancellation near 0 (Kahan: ``(u - 1) · x / log u``)."""
    u = ops.exp(x)
    one = fill(1, x.element_type, x.shape)
    um1 = ops.subtract(u, one)
    ratio = ops.divide(ops.multiply(um1, x), ops.log(u))
    tiny = ops.equal(u, one)
    saturated = ops.logical_or(ops.equal(um1, fill(-1, x.element_type, x.shape)), ops.is_inf(u))
    return ops.select(tiny, x, ops.select(saturated, um1, ratio))


def log1p(x: Output) -> Output:
    """``log(1 + x)`` without cancellation near 0 (Kahan: ``log u · x / (u - 1)``)."""
    one = fill(1, x.element_type, x.shape)
    u = ops.add(x, one)
    ratio = ops.divide(ops.multiply(ops.log(u), x), ops.subtract(u, one))
    return ops.select(ops.equal(u, one), x, ops.select(ops.is_inf(u), ops.log(u), ratio))


def _log_base(base: float) -> Unary:
    def log_base(x: Output) -> Output:
        return scale(ops.log(x), 1 / math.log(base))

    return log_base


def _rsqrt(x: Output) -> Output:
    return ops.divide(fill(1, x.element_type, x.shape), ops.sqrt(x))


def _exp2(x: Output) -> Output:
    return ops.power(fill(2, x.element_type, x.shape), x)


def _frac(x: Output) -> Output:
    return ops.subtract(x, trunc(x))


def _square(x: Output) -> Output:
    return ops.multiply(x, x)


def _not(x: Output) -> Output:
    return ops.logical_not(as_bool(x))


def _bitwise_not(x: Output) -> Output:
    return ops.logical_not(x) if x.element_type.is_boolean else ops.bitwise_not(x)


def _is_pos_inf(x: Output) -> Output:
    return ops.equal(x, fill(math.inf, x.element_type, x.shape))


def _is_neg_inf(x: Output) -> Output:
    return ops.equal(x, fill(-math.inf, x.element_type, x.shape))


# ------------------------------------------------------------------------- unary tables
#: Same element type in and out (integers pass through rounding ops, as in ATen).
_SAME: dict[str, Unary] = {
    "abs.default": ops.abs,
    "neg.default": ops.negative,
    "relu.default": ops.relu,
    "ceil.default": ops.ceiling,
    "floor.default": ops.floor,
    "round.default": ops.round,
    "trunc.default": trunc,
    "frac.default": _frac,
    "sign.default": ops.sign,
    "sgn.default": ops.sign,
    "square.default": _square,
    "bitwise_not.default": _bitwise_not,
    "positive.default": lambda x: x,
}
#: Float results; integer inputs compute in the default float type.
_FLOAT: dict[str, Unary] = {
    "exp.default": ops.exp,
    "exp2.default": _exp2,
    "expm1.default": expm1,
    "log.default": ops.log,
    "log1p.default": log1p,
    "log2.default": _log_base(2),
    "log10.default": _log_base(10),
    "sqrt.default": ops.sqrt,
    "rsqrt.default": _rsqrt,
    "reciprocal.default": ops.reciprocal,
    "sigmoid.default": ops.sigmoid,
    "tanh.default": ops.tanh,
    "erf.default": ops.erf,
    "sin.default": ops.sin,
    "cos.default": ops.cos,
    "tan.default": ops.tan,
    "asin.default": ops.asin,
    "acos.default": ops.acos,
    "atan.default": ops.atan,
    "sinh.default": ops.sinh,
    "cosh.default": ops.cosh,
    "asinh.default": ops.asinh,
    "acosh.default": ops.acosh,
    "atanh.default": ops.atanh,
}
#: Boolean results.
_PREDICATE: dict[str, Unary] = {
    "logical_not.default": _not,
    "isnan.default": ops.is_nan,
    "isinf.default": ops.is_inf,
    "isfinite.default": ops.is_finite,
    "isposinf.default": _is_pos_inf,
    "isneginf.default": _is_neg_inf,
}


def _unary(builder: Unary, to_float: bool) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        x = ctx.tensor("self")
        if to_float:
            x = coerce(x, float_type(x.element_type))
        return builder(x)

    return convert


def _predicate(builder: Unary) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        x = ctx.tensor("self")
        if x.element_type.is_boolean or x.element_type.is_integral:
            if builder in (ops.is_nan, ops.is_inf, _is_pos_inf, _is_neg_inf):
                return fill(False, et.boolean, x.shape)
            if builder is ops.is_finite:
                return fill(True, et.boolean, x.shape)
        return builder(x)

    return convert


for _name, _unary_fn in _SAME.items():
    aten_op(*overloads(_name))(_unary(_unary_fn, to_float=False))
for _name, _unary_fn in _FLOAT.items():
    aten_op(*overloads(_name))(_unary(_unary_fn, to_float=True))
for _name, _unary_fn in _PREDICATE.items():
    aten_op(*overloads(_name))(_predicate(_unary_fn))


@aten_op(*overloads("round.decimals"))
def _round_decimals(ctx: NodeContext) -> Output:
    x, decimals = ctx.tensor("self"), ctx.integer("decimals")
    if not x.element_type.is_real or decimals == 0:
        return ops.round(x) if x.element_type.is_real else x
    factor = fill(10.0**decimals, x.element_type, x.shape)
    return ops.divide(ops.round(ops.multiply(x, factor)), factor)


# ------------------------------------------------------------------------ binary tables
def _true_divide(a: Output, b: Output) -> Output:
    return ops.divide(a, b)


def _fmod(a: Output, b: Output) -> Output:
    return ops.mod(a, b, fmod=True)


def _logical(builder: Binary) -> Binary:
    def logical(a: Output, b: Output) -> Output:
        return builder(as_bool(a), as_bool(b))

    return logical


def _bitwise(bool_builder: Binary, int_builder: Binary) -> Binary:
    def bitwise(a: Output, b: Output) -> Output:
        return (bool_builder if a.element_type.is_boolean else int_builder)(a, b)

    return bitwise


#: name → (builder, first operand name, second operand name, kind); kind "same" computes
#: and returns the promoted type, "float" computes in its float type (true division),
#: "bool" computes in the promoted type and returns booleans.
_BINARY: dict[str, tuple[Binary, str, str, str]] = {}


def _table(builder: Binary, kind: str, *names: str, a: str = "self", b: str = "other") -> None:
    for name in names:
        _BINARY[name] = (builder, a, b, kind)


_table(ops.multiply, "same", "mul.Tensor", "mul.Scalar")
_table(_true_divide, "float", "div.Tensor", "div.Scalar")
_table(ops.maximum, "same", "maximum.default", "fmax.default")
_table(ops.minimum, "same", "minimum.default", "fmin.default")
_table(ops.mod, "same", "remainder.Tensor", "remainder.Scalar", "remainder.Scalar_Tensor")
_table(_fmod, "same", "fmod.Tensor", "fmod.Scalar")
_table(ops.power, "same", "pow.Tensor_Tensor", "pow.Scalar", b="exponent")
_table(ops.power, "same", "pow.Tensor_Scalar", b="exponent")
_table(ops.atan2, "float", "atan2.default")
_table(ops.equal, "bool", "eq.Tensor", "eq.Scalar")
_table(ops.not_equal, "bool", "ne.Tensor", "ne.Scalar")
_table(ops.less, "bool", "lt.Tensor", "lt.Scalar")
_table(ops.less_equal, "bool", "le.Tensor", "le.Scalar")
_table(ops.greater, "bool", "gt.Tensor", "gt.Scalar")
_table(ops.greater_equal, "bool", "ge.Tensor", "ge.Scalar")
_table(_logical(ops.logical_and), "same", "logical_and.default")
_table(_logical(ops.logical_or), "same", "logical_or.default")
_table(_logical(ops.logical_xor), "same", "logical_xor.default")
_table(
    _bitwise(ops.logical_and, ops.bitwise_and), "same", "bitwise_and.Tensor", "bitwise_and.Scalar"
)
_table(_bitwise(ops.logical_or, ops.bitwise_or), "same", "bitwise_or.Tensor", "bitwise_or.Scalar")
_table(
    _bitwise(ops.logical_xor, ops.bitwise_xor), "same", "bitwise_xor.Tensor", "bitwise_xor.Scalar"
)


def _binary(builder: Binary, a: str, b: str, kind: str) -> Callable[[NodeContext], Output]:
    def convert(ctx: NodeContext) -> Output:
        x, y = ctx.operand(a), ctx.operand(b)
        target = result_type([x, y])
        return builder(
            *promoted(x, y, element_type=float_type(target) if kind == "float" else target)
        )

    return convert


for _name, (_binary_fn, _a, _b, _kind) in _BINARY.items():
    aten_op(*overloads(_name))(_binary(_binary_fn, _a, _b, _kind))


@aten_op(*overloads("add.Tensor", "add.Scalar"))
def _add(ctx: NodeContext) -> Output:
    x, y = promoted(ctx.operand("self"), ctx.operand("other"))
    return ops.add(x, scale(y, ctx["alpha"]))


@aten_op(*overloads("sub.Tensor", "sub.Scalar"))
def _sub(ctx: NodeContext) -> Output:
    x, y = promoted(ctx.operand("self"), ctx.operand("other"))
    return ops.subtract(x, scale(y, ctx["alpha"]))


@aten_op(*overloads("rsub.Tensor", "rsub.Scalar"))
def _rsub(ctx: NodeContext) -> Output:
    x, y = promoted(ctx.operand("self"), ctx.operand("other"))
    return ops.subtract(y, scale(x, ctx["alpha"]))


@aten_op(*overloads("div.Tensor_mode", "div.Scalar_mode"))
def _div_mode(ctx: NodeContext) -> Output:
    x, y = ctx.operand("self"), ctx.operand("other")
    mode = ctx["rounding_mode"]
    if mode is None:
        a, b = promoted(x, y, element_type=float_type(result_type([x, y])))
        return ops.divide(a, b)
    a, b = promoted(x, y)
    if a.element_type.is_real:
        quotient = ops.divide(a, b)
        return ops.floor(quotient) if mode == "floor" else trunc(quotient)
    return ops.divide(a, b, floor_division=(mode == "floor"))


@aten_op(*overloads("where.self", "where.ScalarSelf", "where.ScalarOther", "where.Scalar"))
def _where(ctx: NodeContext) -> Output:
    condition = ctx.operand("condition")
    x, y = ctx.operand("self"), ctx.operand("other")
    target = result_type([x, y])
    if isinstance(condition, Output):
        c = as_bool(condition)
    else:
        c = literal(bool(condition), et.boolean)
    return ops.select(*numpy_broadcast(c, coerce(x, target), coerce(y, target)))


@aten_op(*overloads("clamp.default", "clamp.Tensor"))
def _clamp(ctx: NodeContext) -> Output:
    return clamp(ctx.tensor("self"), ctx["min"], ctx["max"])


@aten_op(*overloads("clamp_min.default", "clamp_min.Tensor"))
def _clamp_min(ctx: NodeContext) -> Output:
    return clamp(ctx.tensor("self"), ctx["min"], None)


@aten_op(*overloads("clamp_max.default", "clamp_max.Tensor"))
def _clamp_max(ctx: NodeContext) -> Output:
    return clamp(ctx.tensor("self"), None, ctx["max"])


@aten_op(*overloads("hardtanh.default"))
def _hardtanh(ctx: NodeContext) -> Output:
    return clamp(ctx.tensor("self"), ctx["min_val"], ctx["max_val"])


def clamp(x: Output, low: Operand | None, high: Operand | None) -> Output:
    """ATen ``clamp``: ``min(max(x, low), high)`` in the promoted type; NaN propagates."""
    bounds = [v for v in (low, high) if v is not None]
    target = result_type([x, *bounds])
    x = coerce(x, target)
    if low is not None:
        x, lo = numpy_broadcast(x, coerce(low, target))
        x = ops.maximum(x, lo)
    if high is not None:
        x, hi = numpy_broadcast(x, coerce(high, target))
        x = ops.minimum(x, hi)
    return x


@aten_op(*overloads("addcmul.default"))
def _addcmul(ctx: NodeContext) -> Output:
    x, a, b = promoted(ctx.tensor("self"), ctx.tensor("tensor1"), ctx.tensor("tensor2"))
    return ops.add(x, ops.multiply(scale(a, ctx["value"]), b))


@aten_op(*overloads("addcdiv.default"))
def _addcdiv(ctx: NodeContext) -> Output:
    x, a, b = promoted(ctx.tensor("self"), ctx.tensor("tensor1"), ctx.tensor("tensor2"))
    return ops.add(x, ops.divide(scale(a, ctx["value"]), b))


@aten_op(*overloads("lerp.Scalar", "lerp.Tensor"))
def _lerp(ctx: NodeContext) -> Output:
    """ATen's two-sided form: ``start + w·(end - start)`` for ``|w| < 0.5``, else
    ``end - (end - start)·(1 - w)`` (exact at both ends)."""
    start, end, weight = promoted(ctx.tensor("self"), ctx.tensor("end"), ctx.operand("weight"))
    diff = ops.subtract(end, start)
    one = fill(1, weight.element_type, weight.shape)
    low = ops.add(start, ops.multiply(weight, diff))
    high = ops.subtract(end, ops.multiply(diff, ops.subtract(one, weight)))
    small = ops.less(ops.abs(weight), fill(0.5, weight.element_type, weight.shape))
    return ops.select(small, low, high)
