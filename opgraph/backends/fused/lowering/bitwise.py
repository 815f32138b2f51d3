"""Scalar semantics of the bitwise ops. Shifts compute in the unsigned type of the same width
(no undefined behaviour); out-of-range amounts give 0, or -1 for a negative value shifted
right, as the reference does."""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.fused.lowering.registry import SCALAR_OPS, ScalarContext
from opgraph.ops import bitwise as bw

_UNSIGNED = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}


@SCALAR_OPS.register(bw.BitwiseNot)
def _not(op: bw.BitwiseNot, args: Sequence[str], ctx: ScalarContext) -> str:
    return f"({args[0]} ^ 1)" if ctx.output.is_boolean else f"(~{args[0]})"


SCALAR_OPS.add(bw.BitwiseAnd, lambda op, args, ctx: f"({args[0]} & {args[1]})")
SCALAR_OPS.add(bw.BitwiseOr, lambda op, args, ctx: f"({args[0]} | {args[1]})")
SCALAR_OPS.add(bw.BitwiseXor, lambda op, args, ctx: f"({args[0]} ^ {args[1]})")


@SCALAR_OPS.register(bw.BitShift)
def _shift(op: bw.BitShift, args: Sequence[str], ctx: ScalarContext) -> str:
    x, s = args
    t = ctx.output
    c, u, bits = ctx.ctype(), _UNSIGNED[t.itemsize], t.itemsize * 8
    amount = f"(({u}){s})"
    if op.direction is bw.ShiftDirection.LEFT:
        shifted = f"(({c})(({u})(({u}){x} << {amount})))"
        beyond = ctx.literal(0)
    else:
        shifted = f"(({c})({x} >> {amount}))"
        beyond = f"({x} < 0 ? {ctx.literal(-1)} : {ctx.literal(0)})" if t.is_signed else "0"
    return f"({amount} < {bits} ? {shifted} : {beyond})"
