"""Neural-network ops the CPU backend expands into core ops so that they fuse: softmax and
log-softmax become one row kernel (max, sum of exponentials, normalize), batch normalization
in inference an elementwise epilogue with per-channel constants (folded when the statistics
are constants). 16-bit floats are computed in f32, as the reference does."""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.fused.lowering.registry import REWRITES
from opgraph.builders.scalars import scalar_like
from opgraph.core import element_type as et
from opgraph.core.node import Node, Output
from opgraph.ops import elementwise as ew
from opgraph.ops import nn
from opgraph.ops.conversion import convert
from opgraph.ops.movement import broadcast
from opgraph.ops.reduction import reduce_max, reduce_sum

_NARROW = (et.f16, et.bf16)


def _wide(x: Output) -> Output:
    return convert(x, et.f32) if x.element_type in _NARROW else x


def _back(y: Output, like: Output) -> Output:
    return convert(y, like.element_type) if y.element_type is not like.element_type else y


def _shifted(x: Output, axis: int) -> Output:
    """``x - max(x)`` along ``axis`` (the stable form)."""
    peak = reduce_max(x, (axis,))
    return ew.subtract(x, broadcast(peak, x.shape, (axis,)))


@REWRITES.register(nn.Softmax)
def _softmax(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    assert isinstance(node.op, nn.Softmax)
    (x,) = inputs
    axis = node.op.axis
    e = ew.exp(_shifted(_wide(x), axis))
    total = reduce_sum(e, (axis,))
    return [_back(ew.divide(e, broadcast(total, e.shape, (axis,))), x)]


@REWRITES.register(nn.LogSoftmax)
def _log_softmax(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    assert isinstance(node.op, nn.LogSoftmax)
    (x,) = inputs
    axis = node.op.axis
    s = _shifted(_wide(x), axis)
    log_total = ew.log(reduce_sum(ew.exp(s), (axis,)))
    return [_back(ew.subtract(s, broadcast(log_total, s.shape, (axis,))), x)]


@REWRITES.register(nn.BatchNormInference)
def _batch_norm(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output]:
    """``(x - mean) * (scale / sqrt(var + eps)) + bias`` per channel (axis 1)."""
    assert isinstance(node.op, nn.BatchNormInference)
    x, scale, bias, mean, variance = (_wide(v) for v in inputs)
    eps = scalar_like(node.op.epsilon, variance)
    factor = ew.divide(scale, ew.sqrt(ew.add(variance, eps)))
    others = (0, *range(2, x.rank))

    def channel(v: Output) -> Output:
        return broadcast(v, x.shape, others)

    centered = ew.subtract(x, channel(mean))
    return [_back(ew.add(ew.multiply(centered, channel(factor)), channel(bias)), inputs[0])]
