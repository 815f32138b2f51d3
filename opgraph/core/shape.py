"""Shapes and the axis and size helpers every type rule uses.

A tensor type's shape is a tuple of dimensions (:data:`DimShape`): ints, or symbolic
:class:`~opgraph.core.dim.DimExpr` expressions. A static shape (:data:`Shape`) holds ints only,
and every helper keeps a fast path for it. Type rules call these helpers rather than doing
their own size arithmetic, so each rule works on symbolic shapes in one place.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeGuard

from opgraph.core.dim import (
    Dim,
    DimExpr,
    bounds,
    dim,
    dim_max,
    evaluate,
    floor_div,
    format_dim,
    is_symbolic,
)
from opgraph.core.errors import OpgraphError, OpTypeError

#: A static shape: non-negative ints (what tensors and backends hold).
Shape = tuple[int, ...]
#: A shape in the IR: each dimension an int or a symbolic expression.
DimShape = tuple[Dim, ...]
#: Shape-valued op attributes (Broadcast.shape, Slice bounds…). Annotated static for the code
#: that runs static Functions only so far (fused backends, bridges, file format 1); on a
#: symbolic Function the entries may be ``DimExpr`` (docs/design.md §10).
ShapeAttr = Shape


def shape_size(shape: Sequence[Dim]) -> Dim:
    """Number of elements (1 for a scalar, 0 when any dimension is 0); an expression when the
    shape is symbolic."""
    return math.prod(shape)


def is_static(shape: Sequence[Dim]) -> TypeGuard[Sequence[int]]:
    """True when every dimension is an int (narrows ``shape`` for the type checker)."""
    return all(type(d) is int for d in shape)


def static_shape(
    shape: Sequence[Dim], what: str = "shape", error: type[OpgraphError] = OpTypeError
) -> Shape:
    """``shape`` as ints; raises ``error`` (``OpTypeError`` unless the layer has its own, e.g.
    a bridge's ``ConversionError``) naming ``what`` when a dimension is symbolic."""
    if not is_static(shape):
        raise error(f"{what} {format_shape(shape)} must be static (no symbolic dimension)")
    return tuple(shape)


def static_dim(d: Dim, what: str, error: type[OpgraphError] = OpTypeError) -> int:
    """``d`` as an int; a symbolic ``d`` raises ``error`` (``OpTypeError`` unless the layer has
    its own, e.g. a bridge's ``ConversionError``) saying that ``what`` needs a static size (a
    size used as a tensor value can come from ``ops.shape_of`` at run time, as
    ``ops.reduction.element_count`` does)."""
    if isinstance(d, int):
        return d
    raise error(f"{what} needs a static size, got the symbolic {format_dim(d)}")


def prod(dims: Iterable[Dim]) -> Dim:
    """The product of dimensions (an int when all are ints)."""
    return math.prod(dims)


def dims_equal(a: Dim, b: Dim) -> bool:
    """Equality of two dimensions: ints by value, expressions by canonical form."""
    return a == b


def known_less(a: Dim, b: Dim) -> bool:
    """True when ``a < b`` for every value of the symbols (False when undecided)."""
    if type(a) is int and type(b) is int:
        return a < b
    return bounds(b - a)[0] > 0


def known_at_least(a: Dim, b: Dim) -> bool:
    """True when ``a >= b`` for every value of the symbols (False when undecided)."""
    if type(a) is int and type(b) is int:
        return a >= b
    return bounds(a - b)[0] >= 0


@dataclass(frozen=True)
class DeferredCheck:
    """A size condition a type rule could not decide on symbols: ``a <= b``, ``a == b`` or
    ``a % b == 0`` (``kind`` ``"le"``, ``"equal"``, ``"divisible"``), checked per binding."""

    kind: str
    a: Dim
    b: Dim

    def holds(self, binding: Mapping[str, int]) -> bool:
        """False when the condition fails for ``binding`` (True while a symbol is unbound)."""
        a, b = evaluate(self.a, binding), evaluate(self.b, binding)
        if type(a) is not int or type(b) is not int:
            return True
        if self.kind == "le":
            return a <= b
        if self.kind == "equal":
            return a == b
        return b != 0 and a % b == 0


_RECORDER: ContextVar[list[DeferredCheck] | None] = ContextVar("deferred_checks", default=None)


@contextlib.contextmanager
def recording_deferred_checks() -> Iterator[list[DeferredCheck]]:
    """Collect the conditions :func:`maybe_le`, :func:`maybe_equal` and
    :func:`maybe_divisible` defer while the block runs (a backend that does not re-run type
    rules per binding evaluates them instead: ``passes.specialize_shapes.deferred_checks``)."""
    found: list[DeferredCheck] = []
    token = _RECORDER.set(found)
    try:
        yield found
    finally:
        _RECORDER.reset(token)


def _defer(kind: str, a: Dim, b: Dim) -> bool:
    recorder = _RECORDER.get()
    if recorder is not None:
        recorder.append(DeferredCheck(kind, a, b))
    return True


def maybe_le(a: Dim, b: Dim) -> bool:
    """False only when ``a > b`` for every value of the symbols. Type rules check a condition
    on symbolic sizes with it: what cannot be decided now is checked again at each binding."""
    if type(a) is int and type(b) is int:
        return a <= b
    lo, hi = bounds(a - b)
    return lo <= 0 and (hi <= 0 or _defer("le", a, b))


def maybe_equal(a: Dim, b: Dim) -> bool:
    """False only when ``a != b`` is certain: ints that differ, or expressions whose difference
    cannot be 0 by the bounds. (Equal-shape rules use ``==``, which unifies only equal
    expressions; this is for sizes derived by arithmetic, checked again at each binding.)"""
    if type(a) is int and type(b) is int:
        return a == b
    lo, hi = bounds(a - b)
    return lo <= 0 <= hi and (lo == hi or _defer("equal", a, b))


def maybe_divisible(a: Dim, b: int) -> bool:
    """False only when ``a % b != 0`` is certain (an int ``a``, or a polynomial whose terms
    cannot all be multiples of ``b``); checked again at each binding."""
    if type(a) is int:
        return a % b == 0
    return not is_symbolic(a) or _defer("divisible", a, b)


def window_output(
    size: Dim,
    window: Dim,
    stride: int = 1,
    dilation: int = 1,
    pad_below: Dim = 0,
    pad_above: Dim = 0,
    ceil: bool = False,
) -> Dim:
    """Output size of a sliding window: ``(size + pads - dilated window) // stride + 1``
    (ceil division with ``ceil``), the one formula convolutions and pooling share. A window
    that does not fit is the caller's check; on symbolic sizes it is checked at binding."""
    span = size + pad_below + pad_above - ((window - 1) * dilation + 1)
    if type(span) is int:
        return (-(-span // stride) if ceil else span // stride) + 1
    return floor_div(span + (stride - 1 if ceil else 0), stride) + 1


def broadcast_dims(a: Dim, b: Dim) -> Dim | None:
    """NumPy's broadcast of two dimensions, or None when they do not broadcast. A symbolic
    dimension broadcasts with 1 and with an equal one only (``batch`` against 3 could be 1)."""
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    return None


def dims_max(a: Dim, b: Dim) -> Dim:
    """``max(a, b)`` on dimensions."""
    return max(a, b) if type(a) is int and type(b) is int else dim_max(a, b)


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise OpTypeError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise OpTypeError(f"{what} must be an integer, got {value!r}") from None


def as_int(value: Any, what: str) -> int:
    """``value`` as a Python int; bools and floats are rejected with a message naming ``what``."""
    return _as_int(value, what)


def as_int_tuple(values: Iterable[Any] | int, what: str) -> tuple[int, ...]:
    """Normalise an int or an iterable of ints to a tuple of ints."""
    if isinstance(values, int) and not isinstance(values, bool):
        return (values,)
    try:
        items = list(values)  # type: ignore[arg-type]
    except TypeError:
        raise OpTypeError(f"{what} must be a sequence of integers, got {values!r}") from None
    return tuple(_as_int(v, f"{what}[{i}]") for i, v in enumerate(items))


def as_dim(value: Any, what: str, minimum: int | None = 0) -> Dim:
    """A dimension: an int (``>= minimum`` unless None), a ``DimExpr``, or a name (``"batch"``
    is ``og.dim("batch")``)."""
    if isinstance(value, DimExpr):
        return value
    if isinstance(value, str):
        return dim(value)
    d = _as_int(value, what)
    if minimum is not None and d < minimum:
        raise OpTypeError(f"{what} must be >= {minimum}, got {d}")
    return d


def as_dims(values: Iterable[Any] | int, what: str = "shape", minimum: int | None = 0) -> DimShape:
    """Normalise a shape (or per-axis sizes, bounds) that may be symbolic: each entry as
    :func:`as_dim` takes it. All-int input stays a tuple of ints."""
    if isinstance(values, int | DimExpr | str) and not isinstance(values, bool):
        values = (values,)
    try:
        items = list(values)  # type: ignore[arg-type]
    except TypeError:
        raise OpTypeError(f"{what} must be a sequence of dimensions, got {values!r}") from None
    return tuple(as_dim(v, f"{what}[{i}]", minimum) for i, v in enumerate(items))


def as_shape(values: Iterable[Any] | int, what: str = "shape") -> Shape:
    """Normalise a static shape: a tuple of non-negative ints (see :func:`as_dims` for shapes
    that may be symbolic)."""
    shape = as_int_tuple(values, what)
    for i, d in enumerate(shape):
        if d < 0:
            raise OpTypeError(f"{what}[{i}] must be >= 0, got {d} in {shape}")
    return shape


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map a possibly negative axis into ``0..rank-1``; raises when out of range."""
    axis = _as_int(axis, what)
    if not -rank <= axis < rank:
        raise OpTypeError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def normalize_axes(
    axes: Iterable[Any] | int, rank: int, what: str = "axes", allow_repeats: bool = False
) -> tuple[int, ...]:
    """Normalise axes (negatives allowed) to sorted, unique non-negative ints."""
    raw = as_int_tuple(axes, what)
    result = [normalize_axis(a, rank, what) for a in raw]
    if not allow_repeats and len(set(result)) != len(result):
        raise OpTypeError(f"{what} {raw} repeats an axis")
    return tuple(sorted(set(result)))


def format_shape(shape: Sequence[Dim]) -> str:
    """``[batch,768]``: dimensions as printed in types."""
    return "[" + ",".join(str(d) if type(d) is int else format_dim(d) for d in shape) + "]"
