"""Scalar semantics of the elementwise ops, written once.

Arguments arrive as expressions in their compute type (f16/bf16 as float, booleans as 0/1);
each renderer returns the op's value in the compute type of its output. The semantics match
the reference kernels exactly where they are exact: integer wrap-around (the module is
compiled with -fwrapv), floor division, NaN propagation through Max/Min/Relu.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from opgraph.backends.fused.lowering.registry import SCALAR_OPS, ScalarContext, ScalarRenderer
from opgraph.core import element_type as et
from opgraph.ops import elementwise as ew


def _template(template: str) -> ScalarRenderer:
    """A renderer substituting the arguments for ``{a}``, ``{b}``, ``{c}``."""

    def render(op: object, args: Sequence[str], ctx: ScalarContext) -> str:
        return template.format(**dict(zip("abc", args, strict=False)))

    return render


for _cls, _text in (
    (ew.Add, "({a} + {b})"),
    (ew.Sub, "({a} - {b})"),
    (ew.Mul, "({a} * {b})"),
    (ew.Neg, "(-{a})"),
    (ew.Equal, "({a} == {b})"),
    (ew.NotEqual, "({a} != {b})"),
    (ew.Less, "({a} < {b})"),
    (ew.LessOrEqual, "({a} <= {b})"),
    (ew.Greater, "({a} > {b})"),
    (ew.GreaterOrEqual, "({a} >= {b})"),
    (ew.And, "({a} & {b})"),
    (ew.Or, "({a} | {b})"),
    (ew.Not, "({a} ^ 1)"),
    (ew.Select, "({a} ? {b} : {c})"),
):
    SCALAR_OPS.add(_cls, _template(_text))


def _math(name: str) -> ScalarRenderer:
    def render(op: object, args: Sequence[str], ctx: ScalarContext) -> str:
        return ctx.math(name, *args)

    return render


for _unary, _name in ((ew.Exp, "exp"), (ew.Log, "log"), (ew.Sqrt, "sqrt"), (ew.Tanh, "tanh")):
    SCALAR_OPS.add(_unary, _math(_name))


@SCALAR_OPS.register(ew.Sigmoid)
def _sigmoid(op: ew.Sigmoid, args: Sequence[str], ctx: ScalarContext) -> str:
    one = ctx.literal(1.0)
    return f"({one} / ({one} + {ctx.math('exp', f'-{args[0]}')}))"


@SCALAR_OPS.register(ew.Abs)
def _abs(op: ew.Abs, args: Sequence[str], ctx: ScalarContext) -> str:
    (a,) = args
    if ctx.output.is_real:
        return ctx.math("fabs", a)
    if not ctx.output.is_signed:
        return a
    return f"({a} < 0 ? -{a} : {a})"


@SCALAR_OPS.register(ew.Relu)
def _relu(op: ew.Relu, args: Sequence[str], ctx: ScalarContext) -> str:
    (a,) = args
    if not ctx.output.is_signed:
        return a
    return f"({a} < 0 ? {ctx.literal(0)} : {a})"  # NaN < 0 is false: NaN propagates


def _constant(ctx: ScalarContext, i: int) -> float | None:
    """Argument ``i`` of a float Max/Min where it is a constant other than NaN."""
    value = ctx.constant(i)
    if value is None or isinstance(value, bool) or value != value:
        return None
    return float(value)


def _extremum(args: Sequence[str], ctx: ScalarContext, compare: str) -> str:
    a, b = args
    if not ctx.output.is_real:
        return f"({a} {compare} {b} ? {a} : {b})"
    # NaN in either operand gives NaN, as numpy.maximum does; a tie gives b
    bound = _constant(ctx, 1)
    if bound is not None and (bound != 0 or math.copysign(1.0, bound) > 0):
        # (b < a ? b : a) keeps a NaN a without testing for it: GCC vectorizes it in fewer
        # operations (hard-swish's clamps: 5.2 -> 4.2 cycles a vector with AVX2,
        # docs/performance.md h121). The same value for every a but at a tie of -0 with
        # b = +0, where adding +0 gives the +0 of the form below (b = -0 keeps that form)
        short = f"({b} {compare} {a} ? {b} : {a})"
        return f"({short} + {ctx.literal(0.0)})" if bound == 0 else short
    return f"(({a} != {a} || {a} {compare} {b}) ? {a} : {b})"


@SCALAR_OPS.register(ew.Max)
def _max(op: ew.Max, args: Sequence[str], ctx: ScalarContext) -> str:
    return _extremum(args, ctx, ">")


@SCALAR_OPS.register(ew.Min)
def _min(op: ew.Min, args: Sequence[str], ctx: ScalarContext) -> str:
    return _extremum(args, ctx, "<")


@SCALAR_OPS.register(ew.Div)
def _div(op: ew.Div, args: Sequence[str], ctx: ScalarContext) -> str:
    a, b = args
    t = ctx.output
    if t.is_real:
        return f"({a} / {b})"
    ctx.helper(f"div_{t.name}")
    ctx.check(f"({b} == 0)", "integer division by zero")
    kind = "floordiv" if op.floor_division else "truncdiv"
    return f"og_{kind}_{t.name}({a}, {b})"


@SCALAR_OPS.register(ew.Pow)
def _pow(op: ew.Pow, args: Sequence[str], ctx: ScalarContext) -> str:
    a, b = args
    t = ctx.output
    if t.is_real:
        return ctx.math("pow", a, b)
    ctx.helper(f"ipow_{t.name}")
    if t.is_signed:
        ctx.check(f"({b} < 0)", "integer power with a negative exponent")
    return f"og_ipow_{t.name}({a}, {b})"


SCALAR_OPS.add(ew.Erf, _math("erf"))
SCALAR_OPS.add(ew.Xor, _template("({a} ^ {b})"))
SCALAR_OPS.add(ew.IsNaN, _template("({a} != {a})"))


@SCALAR_OPS.register(ew.IsInf)
def _is_inf(op: ew.IsInf, args: Sequence[str], ctx: ScalarContext) -> str:
    t = ctx.inputs[0]
    return f"({ctx.math_in('fabs', t, args[0])} == {ctx.literal(math.inf, t)})"


@SCALAR_OPS.register(ew.IsFinite)
def _is_finite(op: ew.IsFinite, args: Sequence[str], ctx: ScalarContext) -> str:
    t = ctx.inputs[0]
    return f"({ctx.math_in('fabs', t, args[0])} < {ctx.literal(math.inf, t)})"


@SCALAR_OPS.register(ew.Reciprocal)
def _reciprocal(op: ew.Reciprocal, args: Sequence[str], ctx: ScalarContext) -> str:
    return f"({ctx.literal(1.0)} / {args[0]})"


def _rounding(name: str) -> ScalarRenderer:
    """Ceil/Floor/Round on floats; integers are already integral."""

    def render(op: object, args: Sequence[str], ctx: ScalarContext) -> str:
        return ctx.math(name, args[0]) if ctx.output.is_real else args[0]

    return render


SCALAR_OPS.add(ew.Ceil, _rounding("ceil"))
SCALAR_OPS.add(ew.Floor, _rounding("floor"))


@SCALAR_OPS.register(ew.Round)
def _round(op: ew.Round, args: Sequence[str], ctx: ScalarContext) -> str:
    # rint rounds ties to even (the default rounding mode); round() ties away from zero.
    name = "rint" if op.mode is ew.RoundMode.HALF_TO_EVEN else "round"
    return _rounding(name)(op, args, ctx)


@SCALAR_OPS.register(ew.Sign)
def _sign(op: ew.Sign, args: Sequence[str], ctx: ScalarContext) -> str:
    (a,) = args
    one, zero = ctx.literal(1), ctx.literal(0)
    if not ctx.output.is_signed:
        return f"({a} > 0 ? {one} : {zero})"
    body = f"({a} > 0 ? {one} : {a} < 0 ? {ctx.literal(-1)} : {zero})"
    return f"({a} != {a} ? {a} : {body})" if ctx.output.is_real else body


@SCALAR_OPS.register(ew.Mod)
def _mod(op: ew.Mod, args: Sequence[str], ctx: ScalarContext) -> str:
    a, b = args
    t = ctx.output
    kind = "fmod" if op.fmod else "floormod"
    if t.is_real:
        ctx.helper(f"mod_{'f64' if t is et.f64 else 'f32'}")
        return f"og_{kind}_{'f64' if t is et.f64 else 'f32'}({a}, {b})"
    ctx.helper(f"mod_{t.name}")
    ctx.check(f"({b} == 0)", "integer division by zero")
    return f"og_{kind}_{t.name}({a}, {b})"
