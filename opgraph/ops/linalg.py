"""Contractions."""

from __future__ import annotations

from opgraph.core import element_type as et
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import require_element_type, require_same_element_type

__all__ = [
    "Dot",
    "dot",
]


@opclass
class Dot(Op):
    """Generalised dot: the last ``reduction_axes_count`` axes of ``a`` contract with the first
    ones of ``b`` (``numpy.tensordot(a, b, n)``). Default count: 0 if either operand is a
    scalar, else 1."""

    reduction_axes_count: int | None = None
    num_inputs = 2

    def canonicalize(self, a: TensorType, b: TensorType) -> Dot:
        if self.reduction_axes_count is not None:
            return self
        return Dot(0 if a.rank == 0 or b.rank == 0 else 1)

    def infer(self, a: TensorType, b: TensorType) -> TensorType:
        n = self.reduction_axes_count
        assert n is not None
        require_same_element_type((a, b))
        require_element_type(a, et.NUMERIC)
        require(
            0 <= n <= min(a.rank, b.rank),
            f"reduction_axes_count {n} exceeds the operand ranks ({a.rank}, {b.rank})",
        )
        a_axes = a.shape[a.rank - n :]
        b_axes = b.shape[:n]
        require(
            a_axes == b_axes,
            f"contracted dimensions differ: {list(a_axes)} of {a} vs {list(b_axes)} of {b}",
        )
        return TensorType(a.element_type, a.shape[: a.rank - n] + b.shape[n:])

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        ct = cotangents[0]
        if ct is None:
            return (None, None)
        from opgraph.ops.movement import transpose

        a, b = inputs
        n = self.reduction_axes_count
        assert n is not None
        # a[I, K] · b[K, J]: da = ct[I, J] · b^T[J, K], db = a^T[K, I] · ct[I, J].
        b_t = transpose(b, list(range(n, b.rank)) + list(range(n)))
        a_t = transpose(a, list(range(a.rank - n, a.rank)) + list(range(a.rank - n)))
        return dot(ct, b_t, b.rank - n), dot(a_t, ct, a.rank - n)


def dot(a: Output, b: Output, reduction_axes_count: int | None = None) -> Output:
    """Contract the last ``reduction_axes_count`` axes of ``a`` with the first of ``b``."""
    return Dot(reduction_axes_count)(a, b)
