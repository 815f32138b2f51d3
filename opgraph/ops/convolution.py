"""Convolutions over N-d spatial data: the forward op and its two adjoints.

Layouts are channel-first: data ``(N, C, d1..dk)``, filters ``(O, C / groups, f1..fk)``, k >= 1.
Per spatial axis (nGraph's rule), with data dilation ``ddil``, window dilation ``dil``, padding
``pb``/``pa`` (negative pads crop) and stride ``s``::

    D' = (d - 1) * ddil + 1 + pb + pa      (0 + pb + pa when d == 0), must be > 0
    F' = (f - 1) * dil + 1                 (f >= 1), must be <= D'
    out = (D' - F') // s + 1

``Convolution`` is a cross-correlation (the filter is not flipped), as in every framework.
``ConvolutionBackpropData`` is the transposed convolution (ONNX ConvTranspose, torch
``conv_transpose``) and ``ConvolutionBackpropFilters`` the gradient of a convolution with
respect to its filters (nGraph's op of that name).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any, cast

import opgraph.ops.movement as movement
from opgraph.core import element_type as et
from opgraph.core.dim import Dim, ceil_div, floor_div, is_symbolic
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import (
    DimShape,
    as_int,
    as_int_tuple,
    dims_max,
    known_at_least,
    maybe_le,
    static_shape,
    window_output,
)
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import as_enum, require_element_type, require_same_element_type

__all__ = [
    "AutoPad",
    "ConvolutionBase",
    "Convolution",
    "convolution",
    "ConvolutionBackpropData",
    "convolution_backprop_data",
    "ConvolutionBackpropFilters",
    "convolution_backprop_filters",
]

Ints = tuple[int, ...]


class AutoPad(enum.Enum):
    """How a windowed op chooses its padding (ONNX ``auto_pad``).

    ``EXPLICIT`` uses ``padding_below``/``padding_above`` (default zeros). ``SAME_UPPER`` and
    ``SAME_LOWER`` pad so that ``out = ceil(d / stride)``, the odd padding element going at the
    end (upper) or the beginning (lower); ``VALID`` pads nothing. Builders accept the members or
    their lower-case names (``"same_upper"``). Building resolves the padding, so nodes always
    hold ``EXPLICIT`` with explicit pads.
    """

    EXPLICIT = "explicit"
    SAME_UPPER = "same_upper"
    SAME_LOWER = "same_lower"
    VALID = "valid"


def _optional_ints(value: Any, what: str) -> Ints | None:
    """None, or an int / sequence of ints as a tuple (per-axis attributes). Padding entries
    may also be dimension expressions: the resolved ``same_*`` padding of a symbolic axis
    (names are not taken as symbols here: a padding is not a dimension)."""
    if isinstance(value, tuple) and what.startswith("padding") and any(map(is_symbolic, value)):
        return tuple(
            v if is_symbolic(v) else as_int(v, f"{what}[{i}]") for i, v in enumerate(value)
        )
    return None if value is None else as_int_tuple(value, what)


def _spatial_rank(x: TensorType, what: str = "data") -> int:
    """The number of spatial axes of a channel-first value; raises below rank 3."""
    require(x.rank >= 3, f"{what} must have rank >= 3 (N, C, spatial...), got {x}")
    return x.rank - 2


def _check_per_axis(values: Ints, k: int, what: str, minimum: int | None = None) -> None:
    """One entry per spatial axis, each >= ``minimum`` when given."""
    require(
        len(values) == k,
        f"{what} {values} has {len(values)} entries, expected {k} (one per spatial axis)",
    )
    if minimum is not None:
        for axis, v in enumerate(values):
            require(  # a symbolic entry (same padding): unless certainly below, at binding
                maybe_le(minimum, v), f"{what}[{axis}] must be >= {minimum}, got {v}"
            )


def _dilated_size(d: Dim, dilation: int) -> Dim:
    """Extent of ``d`` elements spread ``dilation`` apart (0 for an empty axis; a symbolic
    axis is taken as non-empty, and a binding to 0 is re-checked by the static rule)."""
    return 0 if d == 0 else (d - 1) * dilation + 1


def _same_padding(size: Dim, window: Dim, stride: int, upper: bool) -> tuple[Dim, Dim]:
    """(below, above) padding giving ``ceil(size / stride)`` outputs (ONNX SAME_*): the total
    ``max((ceil(size / stride) - 1) * stride + window - size, 0)``, the odd element above
    (``same_upper``) or below. On a symbolic size the padding is an expression (evaluated at
    each binding); the ``max`` is dropped when ``window >= stride`` (the total is then at
    least ``window - stride``), so the output size simplifies to ``ceil(size / stride)``."""
    out = ceil_div(size, stride)
    needed = (out - 1) * stride + window - size
    total = needed if type(size) is not int and known_at_least(window, stride) else None
    if total is None:
        total = dims_max(needed, 0)
    small = floor_div(total, 2)
    large = total - small
    return (small, large) if upper else (large, small)


def _resolve_padding(
    auto_pad: AutoPad,
    below: Ints | None,
    above: Ints | None,
    sizes: Sequence[Dim],
    windows: Sequence[Dim],
    strides: Sequence[int],
) -> tuple[Ints, Ints]:
    """Explicit (below, above) padding for ``auto_pad`` (sizes are the unpadded extents)."""
    k = len(sizes)
    if auto_pad is AutoPad.EXPLICIT:
        return (below or (0,) * k, above or (0,) * k)
    require(
        below is None and above is None,
        f"padding_below/padding_above must not be given with auto_pad={auto_pad.name.lower()}",
    )
    if auto_pad is AutoPad.VALID:
        return (0,) * k, (0,) * k
    _check_per_axis(tuple(strides), k, "strides", 1)
    upper = auto_pad is AutoPad.SAME_UPPER
    pairs = [_same_padding(d, w, s, upper) for d, w, s in zip(sizes, windows, strides, strict=True)]
    # Annotated static like ShapeAttr: on a symbolic axis the entries are DimExpr (design §10).
    return cast(Ints, tuple(p[0] for p in pairs)), cast(Ints, tuple(p[1] for p in pairs))


def _conv_output_size(
    axis: int, d: Dim, f: Dim, stride: int, dilation: int, below: int, above: int, ddil: int
) -> Dim:
    """Output extent of one spatial axis (nGraph's convolution rule)."""
    padded = _dilated_size(d, ddil) + below + above
    require(
        maybe_le(1, padded),
        f"spatial axis {axis}: data size after dilation and padding is {padded}, must be > 0",
    )
    require(maybe_le(1, f), f"spatial axis {axis}: filter size must be >= 1, got {f}")
    window = (f - 1) * dilation + 1
    require(
        maybe_le(window, padded),
        f"spatial axis {axis}: dilated filter size {window} exceeds the padded data size {padded}",
    )
    return window_output(_dilated_size(d, ddil), f, stride, dilation, below, above)


# ------------------------------------------------------------------------------ attributes
class ConvolutionBase(Op):
    """Family base: the per-axis attributes shared by the three convolution ops.

    Canonical form: every per-axis attribute is a tuple with one entry per spatial axis
    (strides, dilations and data dilations default to ones, padding to zeros).
    """

    contracting = True  # each output element reads many input elements

    __slots__ = ()
    num_inputs = 2
    strides: Ints | None
    dilations: Ints | None
    padding_below: Ints | None
    padding_above: Ints | None
    groups: int

    def _normalise(self, *names: str) -> None:
        for name in names:
            set_attr(self, name, _optional_ints(getattr(self, name), name))
        set_attr(self, "groups", as_int(self.groups, "groups"))

    def _check_common(self, k: int) -> None:
        assert self.strides is not None and self.dilations is not None
        assert self.padding_below is not None and self.padding_above is not None
        _check_per_axis(self.strides, k, "strides", 1)
        _check_per_axis(self.dilations, k, "dilations", 1)
        _check_per_axis(self.padding_below, k, "padding_below")
        _check_per_axis(self.padding_above, k, "padding_above")
        require(self.groups >= 1, f"groups must be >= 1, got {self.groups}")


@opclass
class Convolution(ConvolutionBase):
    """N-d convolution (cross-correlation) of data ``(N, C, d...)`` with filters
    ``(O, C / groups, f...)``, giving ``(N, O, out...)``.

    Attributes:
        strides: window movement per spatial axis (default ones).
        dilations: filter (window) dilation per axis (default ones).
        padding_below, padding_above: zeros added before/after each spatial axis; negative
            values crop (default zeros).
        data_dilations: the data is spread out with ``ddil - 1`` zeros between elements before
            padding (nGraph's data dilation; default ones).
        groups: channel groups; output channel group ``g`` sees input channel group ``g``
            (``groups == C`` is a depthwise convolution).
        auto_pad: ``AutoPad``; building resolves it into explicit padding.

    Floating-point element types only (integer convolution would need a widening
    accumulator, ONNX ConvInteger, which is a different op).
    """

    strides: Ints | None = None
    dilations: Ints | None = None
    padding_below: Ints | None = None
    padding_above: Ints | None = None
    data_dilations: Ints | None = None
    groups: int = 1
    auto_pad: AutoPad = AutoPad.EXPLICIT

    def __post_init__(self) -> None:
        self._normalise("strides", "dilations", "padding_below", "padding_above", "data_dilations")
        set_attr(self, "auto_pad", as_enum(AutoPad, self.auto_pad, "auto_pad"))

    def canonicalize(self, x: TensorType, w: TensorType) -> Convolution:
        k = _spatial_rank(x)
        require(w.rank == x.rank, f"filters must have rank {x.rank} like the data, got {w}")
        ones = (1,) * k
        strides, dilations = self.strides or ones, self.dilations or ones
        data_dilations = self.data_dilations or ones
        _check_per_axis(dilations, k, "dilations", 1)
        _check_per_axis(data_dilations, k, "data_dilations", 1)
        below, above = _resolve_padding(
            self.auto_pad,
            self.padding_below,
            self.padding_above,
            [_dilated_size(d, dd) for d, dd in zip(x.shape[2:], data_dilations, strict=True)],
            [(f - 1) * dl + 1 for f, dl in zip(w.shape[2:], dilations, strict=True)],
            strides,
        )
        return Convolution(strides, dilations, below, above, data_dilations, self.groups)

    def output_shape(self, x: Sequence[Dim], w: Sequence[Dim]) -> DimShape:
        """The result shape for data shape ``x`` and filter shape ``w`` (checks everything)."""
        assert self.strides is not None and self.dilations is not None
        assert self.padding_below is not None and self.padding_above is not None
        assert self.data_dilations is not None
        k = len(x) - 2
        self._check_common(k)
        _check_per_axis(self.data_dilations, k, "data_dilations", 1)
        channels, out_channels, g = x[1], w[0], self.groups
        require(channels % g == 0, f"data channels {channels} are not divisible by groups {g}")
        require(
            out_channels % g == 0, f"filter count {out_channels} is not divisible by groups {g}"
        )
        require(
            w[1] * g == channels,
            f"filters take {w[1]} channel(s) per group, data has {channels} channel(s) in {g} "
            f"group(s) ({channels // g} per group)",
        )
        spatial = tuple(
            _conv_output_size(axis, *args)
            for axis, args in enumerate(
                zip(
                    x[2:],
                    w[2:],
                    self.strides,
                    self.dilations,
                    self.padding_below,
                    self.padding_above,
                    self.data_dilations,
                    strict=True,
                )
            )
        )
        return (x[0], out_channels, *spatial)

    def infer(self, x: TensorType, w: TensorType) -> TensorType:
        require_same_element_type((x, w), "data and filters")
        require_element_type(x, et.FLOATS)
        return TensorType(x.element_type, self.output_shape(x.shape, w.shape))

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, w = inputs
        filter_shape = static_shape(w.shape[2:], "the filter sizes of a convolution gradient")
        return _convolution_data_gradient(self, x.shape, w, ct), ConvolutionBackpropFilters(
            filter_shape, *self._filter_attributes()
        )(x, ct)

    def _filter_attributes(self) -> tuple[Any, ...]:
        return (
            self.strides,
            self.dilations,
            self.padding_below,
            self.padding_above,
            self.data_dilations,
            self.groups,
        )


def convolution(
    x: Output,
    w: Output,
    strides: Any = None,
    dilations: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    data_dilations: Any = None,
    groups: int = 1,
    auto_pad: AutoPad | str = AutoPad.EXPLICIT,
) -> Output:
    """N-d convolution of channel-first data with ``(O, C / groups, f...)`` filters.

    Args:
        x: data ``(N, C, d1..dk)``, k >= 1, floating point.
        w: filters ``(O, C / groups, f1..fk)`` of the same element type.
        strides: per spatial axis (default ones).
        dilations: filter dilation per spatial axis (default ones).
        padding_below, padding_above: per spatial axis; negative values crop (default zeros).
        data_dilations: data dilation per spatial axis (default ones).
        groups: number of channel groups (``C`` for a depthwise convolution).
        auto_pad: ``"explicit"`` (default), ``"same_upper"``, ``"same_lower"`` or ``"valid"``.

    Returns:
        ``(N, O, out1..outk)`` with ``out = (D' - F') // stride + 1`` per axis (module doc).

    Raises:
        OpTypeError: ranks, channel counts, groups or per-axis attributes do not fit.

    Example:
        >>> y = convolution(x, w, strides=(2, 2), padding_below=(1, 1), padding_above=(1, 1))
    """
    return Convolution(
        strides,
        dilations,
        padding_below,
        padding_above,
        data_dilations,
        groups,
        cast(AutoPad, auto_pad),
    )(x, w)


# ------------------------------------------------------------------ backprop data (transposed)
@opclass
class ConvolutionBackpropData(ConvolutionBase):
    """Transposed convolution: the adjoint of :class:`Convolution` with respect to its data.

    Data ``(N, C, d...)`` and filters ``(C, O / groups, f...)`` (the forward convolution's
    filters, which is the ONNX ConvTranspose / torch ``conv_transpose`` layout) give
    ``(N, O, out...)`` with, per axis::

        out = (d - 1) * stride + (f - 1) * dilation + 1 - padding_below - padding_above
              + output_padding

    and ``y[o] = Σ x[i] · w[k]`` over ``o = i * stride + k * dilation - padding_below``.
    ``padding_below``/``padding_above`` are the forward convolution's padding (ONNX ``pads``,
    torch ``padding``): the transposed convolution crops them (negative values pad).
    ``output_padding`` (>= 0) adds rows at the end, which the forward convolution's floor
    division lost (ONNX ``output_padding``; torch requires it below the stride or dilation).
    """

    strides: Ints | None = None
    dilations: Ints | None = None
    padding_below: Ints | None = None
    padding_above: Ints | None = None
    output_padding: Ints | None = None
    groups: int = 1

    def __post_init__(self) -> None:
        self._normalise("strides", "dilations", "padding_below", "padding_above", "output_padding")

    def canonicalize(self, x: TensorType, w: TensorType) -> ConvolutionBackpropData:
        k = _spatial_rank(x)
        ones, zeros = (1,) * k, (0,) * k
        return ConvolutionBackpropData(
            self.strides or ones,
            self.dilations or ones,
            self.padding_below or zeros,
            self.padding_above or zeros,
            self.output_padding or zeros,
            self.groups,
        )

    def infer(self, x: TensorType, w: TensorType) -> TensorType:
        assert self.strides is not None and self.dilations is not None
        assert self.padding_below is not None and self.padding_above is not None
        assert self.output_padding is not None
        require_same_element_type((x, w), "data and filters")
        require_element_type(x, et.FLOATS)
        k = x.rank - 2
        require(w.rank == x.rank, f"filters must have rank {x.rank} like the data, got {w}")
        self._check_common(k)
        _check_per_axis(self.output_padding, k, "output_padding", 0)
        channels, g = x.shape[1], self.groups
        require(
            w.shape[0] == channels,
            f"filters have {w.shape[0]} input channel(s) (axis 0), data has {channels}",
        )
        require(channels % g == 0, f"data channels {channels} are not divisible by groups {g}")
        spatial = []
        for axis, (d, f, s, dl, pb, pa, op) in enumerate(
            zip(
                x.shape[2:],
                w.shape[2:],
                self.strides,
                self.dilations,
                self.padding_below,
                self.padding_above,
                self.output_padding,
                strict=True,
            )
        ):
            require(maybe_le(1, f), f"spatial axis {axis}: filter size must be >= 1, got {f}")
            size = (d - 1) * s + (f - 1) * dl + 1 - pb - pa + op
            require(  # symbolic: unless certainly empty, checked again at each binding
                maybe_le(1, size), f"spatial axis {axis}: output size {size} must be > 0"
            )
            spatial.append(size)
        return TensorType(x.element_type, (x.shape[0], w.shape[1] * g, *spatial))

    def forward(self) -> Convolution:
        """The convolution this op is the data adjoint of (padding above minus output padding:
        ``convolution(y, w)`` with it has exactly ``x``'s spatial shape)."""
        assert self.padding_above is not None and self.output_padding is not None
        above = tuple(a - p for a, p in zip(self.padding_above, self.output_padding, strict=True))
        return Convolution(
            self.strides, self.dilations, self.padding_below, above, None, self.groups
        )

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, w = inputs
        forward = self.forward()
        filter_shape = static_shape(w.shape[2:], "the filter sizes of a convolution gradient")
        dw = ConvolutionBackpropFilters(filter_shape, *forward._filter_attributes())(ct, x)
        return forward(ct, w), dw


def convolution_backprop_data(
    x: Output,
    w: Output,
    output_shape: Any = None,
    strides: Any = None,
    dilations: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    output_padding: Any = None,
    groups: int = 1,
) -> Output:
    """Transposed convolution (ONNX ConvTranspose, torch ``conv_transpose1d/2d/3d``).

    Args:
        x: data ``(N, C, d1..dk)``, floating point.
        w: filters ``(C, O / groups, f1..fk)`` (torch's and ONNX's ConvTranspose layout, i.e.
            the filters of the forward convolution this is the data gradient of).
        output_shape: the spatial output shape ``(out1..outk)``; when given, ``output_padding``
            is derived from it (and must not be given too). ONNX's ``output_shape`` with
            ``auto_pad`` also moves padding: importers compute explicit pads first.
        strides, dilations: per spatial axis (default ones).
        padding_below, padding_above: the forward padding, cropped from the result (ONNX
            ``pads`` begin/end, torch ``padding`` on both sides); default zeros.
        output_padding: extra rows at the end of each spatial axis (default zeros).
        groups: channel groups.

    Returns:
        ``(N, O, out...)`` (see :class:`ConvolutionBackpropData` for the size formula).

    Raises:
        OpTypeError: layouts, channel counts or attributes do not fit, or ``output_shape``
            is smaller than the size without output padding.
    """
    if output_shape is not None:
        output_padding = _output_padding_for(
            x, w, output_shape, output_padding, strides, dilations, padding_below, padding_above
        )
    op = ConvolutionBackpropData(
        strides, dilations, padding_below, padding_above, output_padding, groups
    )
    return op(x, w)


def _output_padding_for(
    x: Output,
    w: Output,
    output_shape: Any,
    output_padding: Any,
    strides: Any,
    dilations: Any,
    below: Any,
    above: Any,
) -> Ints:
    """The output padding that makes a transposed convolution ``output_shape`` large."""
    if output_padding is not None:
        raise OpTypeError("ConvolutionBackpropData: give output_shape or output_padding, not both")
    target = as_int_tuple(output_shape, "output_shape")
    probe = ConvolutionBackpropData(strides, dilations, below, above, None, 1)
    k = x.rank - 2
    if len(target) != k or w.rank != x.rank or x.rank < 3:
        raise OpTypeError(
            f"ConvolutionBackpropData: output_shape {target} must have one entry per spatial "
            f"axis of {x.type}"
        )
    canonical = probe.canonicalize(x.tensor_type, w.tensor_type)
    assert canonical.strides is not None and canonical.dilations is not None
    assert canonical.padding_below is not None and canonical.padding_above is not None
    base = [
        (d - 1) * s + (f - 1) * dl + 1 - pb - pa
        for d, f, s, dl, pb, pa in zip(
            x.shape[2:],
            w.shape[2:],
            canonical.strides,
            canonical.dilations,
            canonical.padding_below,
            canonical.padding_above,
            strict=False,
        )
    ]
    padding = tuple(t - b for t, b in zip(target, base, strict=False))
    if any(p < 0 for p in padding):
        raise OpTypeError(
            f"ConvolutionBackpropData: output_shape {target} is smaller than the transposed "
            f"convolution's natural size {tuple(base)}"
        )
    return padding


# ----------------------------------------------------------------------- backprop filters
@opclass
class ConvolutionBackpropFilters(ConvolutionBase):
    """The gradient of :class:`Convolution` with respect to its filters.

    Inputs: the forward data ``(N, C, d...)`` and the output cotangent ``(N, O, out...)``;
    result: filters ``(O, C / groups, f...)`` with ``filter_shape = (f...)``::

        dw[o, c, k] = Σ_{n, j} ct[n, o, j] · x̂[n, group(o)·C/groups + c, j·stride + k·dilation]

    where ``x̂`` is the data after data dilation and padding. The attributes are those of the
    forward convolution; the cotangent's shape must be the forward result's shape.
    """

    filter_shape: Ints
    strides: Ints | None = None
    dilations: Ints | None = None
    padding_below: Ints | None = None
    padding_above: Ints | None = None
    data_dilations: Ints | None = None
    groups: int = 1

    def __post_init__(self) -> None:
        set_attr(self, "filter_shape", as_int_tuple(self.filter_shape, "filter_shape"))
        self._normalise("strides", "dilations", "padding_below", "padding_above", "data_dilations")

    def forward(self) -> Convolution:
        """The forward convolution whose filter gradient this is."""
        return Convolution(
            self.strides,
            self.dilations,
            self.padding_below,
            self.padding_above,
            self.data_dilations,
            self.groups,
        )

    def canonicalize(self, x: TensorType, ct: TensorType) -> ConvolutionBackpropFilters:
        k = _spatial_rank(x)
        ones, zeros = (1,) * k, (0,) * k
        return ConvolutionBackpropFilters(
            self.filter_shape,
            self.strides or ones,
            self.dilations or ones,
            self.padding_below or zeros,
            self.padding_above or zeros,
            self.data_dilations or ones,
            self.groups,
        )

    def infer(self, x: TensorType, ct: TensorType) -> TensorType:
        require_same_element_type((x, ct), "data and output cotangent")
        require_element_type(x, et.FLOATS)
        k = x.rank - 2
        _check_per_axis(self.filter_shape, k, "filter_shape", 1)
        require(ct.rank == x.rank, f"output cotangent must have rank {x.rank}, got {ct}")
        require(self.groups >= 1, f"groups must be >= 1, got {self.groups}")
        require(
            x.shape[1] % self.groups == 0,
            f"data channels {x.shape[1]} are not divisible by groups {self.groups}",
        )
        filters = (ct.shape[1], x.shape[1] // self.groups, *self.filter_shape)
        expected = self.forward().output_shape(x.shape, filters)
        require(
            expected == ct.shape,
            f"output cotangent shape {list(ct.shape)} differs from the forward convolution's "
            f"result shape {list(expected)}",
        )
        return TensorType(x.element_type, filters)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct_w: Output
    ) -> tuple[Output | None, ...]:
        x, ct = inputs
        forward = self.forward()
        # dw is bilinear in (x, ct): its adjoints are the forward convolution's two products.
        return _convolution_data_gradient(forward, x.shape, ct_w, ct), forward(x, ct_w)


def convolution_backprop_filters(
    x: Output,
    ct: Output,
    filter_shape: Any,
    strides: Any = None,
    dilations: Any = None,
    padding_below: Any = None,
    padding_above: Any = None,
    data_dilations: Any = None,
    groups: int = 1,
) -> Output:
    """The filter gradient of ``convolution(x, w, ...)`` for output cotangent ``ct``.

    Args:
        x: the forward data ``(N, C, d...)``.
        ct: the cotangent of the forward result ``(N, O, out...)``.
        filter_shape: the spatial filter shape ``(f1..fk)`` (it cannot be inferred when
            strides exceed 1).
        strides, dilations, padding_below, padding_above, data_dilations, groups: the forward
            convolution's attributes.

    Returns:
        ``(O, C / groups, f...)``.

    Raises:
        OpTypeError: the attributes do not describe a convolution from ``x`` to ``ct``'s shape.
    """
    return ConvolutionBackpropFilters(
        filter_shape, strides, dilations, padding_below, padding_above, data_dilations, groups
    )(x, ct)


# ------------------------------------------------------------------------- adjoint helpers
def _convolution_data_gradient(
    op: Convolution, data_shape: Sequence[Dim], w: Output, ct: Output
) -> Output:
    """The cotangent of a convolution's data: a transposed convolution of ``ct`` (with output
    padding recovering the rows the forward floor division dropped), subsampled by the data
    dilation."""
    assert op.strides is not None and op.padding_below is not None
    assert op.padding_above is not None and op.data_dilations is not None
    assert op.dilations is not None
    sizes = [_dilated_size(d, dd) for d, dd in zip(data_shape[2:], op.data_dilations, strict=True)]
    if math.prod(data_shape) == 0 or math.prod(ct.shape) == 0:
        zero = constant(0, ct.element_type)
        return movement.broadcast(zero, tuple(data_shape), tuple(range(len(data_shape))))
    output_padding = tuple(
        (size + pb + pa - ((f - 1) * dl + 1)) % s
        for size, pb, pa, f, dl, s in zip(
            sizes,
            op.padding_below,
            op.padding_above,
            w.shape[2:],
            op.dilations,
            op.strides,
            strict=True,
        )
    )
    grad = ConvolutionBackpropData(
        op.strides, op.dilations, op.padding_below, op.padding_above, output_padding, op.groups
    )(ct, w)
    if all(dd == 1 for dd in op.data_dilations):
        return grad
    return movement.slice(grad, [0] * grad.rank, grad.shape, (1, 1, *op.data_dilations))
