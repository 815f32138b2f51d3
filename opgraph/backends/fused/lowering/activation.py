"""Activations the fused compiler computes as one scalar expression (instead of their
decomposition into a chain of elementwise nodes).

GELU's tanh form ``0.5·x·(1 + tanh(u))``, ``u = √(2/π)·(x + 0.044715·x³)``, is computed as
``x / (1 + exp(-2u))``: the same function (``(1 + tanh(u)) / 2`` is the logistic function of
``2u``), with one ``exp`` and a division instead of a ``tanh``, and without the cancellation of
``1 + tanh(u)`` for negative ``u``. It overflows to the same limits: ``x → -∞`` gives ``-0``
(``exp`` overflows), ``+∞`` gives ``x``, ``-inf`` gives NaN as ``-inf · 0`` does. The exact
form is the decomposition's ``0.5·x·(1 + erf(x/√2))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from opgraph.backends.fused.lowering.registry import SCALAR_OPS, ScalarContext
from opgraph.ops.activation import Gelu, GeluApproximation


@SCALAR_OPS.register(Gelu)
def _gelu(op: Gelu, args: Sequence[str], ctx: ScalarContext) -> str:
    (x,) = args
    one = ctx.literal(1.0)
    if op.approximate is GeluApproximation.TANH:
        cube = f"({ctx.literal(0.044715)} * {x} * {x} * {x})"
        minus_2u = f"({ctx.literal(-2 * math.sqrt(2 / math.pi))} * ({x} + {cube}))"
        return f"({x} / ({one} + {ctx.math('exp', minus_2u)}))"
    phi = ctx.math("erf", f"({x} * {ctx.literal(1 / math.sqrt(2))})")
    return f"({x} * {ctx.literal(0.5)} * ({one} + {phi}))"
