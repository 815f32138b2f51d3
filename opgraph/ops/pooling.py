"""Pooling over N-d spatial data: average and max, with max's indices and adjoint.

Data is channel-first ``(N, C, d1..dk)``, k >= 1; pooling is per channel. Per spatial axis,
with window ``f``, window dilation ``dil`` (max only), stride ``s`` and padding ``pb``/``pa``
(>= 0)::

    F' = (f - 1) * dil + 1, must be <= d + pb + pa
    floor mode: out = (d + pb + pa - F') // s + 1
    ceil mode:  out = ceil((d + pb + pa - F') / s) + 1, minus one when the last window would
                start at or after d + pb (inside the padding above): ONNX's and torch's rule

A window that lies entirely in the padding is a type error (its average divides by zero, its
maximum does not exist), except for ``avg_pool`` with ``include_padding``, where padding counts
as zeros. Ceil-mode windows may reach past the padding; those positions never count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.dim import Dim, dim_min
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import (
    DimShape,
    as_int_tuple,
    dims_max,
    is_static,
    known_at_least,
    known_less,
    maybe_le,
    static_dim,
    window_output,
)
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import as_bool, as_enum, require_element_type, require_same_element_type
from opgraph.ops.convolution import (
    AutoPad,
    _check_per_axis,
    _optional_ints,
    _resolve_padding,
    _spatial_rank,
    convolution,
    convolution_backprop_data,
)
from opgraph.ops.elementwise import divide
from opgraph.ops.movement import broadcast, reshape

__all__ = [
    "Pool",
    "AvgPool",
    "avg_pool",
    "MaxPool",
    "max_pool",
    "MaxPoolBase",
    "MaxPoolWithIndices",
    "max_pool_with_indices",
    "MaxPoolBackprop",
    "max_pool_backprop",
]

Ints = tuple[int, ...]


def _pool_output_size(
    axis: int, d: Dim, f: int, stride: int, dilation: int, below: int, above: int, ceil: bool
) -> Dim:
    """Output extent of one spatial axis (module doc)."""
    window = (f - 1) * dilation + 1
    padded = d + below + above
    require(
        maybe_le(window, padded),
        f"spatial axis {axis}: window size {window} exceeds the padded data size {padded}",
    )
    if not ceil:
        return window_output(d, f, stride, dilation, below, above)
    out = window_output(d, f, stride, dilation, below, above, ceil=True)
    if type(out) is int and type(d) is int:
        return out - 1 if (out - 1) * stride >= d + below else out
    # Ceil mode drops a last window starting in the padding above: (out - 1) * stride lies in
    # [padded - window, padded - window + stride - 1], so the bounds often decide; otherwise
    # the drop is the indicator [(out - 1) * stride >= d + below] = min(max(gap + 1, 0), 1).
    if known_at_least(padded - window, d + below):
        return out - 1
    if known_less(padded - window + stride - 1, d + below):
        return out
    gap = (out - 1) * stride - (d + below)
    return out - dim_min(dims_max(gap + 1, 0), 1)


def _tap_count(start: int, f: int, dilation: int, low: int, high: int) -> int:
    """How many taps ``start + j * dilation`` (``0 <= j < f``) fall in ``[low, high)``."""
    first = max(0, -(-(low - start) // dilation))
    last = min(f - 1, (high - 1 - start) // dilation)
    return max(0, last - first + 1)


def _tap_counts(
    out: int, d: int, f: int, stride: int, dilation: int, low: int, high: int
) -> list[int]:
    """For each window of one axis, how many of its taps fall in ``[low, high)``, in
    coordinates of the padded data (window ``o`` starts at ``o * stride``)."""
    return [_tap_count(o * stride, f, dilation, low, high) for o in range(out)]


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum(floor((a * i + b) / m) for i in range(n))`` in O(log m) steps (m > 0)."""
    total = 0
    while n > 0:
        total += n * (n - 1) // 2 * (a // m) + n * (b // m)
        a, b = a % m, b % m
        top = a * n + b
        if top < m:
            break
        n, b, m, a = top // m, top % m, a, m
    return total


def _first_empty_window(out: int, d: int, f: int, stride: int, dilation: int, pb: int) -> int:
    """The first of ``out`` windows of one axis with no tap on the data ``[pb, pb + d)``, or -1.

    Closed form (type rules must not loop over the output: padding can be 2**63). Windows
    ending before the data come first and windows starting after it last; a window between
    has a tap on the data unless it covers the data entirely and its taps straddle it, which
    needs ``d < dilation``: window ``o`` then misses iff ``(o * stride - pb) mod dilation >= d``,
    found by counting hits with floor sums and bisecting.
    """
    if out == 0:
        return -1
    if d == 0 or (f - 1) * dilation < pb:
        return 0
    after = -(-(pb + d) // stride)  # the first window starting after the data
    last = min(out, after) - 1
    if d < dilation:
        lo = max(0, -(-(pb + d - (f - 1) * dilation) // stride))
        hi = min(last, -(-pb // stride) - 1)  # windows starting before the data

        def misses(n: int) -> int:  # among windows lo .. lo + n - 1
            b = lo * stride - pb
            hits = _floor_sum(n, dilation, stride, b) - _floor_sum(n, dilation, stride, b - d)
            return n - hits

        if lo <= hi and misses(hi - lo + 1) > 0:
            low, high = 1, hi - lo + 1  # the smallest n with a miss lies in [low, high]
            while low < high:
                middle = (low + high) // 2
                low, high = (low, middle) if misses(middle) > 0 else (middle + 1, high)
            return lo + low - 1
    return after if after < out else -1


class Pool(Op):
    """Family base: window, strides, padding (>= 0), ceil mode and auto padding.

    Canonical form: strides (ones) and padding (zeros) filled in, ``auto_pad`` resolved into
    explicit padding.
    """

    contracting = True  # each output element reads many input elements

    __slots__ = ()
    num_inputs = 1
    accepted: ClassVar[tuple[ElementType, ...]] = et.NUMERIC
    window_shape: Ints
    strides: Ints | None
    padding_below: Ints | None
    padding_above: Ints | None
    ceil_mode: bool
    auto_pad: AutoPad

    def __post_init__(self) -> None:
        set_attr(self, "window_shape", as_int_tuple(self.window_shape, "window_shape"))
        for name in ("strides", "padding_below", "padding_above"):
            set_attr(self, name, _optional_ints(getattr(self, name), name))
        set_attr(self, "ceil_mode", as_bool(self.ceil_mode, "ceil_mode"))
        set_attr(self, "auto_pad", as_enum(AutoPad, self.auto_pad, "auto_pad"))

    def window_dilations(self, k: int) -> Ints:
        """Window dilation per axis (ones unless the op has a ``dilations`` attribute)."""
        return (1,) * k

    def counts_padding(self) -> bool:
        """Whether windows entirely in padding are allowed (padding counted as data)."""
        return False

    def canonicalize(self, x: TensorType, *rest: TensorType) -> Pool:
        k = _spatial_rank(x)
        _check_per_axis(self.window_shape, k, "window_shape", 1)
        dilations = self.window_dilations(k)
        _check_per_axis(dilations, k, "dilations", 1)
        strides = self.strides or (1,) * k
        below, above = _resolve_padding(
            self.auto_pad,
            self.padding_below,
            self.padding_above,
            x.shape[2:],
            [(f - 1) * d + 1 for f, d in zip(self.window_shape, dilations, strict=True)],
            strides,
        )
        return dataclasses.replace(  # type: ignore[type-var]
            self,
            strides=strides,
            padding_below=below,
            padding_above=above,
            auto_pad=AutoPad.EXPLICIT,
        )

    def output_spatial(self, x: TensorType) -> DimShape:
        """The spatial output shape for data ``x`` (checks every attribute)."""
        assert self.strides is not None
        assert self.padding_below is not None and self.padding_above is not None
        k = x.rank - 2
        dilations = self.window_dilations(k)
        _check_per_axis(self.strides, k, "strides", 1)
        _check_per_axis(self.padding_below, k, "padding_below", 0)
        _check_per_axis(self.padding_above, k, "padding_above", 0)
        axes = list(
            zip(
                x.shape[2:],
                self.window_shape,
                self.strides,
                dilations,
                self.padding_below,
                self.padding_above,
                strict=True,
            )
        )
        out = tuple(
            _pool_output_size(axis, d, f, s, dl, pb, pa, self.ceil_mode)
            for axis, (d, f, s, dl, pb, pa) in enumerate(axes)
        )
        if not self.counts_padding() and is_static(out) and is_static(x.shape):
            for axis, ((d, f, s, dl, pb, _), o) in enumerate(zip(axes, out, strict=True)):
                assert type(o) is int and type(d) is int  # symbolic: checked at each binding
                empty = _first_empty_window(o, d, f, s, dl, pb)
                if empty >= 0:
                    raise OpTypeError(
                        f"spatial axis {axis}: window {empty} lies entirely in the padding"
                    )
        return out

    def infer(self, x: TensorType, *rest: TensorType) -> Any:
        require_element_type(x, self.accepted)
        return TensorType(x.element_type, x.shape[:2] + self.output_spatial(x))


# ---------------------------------------------------------------------------------- average
@opclass
class AvgPool(Pool):
    """Average over windows (floating-point types).

    Attributes:
        window_shape, strides, padding_below, padding_above: per spatial axis.
        include_padding: count padding positions in the divisor (ONNX ``count_include_pad``,
            nGraph ``include_padding_in_avg_computation``); else divide by the number of data
            positions in the window. Ceil-mode positions past the padding never count.
        ceil_mode: ceil instead of floor for the output size (module doc).
        auto_pad: ``AutoPad``; resolved into explicit padding when building.
    """

    window_shape: Ints
    strides: Ints | None = None
    padding_below: Ints | None = None
    padding_above: Ints | None = None
    include_padding: bool = False
    ceil_mode: bool = False
    auto_pad: AutoPad = AutoPad.EXPLICIT
    accepted = et.FLOATS

    def __post_init__(self) -> None:
        Pool.__post_init__(self)
        set_attr(self, "include_padding", as_bool(self.include_padding, "include_padding"))

    def counts_padding(self) -> bool:
        return self.include_padding

    def divisor(self, spatial: Sequence[int], out: Sequence[int]) -> np.ndarray:
        """The divisor of every window (f64, shaped like the spatial output) for data of
        spatial shape ``spatial``."""
        assert self.strides is not None
        assert self.padding_below is not None and self.padding_above is not None
        result = np.ones((), np.float64)
        for d, f, s, pb, pa, o in zip(
            spatial,
            self.window_shape,
            self.strides,
            self.padding_below,
            self.padding_above,
            out,
            strict=True,
        ):
            low, high = (0, d + pb + pa) if self.include_padding else (pb, d + pb)
            result = np.multiply.outer(result, _tap_counts(o, d, f, s, 1, low, high))
        return result

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (_avg_pool_adjoint(self, inputs[0], ct),)


def avg_pool(
    x: Output,
    window_shape: Any,
    strides: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    include_padding: bool = False,
    ceil_mode: bool = False,
    auto_pad: AutoPad | str = AutoPad.EXPLICIT,
) -> Output:
    """Average pooling of channel-first data ``(N, C, d1..dk)``.

    Args:
        x: floating-point data, rank >= 3.
        window_shape: the window per spatial axis.
        strides: per spatial axis (default ones, as nGraph and ONNX; torch's default stride is
            the window, which its bridge passes explicitly).
        padding_below, padding_above: per spatial axis, >= 0 (default zeros).
        include_padding: count padding in the divisor (``count_include_pad``).
        ceil_mode: ceil rounding of the output size (windows starting in the padding above are
            dropped, as in ONNX and torch).
        auto_pad: ``"explicit"``, ``"same_upper"``, ``"same_lower"`` or ``"valid"``.

    Returns:
        ``(N, C, out1..outk)``.

    Raises:
        OpTypeError: bad attributes, a window larger than the padded data, or (without
            ``include_padding``) a window entirely in the padding.
    """
    op = AvgPool(
        window_shape,
        strides,
        padding_below,
        padding_above,
        include_padding,
        ceil_mode,
        cast(AutoPad, auto_pad),
    )
    return op(x)


# -------------------------------------------------------------------------------------- max
class MaxPoolBase(Pool):
    """Shared by the max-pool ops: window dilation."""

    __slots__ = ()
    dilations: Ints | None

    def __post_init__(self) -> None:
        Pool.__post_init__(self)
        set_attr(self, "dilations", _optional_ints(self.dilations, "dilations"))

    def window_dilations(self, k: int) -> Ints:
        return self.dilations or (1,) * k

    def canonicalize(self, x: TensorType, *rest: TensorType) -> Pool:
        op = Pool.canonicalize(self, x, *rest)
        return dataclasses.replace(op, dilations=self.window_dilations(x.rank - 2))  # type: ignore[type-var]

    def attributes_tuple(self) -> tuple[Any, ...]:
        return (
            self.window_shape,
            self.strides,
            self.padding_below,
            self.padding_above,
            self.dilations,
            self.ceil_mode,
        )

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (MaxPoolBackprop(*self.attributes_tuple())(inputs[0], ct),)


@opclass
class MaxPool(MaxPoolBase):
    """Maximum over windows (every numeric type; padding never wins).

    NaN propagates: a window holding NaN gives NaN. Attributes as :class:`AvgPool`, plus
    ``dilations`` (window dilation per spatial axis, default ones).
    """

    window_shape: Ints
    strides: Ints | None = None
    padding_below: Ints | None = None
    padding_above: Ints | None = None
    dilations: Ints | None = None
    ceil_mode: bool = False
    auto_pad: AutoPad = AutoPad.EXPLICIT


def max_pool(
    x: Output,
    window_shape: Any,
    strides: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    dilations: Any = None,
    ceil_mode: bool = False,
    auto_pad: AutoPad | str = AutoPad.EXPLICIT,
) -> Output:
    """Max pooling of channel-first data ``(N, C, d1..dk)``.

    Args:
        x: numeric data, rank >= 3.
        window_shape: the window per spatial axis.
        strides: per spatial axis (default ones).
        padding_below, padding_above: per spatial axis, >= 0 (default zeros).
        dilations: window dilation per spatial axis (default ones).
        ceil_mode: ceil rounding of the output size (module doc).
        auto_pad: ``"explicit"``, ``"same_upper"``, ``"same_lower"`` or ``"valid"``.

    Returns:
        ``(N, C, out1..outk)``.

    Raises:
        OpTypeError: bad attributes, a window larger than the padded data, or a window
            entirely in the padding.
    """
    op = MaxPool(
        window_shape,
        strides,
        padding_below,
        padding_above,
        dilations,
        ceil_mode,
        cast(AutoPad, auto_pad),
    )
    return op(x)


@opclass
class MaxPoolWithIndices(MaxPoolBase):
    """:class:`MaxPool` that also returns where each maximum was: ``(values, indices)``.

    ``indices`` (i64) are ONNX MaxPool's ``Indices`` output with the default row-major storage
    order: the flat position in the whole unpadded input, ``((n * C + c) * d1 + i1) * d2 + …``.
    Ties (and several NaNs) pick the first tap in row-major window order. torch's
    ``return_indices`` counts within one ``(n, c)`` plane: take the indices modulo
    ``d1 * … * dk``.
    """

    window_shape: Ints
    strides: Ints | None = None
    padding_below: Ints | None = None
    padding_above: Ints | None = None
    dilations: Ints | None = None
    ceil_mode: bool = False
    auto_pad: AutoPad = AutoPad.EXPLICIT
    multi_output = True

    def infer(self, x: TensorType, *rest: TensorType) -> Any:
        values = Pool.infer(self, x)
        return values, TensorType(et.i64, values.shape)


def max_pool_with_indices(
    x: Output,
    window_shape: Any,
    strides: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    dilations: Any = None,
    ceil_mode: bool = False,
    auto_pad: AutoPad | str = AutoPad.EXPLICIT,
) -> tuple[Output, Output]:
    """Max pooling that also returns the flat input index of every maximum.

    Args and errors as :func:`max_pool`.

    Returns:
        ``(values, indices)``: values like :func:`max_pool`, indices i64 of the same shape
        (see :class:`MaxPoolWithIndices` for the index convention).
    """
    op = MaxPoolWithIndices(
        window_shape,
        strides,
        padding_below,
        padding_above,
        dilations,
        ceil_mode,
        cast(AutoPad, auto_pad),
    )
    values, indices = op(x)
    return values, indices


@opclass
class MaxPoolBackprop(MaxPoolBase):
    """The adjoint of :class:`MaxPool`: inputs (forward data, output cotangent), result shaped
    like the data, each cotangent added at its window's maximum (the first one on ties).

    Not differentiable itself (its derivative in the data is zero almost everywhere, and the
    one in the cotangent would need a gather at the argmax positions): second derivatives
    through max pooling raise ``NotDifferentiableError``.
    """

    window_shape: Ints
    strides: Ints | None = None
    padding_below: Ints | None = None
    padding_above: Ints | None = None
    dilations: Ints | None = None
    ceil_mode: bool = False
    auto_pad: AutoPad = AutoPad.EXPLICIT
    num_inputs = 2
    differentiable = False
    accepted = et.FLOATS

    def infer(self, x: TensorType, *rest: TensorType) -> Any:
        (ct,) = rest
        require_same_element_type((x, ct), "data and output cotangent")
        values = Pool.infer(self, x)
        require(
            ct.shape == values.shape,
            f"output cotangent shape {list(ct.shape)} differs from the max pool's result shape "
            f"{list(values.shape)}",
        )
        return x


def max_pool_backprop(
    x: Output,
    ct: Output,
    window_shape: Any,
    strides: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    dilations: Any = None,
    ceil_mode: bool = False,
) -> Output:
    """The gradient of ``max_pool(x, ...)`` for the output cotangent ``ct``.

    Args:
        x: the forward data ``(N, C, d...)``, floating point.
        ct: the cotangent of the max pool's result.
        window_shape, strides, padding_below, padding_above, dilations, ceil_mode: the forward
            max pool's attributes.

    Returns:
        Shaped like ``x``: each cotangent added at its window's first maximum.

    Raises:
        OpTypeError: the attributes are invalid or ``ct`` is not shaped like the result.
    """
    op = MaxPoolBackprop(window_shape, strides, padding_below, padding_above, dilations, ceil_mode)
    return op(x, ct)


# ------------------------------------------------------------------------- adjoint helpers
def _run_time_divisor(op: AvgPool, x: Output, out: Sequence[Dim]) -> Output:
    """The divisor of every window on symbolic sizes, as a value: the window sums of a mask
    of ones over the counted region (the data, or the padded data with ``include_padding``),
    a convolution with a filter of ones whose padding above makes exactly ``out`` windows."""
    assert op.strides is not None
    assert op.padding_below is not None and op.padding_above is not None
    axes = list(
        zip(
            x.shape[2:],
            op.window_shape,
            op.strides,
            op.padding_below,
            op.padding_above,
            strict=True,
        )
    )
    counted = [d + pb + pa if op.include_padding else d for d, _, _, pb, pa in axes]
    below = tuple(0 if op.include_padding else pb for _, _, _, pb, _ in axes)
    above = tuple(
        (o - 1) * s + f - b - c
        for o, (_, f, s, _, _), b, c in zip(out, axes, below, counted, strict=True)
    )
    rank = len(counted) + 2
    mask = broadcast(constant(1, x.element_type), (1, 1, *counted), tuple(range(rank)))
    window = broadcast(constant(1, x.element_type), (1, 1, *op.window_shape), tuple(range(rank)))
    sums = convolution(mask, window, strides=op.strides, padding_below=below, padding_above=above)
    return reshape(sums, tuple(out))


def _avg_pool_adjoint(op: AvgPool, x: Output, ct: Output) -> Output:
    """Spread ``ct / divisor`` over each window: a depthwise transposed convolution with a
    filter of ones (its padding above chosen so the result has ``x``'s shape)."""
    assert op.strides is not None and op.padding_below is not None
    if x.tensor_type.size == 0:
        return broadcast(constant(0, x.element_type), x.shape, tuple(range(x.rank)))
    spatial, out = x.shape[2:], ct.shape[2:]
    if is_static(spatial) and is_static(out):
        divisor = constant(op.divisor(spatial, out), x.element_type)
    else:
        divisor = _run_time_divisor(op, x, out)
    scaled = divide(ct, broadcast(divisor, ct.shape, (0, 1)))
    channels = x.shape[1]
    ones = broadcast(
        constant(1, x.element_type), (channels, 1, *op.window_shape), tuple(range(x.rank))
    )
    above = tuple(
        (o - 1) * s + f - pb - d
        for o, s, f, pb, d in zip(
            out, op.strides, op.window_shape, op.padding_below, spatial, strict=True
        )
    )
    return convolution_backprop_data(
        scaled,
        ones,
        strides=op.strides,
        padding_below=op.padding_below,
        padding_above=above,
        groups=static_dim(channels, "the channel count of an average-pool gradient (its groups)"),
    )
