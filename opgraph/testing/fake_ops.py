"""Ops that exist only for tests: one with no kernel anywhere, one defined by decomposition."""

from __future__ import annotations

from opgraph.core.node import Output
from opgraph.core.op import Op, opclass
from opgraph.core.tensor_type import TensorType
from opgraph.ops import elementwise


@opclass
class Unknown(Op):
    """An op no backend implements (tests the unsupported-op errors)."""

    num_inputs = 1
    differentiable = False

    def infer(self, x: TensorType) -> TensorType:
        return x


@opclass
class SquarePlusOne(Op):
    """x*x + 1, defined only by its decomposition (tests the decompose pass)."""

    num_inputs = 1

    def decompose(self, x: Output) -> Output:

        return elementwise.add(elementwise.multiply(x, x), x * 0 + 1)
