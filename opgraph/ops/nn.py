"""Neural-network ops: softmax, log-softmax, batch normalization and local response
normalization. Floating-point element types only; channel-first data (channels on axis 1).
"""

from __future__ import annotations

import math
from typing import Any

import opgraph.ops.movement as movement
from opgraph.core import element_type as et
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import as_int, normalize_axis
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.common import (
    as_float,
    require_element_type,
    require_min_rank,
    require_same_element_type,
)
from opgraph.ops.elementwise import add, divide, exp, multiply, negative, power, sqrt, subtract
from opgraph.ops.movement import broadcast
from opgraph.ops.reduction import element_count, reduce_sum

__all__ = [
    "SoftmaxBase",
    "Softmax",
    "softmax",
    "LogSoftmax",
    "log_softmax",
    "BatchNormBase",
    "BatchNormInference",
    "batch_norm_inference",
    "BatchNormTraining",
    "batch_norm_training",
    "LRN",
    "lrn",
]


# ---------------------------------------------------------------------------------- softmax
class SoftmaxBase(Op):
    """Family base: one ``axis`` (canonical: non-negative), floating-point input."""

    __slots__ = ()
    num_inputs = 1
    axis: int

    def __post_init__(self) -> None:
        set_attr(self, "axis", as_int(self.axis, "axis"))

    def canonicalize(self, x: TensorType) -> Op:
        require(x.rank >= 1, f"input must have rank >= 1, got scalar {x}")
        return type(self)(normalize_axis(self.axis, x.rank))  # type: ignore[call-arg]

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, et.FLOATS)
        return x


@opclass
class Softmax(SoftmaxBase):
    """``exp(x - max) / Σ exp(x - max)`` along ``axis`` (ONNX Softmax-13; numerically stable:
    large inputs do not overflow). A slice of all ``-inf`` gives NaN."""

    axis: int = -1

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        y = output
        inner = _sum_back(multiply(ct, y), self.axis)
        return (multiply(y, subtract(ct, inner)),)


def softmax(x: Output, axis: int = -1) -> Output:
    """Softmax of ``x`` along ``axis`` (negative axes count from the end).

    Raises:
        OpTypeError: ``x`` is a scalar or not floating point, or ``axis`` is out of range.
    """
    return Softmax(axis)(x)


@opclass
class LogSoftmax(SoftmaxBase):
    """``x - max - log Σ exp(x - max)`` along ``axis`` (ONNX LogSoftmax-13; stable)."""

    axis: int = -1

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        total = _sum_back(ct, self.axis)
        return (subtract(ct, multiply(exp(output), total)),)


def log_softmax(x: Output, axis: int = -1) -> Output:
    """Logarithm of the softmax of ``x`` along ``axis``, computed without overflow.

    Raises:
        OpTypeError: ``x`` is a scalar or not floating point, or ``axis`` is out of range.
    """
    return LogSoftmax(axis)(x)


def _sum_back(value: Output, axis: int) -> Output:
    """Σ ``value`` along ``axis``, broadcast back to ``value``'s shape."""
    return broadcast(reduce_sum(value, (axis,)), value.shape, (axis,))


# ------------------------------------------------------------------------------- batch norm
def _check_batch_norm(x: TensorType, *per_channel: tuple[str, TensorType]) -> None:
    require_min_rank(x, 2, "data")
    require_element_type(x, et.FLOATS, "data")
    require_same_element_type((x, *(t for _, t in per_channel)))
    channels = x.shape[1]
    for name, t in per_channel:
        require(
            t.shape == (channels,),
            f"{name} must have shape [{channels}] (the data's channel count), got {t}",
        )


class BatchNormBase(Op):
    """Family base: ``epsilon`` (>= 0), channel axis 1."""

    __slots__ = ()
    epsilon: float

    def __post_init__(self) -> None:
        epsilon = as_float(self.epsilon, "epsilon")
        if not epsilon >= 0 or math.isinf(epsilon):
            raise OpTypeError(f"epsilon must be finite and >= 0, got {epsilon!r}")
        set_attr(self, "epsilon", epsilon)


@opclass
class BatchNormInference(BatchNormBase):
    """``scale · (x - mean) / sqrt(variance + epsilon) + bias`` per channel (axis 1).

    Inputs (ONNX BatchNormalization order): data ``(N, C, ...)`` of rank >= 2, then ``scale``,
    ``bias``, ``mean``, ``variance``, each ``(C,)``. Differentiable in all five.
    """

    epsilon: float = 1e-5
    num_inputs = 5

    def infer(self, x: TensorType, *params: TensorType) -> TensorType:
        names = ("scale", "bias", "mean", "variance")
        _check_batch_norm(x, *zip(names, params, strict=True))
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        x, scale, _, mean, variance = inputs
        inv = _inverse_std(variance, self.epsilon)
        centered = subtract(x, _per_channel(mean, x))
        d_bias = _channel_sum(ct)
        weighted = _channel_sum(multiply(ct, centered))
        scale_inv = multiply(scale, inv)
        d_x = multiply(ct, _per_channel(scale_inv, x))
        d_mean = negative(multiply(d_bias, scale_inv))
        cubed = multiply(inv, multiply(inv, inv))
        d_var = multiply(multiply(weighted, scale), multiply(cubed, scalar_like(-0.5, inv)))
        return d_x, multiply(weighted, inv), d_bias, d_mean, d_var


def batch_norm_inference(
    x: Output, scale: Output, bias: Output, mean: Output, variance: Output, epsilon: float = 1e-5
) -> Output:
    """Normalize ``x`` per channel (axis 1) with given statistics.

    Args:
        x: data ``(N, C, ...)``, rank >= 2, floating point.
        scale, bias, mean, variance: ``(C,)`` each, of ``x``'s element type.
        epsilon: added to the variance (>= 0).

    Returns:
        ``scale · (x - mean) / sqrt(variance + epsilon) + bias``, shaped like ``x``.

    Raises:
        OpTypeError: ranks, shapes or element types do not fit, or epsilon is negative.
    """
    return BatchNormInference(epsilon)(x, scale, bias, mean, variance)


@opclass
class BatchNormTraining(BatchNormBase):
    """Batch normalization with the batch's own statistics: three outputs
    ``(normalized, mean, variance)``.

    Inputs: data ``(N, C, ...)`` (rank >= 2), ``scale`` and ``bias`` ``(C,)``. ``mean`` and
    ``variance`` are taken per channel over every axis but 1; the variance is the biased one
    (divided by the element count, as nGraph and ONNX training mode). Differentiable in all
    three inputs, through all three outputs.
    """

    epsilon: float = 1e-5
    num_inputs = 3
    multi_output = True

    def infer(self, x: TensorType, scale: TensorType, bias: TensorType) -> Any:
        _check_batch_norm(x, ("scale", scale), ("bias", bias))
        stats = TensorType(x.element_type, (x.shape[1],))
        return x, stats, stats

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        x, scale, _ = inputs
        _, mean, variance = outputs
        if all(c is None for c in cotangents) or x.tensor_type.size == 0:
            return (None, None, None)
        return _batch_norm_training_adjoint(self.epsilon, x, scale, mean, variance, cotangents)


def batch_norm_training(
    x: Output, scale: Output, bias: Output, epsilon: float = 1e-5
) -> tuple[Output, Output, Output]:
    """Normalize ``x`` per channel (axis 1) with the batch statistics.

    Args:
        x: data ``(N, C, ...)``, rank >= 2, floating point.
        scale, bias: ``(C,)`` each.
        epsilon: added to the variance (>= 0).

    Returns:
        ``(normalized, batch_mean, batch_variance)``; the variance is biased (divided by the
        number of elements per channel).

    Raises:
        OpTypeError: ranks, shapes or element types do not fit, or epsilon is negative.
    """
    normalized, mean, variance = BatchNormTraining(epsilon)(x, scale, bias)
    return normalized, mean, variance


def _per_channel(value: Output, like: Output) -> Output:
    """A ``(C,)`` value broadcast along every axis of ``like`` but 1."""
    return broadcast(value, like.shape, tuple(a for a in range(like.rank) if a != 1))


def _channel_sum(value: Output) -> Output:
    return reduce_sum(value, tuple(a for a in range(value.rank) if a != 1))


def _inverse_std(variance: Output, epsilon: float) -> Output:
    return divide(scalar_like(1, variance), sqrt(add(variance, scalar_like(epsilon, variance))))


def _batch_norm_training_adjoint(
    epsilon: float,
    x: Output,
    scale: Output,
    mean: Output,
    variance: Output,
    cotangents: tuple[Output | None, ...],
) -> tuple[Output | None, ...]:
    """With x̂ = (x - m)·r, r = (v + ε)^-½ and M elements per channel:
    dx = r·(g - mean(g) - x̂·mean(g·x̂)) for g = ct_y·scale, plus ct_m / M and
    ct_v · 2(x - m) / M from the statistics outputs."""
    ct_y, ct_mean, ct_var = cotangents
    axes = (0, *range(2, x.rank))
    count = math.prod(x.shape[a] for a in axes)  # symbolic: computed at run time (shape_of)
    inv_count = (
        scalar_like(1.0 / count, mean)
        if type(count) is int
        else divide(scalar_like(1.0, mean), element_count(x, axes, mean))
    )
    centered = subtract(x, _per_channel(mean, x))
    terms: list[Output] = []
    d_scale = d_bias = None
    if ct_y is not None:
        inv = _inverse_std(variance, epsilon)
        x_hat = multiply(centered, _per_channel(inv, x))
        d_bias, d_scale = _channel_sum(ct_y), _channel_sum(multiply(ct_y, x_hat))
        g = multiply(ct_y, _per_channel(scale, x))
        mean_g = multiply(_channel_sum(g), inv_count)
        mean_gx = multiply(multiply(d_scale, scale), inv_count)  # mean(g·x̂) = Σ(ct·x̂)·scale/M
        inner = subtract(
            subtract(g, _per_channel(mean_g, x)), multiply(x_hat, _per_channel(mean_gx, x))
        )
        terms.append(multiply(inner, _per_channel(inv, x)))
    if ct_mean is not None:
        terms.append(_per_channel(multiply(ct_mean, inv_count), x))
    if ct_var is not None:
        twice = multiply(
            ct_var,
            scalar_like(2.0 / count, mean)
            if type(count) is int
            else multiply(scalar_like(2.0, mean), inv_count),
        )
        terms.append(multiply(centered, _per_channel(twice, x)))
    d_x = terms[0]
    for term in terms[1:]:
        d_x = add(d_x, term)
    return d_x, d_scale, d_bias


# -------------------------------------------------------------------------------------- LRN
@opclass
class LRN(Op):
    """Local response normalization across channels (ONNX LRN).

    ``y = x / (bias + alpha / size · Σ x²)^beta``, the sum over channels
    ``c - ⌊(size-1)/2⌋ .. c + ⌈(size-1)/2⌉`` (clipped to the valid channels). Data
    ``(N, C, d...)`` of rank >= 3. For even ``size`` torch's window is shifted by one
    (``c - size/2 .. c + size/2 - 1``); odd sizes agree.
    """

    contracting = True  # each output element reads many input elements

    alpha: float
    beta: float
    bias: float
    size: int
    num_inputs = 1

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "bias"):
            set_attr(self, name, as_float(getattr(self, name), name))
        set_attr(self, "size", as_int(self.size, "size"))

    def window(self) -> tuple[int, int]:
        """Channels summed (below, above) each channel."""
        below = (self.size - 1) // 2
        return below, self.size - 1 - below

    def infer(self, x: TensorType) -> TensorType:
        require(self.size >= 1, f"size must be >= 1, got {self.size}")
        require_min_rank(x, 3, "data")
        require_element_type(x, et.FLOATS)
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (_lrn_adjoint(self, inputs[0], output, ct),)


def lrn(x: Output, alpha: float, beta: float, bias: float, size: int) -> Output:
    """Local response normalization across the channels of ``x`` (ONNX LRN).

    Args:
        x: data ``(N, C, d1..dk)``, rank >= 3, floating point.
        alpha, beta, bias: the formula's constants (ONNX defaults: 1e-4, 0.75, 1.0).
        size: number of channels in the window (>= 1).

    Returns:
        ``x / (bias + alpha / size · Σ_window x²) ** beta``, shaped like ``x``.

    Raises:
        OpTypeError: ``x`` has rank < 3 or is not floating point, or ``size < 1``.
    """
    return LRN(alpha, beta, bias, size)(x)


def _channel_window_sum(value: Output, below: int, above: int) -> Output:
    """``out[:, c] = Σ value[:, c - below .. c + above]`` (zero outside the channels)."""
    channels = value.shape[1]

    def zeros(count: int) -> Output:
        shape = (value.shape[0], count, *value.shape[2:])
        return movement.broadcast(constant(0, value.element_type), shape, tuple(range(value.rank)))

    padded = movement.concat([zeros(below), value, zeros(above)], 1)
    total: Output | None = None
    for offset in range(below + above + 1):
        lower = [0] * value.rank
        upper = list(value.shape)
        lower[1], upper[1] = offset, offset + channels
        piece = movement.slice(padded, lower, upper)
        total = piece if total is None else add(total, piece)
    assert total is not None
    return total


def _lrn_adjoint(op: LRN, x: Output, y: Output, ct: Output) -> Output:
    """With d = bias + α/n·S(x²) and y = x·d^-β:
    dx = ct·d^-β - 2αβ/n · x · Sᵀ(ct·y/d), Sᵀ the window sum with below/above swapped."""
    below, above = op.window()
    squares = _channel_window_sum(multiply(x, x), below, above)
    d = add(scalar_like(op.bias, x), multiply(scalar_like(op.alpha / op.size, x), squares))
    direct = multiply(ct, power(d, scalar_like(-op.beta, x)))
    spread = _channel_window_sum(divide(multiply(ct, y), d), above, below)
    factor = scalar_like(2 * op.alpha * op.beta / op.size, x)
    return subtract(direct, multiply(factor, multiply(x, spread)))
