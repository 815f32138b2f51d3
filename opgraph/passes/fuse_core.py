"""Recognise subgraphs that spell an op the catalogue has, and use the op (nGraph's CoreFusion).

Fused forms are what frameworks' exporters write out long-hand: ``maximum(x, 0)`` is ``relu``,
``1 / (1 + exp(-x))`` is ``sigmoid``, ``0.5·x·(1 + erf(x/√2))`` is ``gelu``, a mean / variance /
normalize chain is ``layer_norm``, and a 2-D product plus a bias is ``gemm``. One op instead of
a chain runs faster on every backend (the framework-level ops decompose back where a backend has
no kernel for them, so fusing never loses a backend).
"""

from __future__ import annotations

import math

from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.ops import elementwise as ew
from opgraph.ops.activation import Gelu, GeluApproximation
from opgraph.ops.linalg import Dot, Gemm, MatMul
from opgraph.ops.movement import Broadcast
from opgraph.passes._layer_norm import LAYER_NORM_RULES
from opgraph.pattern import P, Pattern, Rules, constant_value, rewrite

__all__ = ["FUSION_RULES", "GELU_RULES", "fuse_core", "is_scalar_constant"]


def is_scalar_constant(value: Output, target: float, rtol: float = 1e-3) -> bool:
    """Whether every element of the constant ``value`` is ``target`` up to ``rtol`` (loose
    enough for constants rounded to f16/bf16)."""
    array = constant_value(value)
    if array is None or array.size == 0:
        return False
    first = float(array.flat[0])
    return math.isclose(first, target, rel_tol=rtol) and bool((array == array.flat[0]).all())


# ------------------------------------------------------------------------- relu, sigmoid
def _relu(x: Output) -> Output:
    return ew.relu(x)


def _sigmoid(x: Output) -> Output:
    return ew.sigmoid(x)


_ELEMENTARY = [
    (P(ew.Max, P.var("x"), P.const(0)), _relu),
    (P(ew.Div, P.const(1), P(ew.Add, P.const(1), P(ew.Exp, P(ew.Neg, P.var("x"))))), _sigmoid),
]


# ---------------------------------------------------------------------------------- gelu
def _erf_argument() -> list[Pattern]:
    """``x/√2`` spelled as a division or a multiplication by a constant."""
    x = P.var("x")
    return [
        P(ew.Div, x, P.const(name="k", where=lambda o: is_scalar_constant(o, math.sqrt(2)))),
        P(ew.Mul, x, P.const(name="k", where=lambda o: is_scalar_constant(o, math.sqrt(0.5)))),
    ]


def _tanh_argument() -> list[Pattern]:
    """``√(2/π)·(x + 0.044715·x³)``, the cube as ``x·x·x`` (either grouping) or ``x**3``."""
    x = P.var("x")
    cubes = [P(ew.Mul, x, P(ew.Mul, x, x)), P(ew.Pow, x, P.const(3))]
    cubic = [
        P(ew.Add, x, P(ew.Mul, P.const(where=lambda o: is_scalar_constant(o, 0.044715)), c))
        for c in cubes
    ]
    scale = P.const(where=lambda o: is_scalar_constant(o, math.sqrt(2 / math.pi)))
    return [P(ew.Mul, scale, c) for c in cubic]


def _gelu_forms(phi: Pattern) -> list[Pattern]:
    """``0.5·x·(1 + phi)`` in its three groupings (operand order is free: Mul commutes)."""
    x, half = P.var("x"), P.const(0.5)
    one_plus = P(ew.Add, P.const(1), phi)
    return [
        P(ew.Mul, P(ew.Mul, x, half), one_plus),
        P(ew.Mul, x, P(ew.Mul, half, one_plus)),
        P(ew.Mul, half, P(ew.Mul, x, one_plus)),
    ]


def _gelu_exact(x: Output, k: Output) -> Output:
    return Gelu(GeluApproximation.NONE)(x)


def _gelu_tanh(x: Output) -> Output:
    return Gelu(GeluApproximation.TANH)(x)


_GELU = [
    *(
        (form, _gelu_exact)
        for argument in _erf_argument()
        for form in _gelu_forms(P(ew.Erf, argument))
    ),
    *(
        (form, _gelu_tanh)
        for argument in _tanh_argument()
        for form in _gelu_forms(P(ew.Tanh, argument))
    ),
]

#: The two GELU spellings (erf and tanh) as one ``Gelu`` (backends with a native GELU apply
#: these alone).
GELU_RULES = Rules(_GELU)


# ---------------------------------------------------------------------------------- gemm
def _is_matrix_product(o: Output) -> bool:
    a, b = o.node.inputs
    if a.rank != 2 or b.rank != 2:
        return False
    return not isinstance(o.op, Dot) or o.op.reduction_axes_count == 1


def _leading_broadcast(o: Output) -> bool:
    """A Broadcast that adds leading axes only: NumPy broadcasting, as Gemm's ``c`` allows."""
    op = o.op
    assert isinstance(op, Broadcast)
    return op.broadcast_axes == tuple(range(len(op.broadcast_axes)))


def _gemm(a: Output, b: Output, c: Output) -> Output:
    return Gemm()(a, b, c)


_PRODUCT = P((Dot, MatMul), P.var("a"), P.var("b"), where=_is_matrix_product)

_GEMM = [
    (P(ew.Add, _PRODUCT, P(Broadcast, P.var("c"), where=_leading_broadcast)), _gemm),
    (P(ew.Add, _PRODUCT, P.var("c")), _gemm),
]


FUSION_RULES = Rules([*_ELEMENTARY, *GELU_RULES, *_GEMM]) + LAYER_NORM_RULES


def fuse_core(fn: Function) -> Function:
    """Replace long-hand spellings of catalogue ops by the ops (:data:`FUSION_RULES`).

    * ``maximum(x, 0) -> relu(x)``; ``1 / (1 + exp(-x)) -> sigmoid(x)``;
    * ``0.5·x·(1 + erf(x/√2))`` (any grouping, ``x·0.7071…`` or ``x/1.4142…``) ->
      ``gelu(x)``, and the tanh form ``0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)))`` ->
      ``gelu(x, approximate="tanh")``;
    * ``(x - mean) / sqrt(var + eps)`` over trailing axes (mean as ``reduce_mean`` or a sum
      divided by the count, the division by the root also as a multiplication by its
      reciprocal), optionally ``· scale + bias`` -> ``layer_norm``;
    * a 2-D ``dot``/``matmul`` plus a bias (broadcast along leading axes, or a full matrix) ->
      ``gemm``.

    Constants are seen through broadcasts, compared with a relative tolerance of 1e-3 (so f16
    constants match), and commuted operands are accepted.

    Needs: ``simplify_algebra`` first helps (it turns ``x * -1`` into ``-x``). Guarantees: none
    of the patterns remains; numerics unchanged up to rounding (the fused ops' kernels may
    evaluate in another order or precision).
    """
    return rewrite(fn, FUSION_RULES)
