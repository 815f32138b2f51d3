"""Ops whose results describe shapes known only at run time: ``shape_of`` and ``non_zero``.

``shape_of`` returns a value's shape as an ``i64`` vector; its size is the (static) rank, its
values are the dimensions, so on a static input the pass ``fold_constants`` replaces it by a
Constant (``ShapeOf.value_from_types``) and on a symbolic input it is computed per call.

``non_zero``'s output size depends on the input *values*: each node holds a fresh
data-dependent symbol (``core.dim.fresh_dim``, bounded by the input's element count) as its
``count`` attribute and names it in ``bound_symbols()``; the interpreter binds it when the node
runs. Once bound (``specialize_shapes`` with the symbol's value) the attribute is an int and the
type is static. Neither op has a gradient (integer results).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.dim import Dim, DimExpr, Symbol, bounds, fresh_dim
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require
from opgraph.core.tensor_type import TensorType

__all__ = ["ShapeOf", "shape_of", "NonZero", "non_zero"]


# ------------------------------------------------------------------------------- shape_of
@opclass
class ShapeOf(Op):
    """The shape of the input as an ``i64`` vector of length ``rank`` (nGraph ``ShapeOf``,
    ONNX ``Shape`` without start/end). Not differentiable: the result is integer."""

    num_inputs = 1
    differentiable = False

    def infer(self, x: TensorType) -> TensorType:
        return TensorType(et.i64, (x.rank,))

    def value_from_types(self, x: TensorType) -> np.ndarray | None:
        """The result when the input's type decides it (a static shape), else None; used by
        ``fold_constants`` to fold the op whatever the input's values."""
        if not x.is_static:
            return None
        return np.array([int(d) for d in x.shape], dtype=np.int64)


def shape_of(x: Output) -> Output:
    """The shape of ``x`` as an ``i64`` vector (``i64[rank]``).

    A static shape folds to a Constant (``og.passes.fold_constants``); a symbolic one is
    computed when the Function runs.
    """
    return ShapeOf()(x)


# ------------------------------------------------------------------------------- non_zero
@opclass
class NonZero(Op):
    """Indices of the non-zero elements (ONNX ``NonZero``): ``i64[rank, count]``, one column
    per non-zero element in row-major order (``numpy.nonzero`` stacked).

    Attributes:
        count: the number of non-zero elements: a fresh data-dependent symbol (made by the
            builder, ``0 <= count <= x.size``) bound when the node runs, or an int once the
            Function is specialised to a binding that holds it.
    """

    count: Dim
    num_inputs = 1
    differentiable = False

    def __post_init__(self) -> None:
        require(
            _bare_symbol(self.count) is not None or (type(self.count) is int and self.count >= 0),
            f"non_zero: count must be a symbol (og.dim) or a non-negative int, got {self.count!r}",
        )

    def infer(self, x: TensorType) -> TensorType:
        require(x.rank >= 1, f"non_zero needs a rank >= 1 input, got {x} (rank 0)")
        if type(self.count) is int and x.is_static:
            require(
                self.count <= x.size,
                f"non_zero: count {self.count} exceeds the {x.size} elements of {x}",
            )
        return TensorType(et.i64, (x.rank, self.count))

    def bound_symbols(self) -> tuple[Symbol, ...]:
        symbol = _bare_symbol(self.count)
        return () if symbol is None else (symbol,)


def non_zero(x: Output) -> Output:
    """Indices of the non-zero elements of ``x``: ``i64[rank, n]``, column ``j`` the index
    of the ``j``-th non-zero element in row-major order (ONNX ``NonZero``; ``False`` and
    ``0`` are zero, ``NaN`` is not).

    ``n`` is a fresh data-dependent symbol (named ``_nonzeroK``, bounded by ``x``'s element
    count) that the interpreter binds when the node runs; CPU and GPU refuse such Functions.

    Raises:
        OpTypeError: ``x`` is a scalar.
    """
    t = x.tensor_type
    high = bounds(t.size)[1] if t.rank else None
    return NonZero(fresh_dim("nonzero", max=high if isinstance(high, int) else None))(x)


def _bare_symbol(d: Any) -> Symbol | None:
    if isinstance(d, DimExpr) and len(d.terms) == 1:
        monomial, coefficient = d.terms[0]
        if coefficient == 1 and len(monomial) == 1 and monomial[0][1] == 1:
            atom = monomial[0][0]
            return atom if isinstance(atom, Symbol) else None
    return None
