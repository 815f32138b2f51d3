"""The layer-norm fusion rules of ``fuse_core``: recognising ``(x - mean) / sqrt(var + eps)``.

A mean comes in several spellings (``reduce_mean``, a sum divided by the count or multiplied by
its reciprocal, with or without ``keep_dims``) and is broadcast back to ``x``'s shape (through a
reshape dropping the kept unit axes). Rather than one pattern per combination, the rules match
the normalizing division (or multiplication by the reciprocal root) and the callbacks read the
operands with the small recognisers below, declining whatever they do not recognise.
"""

from __future__ import annotations

import math

from opgraph.core.node import Output
from opgraph.ops import elementwise as ew
from opgraph.ops.movement import Broadcast, Reshape
from opgraph.ops.normalization import LayerNorm, layer_norm
from opgraph.ops.reduction import ReduceMean, ReduceSum
from opgraph.pattern import P, Rules, constant_value

__all__ = ["LAYER_NORM_RULES"]

Axes = tuple[int, ...]


def _scalar(value: Output) -> float | None:
    """The value of a constant whose elements are all equal, else None."""
    array = constant_value(value)
    if array is None or array.size == 0 or not (array == array.flat[0]).all():
        return None
    return float(array.flat[0])


def _count(x: Output, axes: Axes) -> int | None:
    """The element count over ``axes``; None when it is symbolic (a mean over symbolic sizes
    divides by ``element_count``'s run-time value, never by a constant this rule could match)."""
    count = math.prod(x.shape[axis] for axis in axes)
    return count if isinstance(count, int) else None


def _close(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= 1e-3 * abs(target)


def _mean(m: Output) -> tuple[Output, Axes] | None:
    """``(source, axes)`` when ``m`` is the mean of ``source`` over ``axes``."""
    op = m.op
    if isinstance(op, ReduceMean):
        return m.node.inputs[0], op.axes
    if not isinstance(op, ew.Div | ew.Mul):
        return None
    for total, other in (m.node.inputs, m.node.inputs[::-1]):
        if isinstance(total.op, ReduceSum):
            source, axes = total.node.inputs[0], total.op.axes
            n = _count(source, axes)
            if n is None:
                continue
            factor = n if isinstance(op, ew.Div) else 1 / n
            if _close(_scalar(other), factor):
                return source, axes
        if isinstance(op, ew.Div):
            break  # the sum must be the dividend
    return None


def _expanded(e: Output) -> tuple[Output, Axes] | None:
    """``(value, axes)`` when ``e`` broadcasts ``value`` back along ``axes`` — directly, or
    after a reshape that drops the unit axes ``keep_dims`` kept."""
    if not isinstance(e.op, Broadcast):
        return None
    value = e.node.inputs[0]
    if isinstance(value.op, Reshape):
        inner = value.node.inputs[0]
        squeezed = tuple(d for d in inner.shape if d != 1)
        if value.shape == squeezed and value.op.input_order == tuple(range(inner.rank)):
            value = inner
    return value, e.op.broadcast_axes


def _centered(c: Output) -> tuple[Output, Axes] | None:
    """``(x, axes)`` when ``c`` is ``x - mean(x, axes)`` broadcast back."""
    if not isinstance(c.op, ew.Sub):
        return None
    x, expanded = c.node.inputs
    found = _expanded(expanded)
    mean = _mean(found[0]) if found else None
    if found is None or mean is None or mean[0] != x or mean[1] != found[1]:
        return None
    return x, mean[1]


def _variance_epsilon(root: Output, centered: Output, axes: Axes) -> float | None:
    """``eps`` when ``root`` is ``sqrt(mean(centered², axes) + eps)``."""
    if not isinstance(root.op, ew.Sqrt):
        return None
    total = root.node.inputs[0]
    if not isinstance(total.op, ew.Add):
        return None
    for variance, epsilon in (total.node.inputs, total.node.inputs[::-1]):
        eps = _scalar(epsilon)
        mean = _mean(variance)
        found = eps is not None and eps >= 0 and mean is not None and mean[1] == axes
        if found and mean is not None and _is_square_of(mean[0], centered):
            return eps
    return None


def _is_square_of(value: Output, base: Output) -> bool:
    if isinstance(value.op, ew.Mul):
        return value.node.inputs == (base, base)
    if isinstance(value.op, ew.Pow):
        a, b = value.node.inputs
        return a == base and _scalar(b) == 2.0
    return False


def _fused(centered: Output, root: Output, root_axes: Axes) -> Output | None:
    """``layer_norm(x)`` when ``centered`` is ``x - mean`` and ``root`` (broadcast back along
    ``root_axes``) is ``sqrt(var + eps)``."""
    found = _centered(centered)
    if found is None:
        return None
    x, axes = found
    if not axes or axes != tuple(range(x.rank - len(axes), x.rank)) or root_axes != axes:
        return None  # LayerNorm normalizes trailing axes
    eps = _variance_epsilon(root, centered, axes)
    if eps is None:
        return None
    return LayerNorm(x.rank - len(axes), eps)(x)


def _divided(centered: Output, denominator: Output) -> Output | None:
    """``centered / broadcast(sqrt(...))``."""
    expanded = _expanded(denominator)
    return None if expanded is None else _fused(centered, *expanded)


def _multiplied(centered: Output, factor: Output) -> Output | None:
    """``centered · broadcast(1 / sqrt(...))``."""
    expanded = _expanded(factor)
    if expanded is None:
        return None
    reciprocal, axes = expanded
    if not isinstance(reciprocal.op, ew.Div) or _scalar(reciprocal.node.inputs[0]) != 1.0:
        return None
    return _fused(centered, reciprocal.node.inputs[1], axes)


def _affine_param(ln: Output, param: Output) -> bool:
    """``param`` is broadcast along the leading (not normalized) axes of ``ln``."""
    op = ln.op
    assert isinstance(op, LayerNorm)
    leading = tuple(range(op.axis))
    expanded = param.op
    return isinstance(expanded, Broadcast) and expanded.broadcast_axes == leading


def _with_scale(x: Output, ln: Output, scale: Output, s: Output) -> Output | None:
    if not _affine_param(ln, s):
        return None
    op = ln.op
    assert isinstance(op, LayerNorm)
    return layer_norm(x, scale, None, op.axis, op.epsilon)


def _with_bias(x: Output, ln: Output, bias: Output, b: Output) -> Output | None:
    if len(ln.node.inputs) == 3 or not _affine_param(ln, b):
        return None
    op = ln.op
    assert isinstance(op, LayerNorm)
    scale = ln.node.inputs[1] if len(ln.node.inputs) == 2 else None
    return layer_norm(x, scale, bias, op.axis, op.epsilon)


_X = P.var("x")

LAYER_NORM_RULES = Rules(
    [
        (P(ew.Div, P.var("centered"), P.var("denominator")), _divided),
        (P(ew.Mul, P.var("centered"), P.var("factor")), _multiplied),
        (
            P(ew.Mul, P(LayerNorm, _X, name="ln"), P(Broadcast, P.var("scale"), name="s")),
            _with_scale,
        ),
        (P(ew.Add, P(LayerNorm, _X, name="ln"), P(Broadcast, P.var("bias"), name="b")), _with_bias),
        (
            P(ew.Add, P(LayerNorm, _X, P.any(), name="ln"), P(Broadcast, P.var("bias"), name="b")),
            _with_bias,
        ),
    ]
)
