"""Losses built from core ops (stable log-softmax and softmax cross-entropy)."""

from __future__ import annotations

from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import normalize_axis, static_dim
from opgraph.ops.elementwise import exp, log, multiply, subtract
from opgraph.ops.movement import broadcast
from opgraph.ops.reduction import reduce_max, reduce_sum
from opgraph.ops.structural import stop_gradient


def log_softmax(logits: Output, axis: int = -1) -> Output:
    """``x − max(x) − log Σ exp(x − max(x))`` along ``axis``, numerically stable.

    The maximum is a constant shift of the result, so no gradient flows through it
    (``stop_gradient``): the adjoint is the softmax one, without a reduce-max adjoint.
    """
    axis = normalize_axis(axis, logits.rank, "axis")
    shift = stop_gradient(reduce_max(logits, (axis,)))
    shifted = subtract(logits, broadcast(shift, logits.shape, (axis,)))
    total = log(reduce_sum(exp(shifted), (axis,)))
    return subtract(shifted, broadcast(total, logits.shape, (axis,)))


def softmax_cross_entropy(logits: Output, labels: Output) -> Output:
    """The mean over the batch of ``−Σ labels · log_softmax(logits)``.

    Args:
        logits: ``(batch, classes)`` floating-point scores.
        labels: the same type: one-hot rows, or any probability rows.

    Returns:
        A scalar of the logits' element type.

    Raises:
        OpTypeError: the inputs are not two equal rank-2 float types.
    """
    if logits.rank != 2 or labels.type != logits.type or not logits.element_type.is_real:
        raise OpTypeError(
            f"softmax_cross_entropy: needs float (batch, classes) logits and labels of the same "
            f"type, got {logits.type} and {labels.type}"
        )
    per_example = reduce_sum(multiply(labels, log_softmax(logits, 1)), (1,))
    batch = static_dim(logits.shape[0], "the batch mean of softmax_cross_entropy")
    scale = constant(-1.0 / batch if batch else 0.0, logits.element_type)
    return multiply(reduce_sum(per_example, (0,)), scale)


__all__ = ["log_softmax", "softmax_cross_entropy"]
