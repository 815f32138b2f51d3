"""Activations the fused compiler expands into elementwise chains of its own choosing (the
chain fuses into one loop expression; every target and the GPU host replay run core ops).

GELU's tanh form ``0.5·x·(1 + tanh(u))``, ``u = √(2/π)·(x + 0.044715·x³)``, is expanded as
``x / (1 + exp(-2u))``: the same function (``(1 + tanh(u)) / 2`` is the logistic function of
``2u``), with one ``exp`` and a division instead of a ``tanh``, the cube as products (no
``pow``), and without the cancellation of ``1 + tanh(u)`` for negative ``u``. It overflows to
the same limits: ``x → -∞`` gives ``-0`` (``exp`` overflows), ``+∞`` gives ``x``, ``-inf``
gives NaN as ``-inf · 0`` does. The exact form is the op's own decomposition,
``0.5·x·(1 + erf(x/√2))``. 16-bit floats are computed in f32 and rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from opgraph.backends.fused.lowering.registry import REWRITES
from opgraph.builders.scalars import scalar_like
from opgraph.core import element_type as et
from opgraph.core.node import Node, Output
from opgraph.ops import elementwise as ew
from opgraph.ops.activation import Gelu, GeluApproximation
from opgraph.ops.conversion import convert

_NARROW = (et.f16, et.bf16)


@REWRITES.register(Gelu)
def _gelu(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    op = node.op
    assert isinstance(op, Gelu)
    (given,) = inputs
    x = convert(given, et.f32) if given.element_type in _NARROW else given
    if op.approximate is GeluApproximation.TANH:
        cube = ew.multiply(x, ew.multiply(x, x))
        inner = ew.add(x, ew.multiply(scalar_like(0.044715, x), cube))
        minus_2u = ew.multiply(scalar_like(-2 * math.sqrt(2 / math.pi), x), inner)
        y = ew.divide(x, ew.add(scalar_like(1.0, x), ew.exp(minus_2u)))
    else:
        y = op.decompose(x)
    return [convert(y, given.element_type) if y.element_type is not given.element_type else y]
