"""ATen backward overloads that core ATen keeps (no decomposition): convolution and pooling.

Each one rebuilds its forward with the forward op's own converter (the backward schemas name
their arguments like the forward's) and takes opgraph's adjoint of it with
:func:`opgraph.autodiff.gradients`, so the gradient is exactly the op's ``vjp``: the forward
nodes themselves are dead afterwards and dropped by dead-code elimination.
"""

from __future__ import annotations

from typing import Any

from opgraph import ops
from opgraph.autodiff import gradients
from opgraph.core.node import Output
from opgraph.frontends.torch.context import NodeContext
from opgraph.frontends.torch.converters.common import aten, overloads
from opgraph.frontends.torch.registry import aten_op, lookup


def _adjoint(
    ctx: NodeContext, forward: str, args: dict[str, Any], wrt: list[Output], ct: Output
) -> list[Output]:
    """Cotangents of ``wrt`` for output cotangent ``ct`` of ``aten.<forward>`` on ``args``."""
    converter = lookup(aten(forward))
    if converter is None:  # pragma: no cover - the forward converters are always registered
        raise ctx.fail(f"no converter for aten.{forward} to differentiate")
    y = converter(NodeContext(ctx.node, args))
    if not isinstance(y, Output) or y.type != ct.type:
        raise ctx.fail(f"the forward made {getattr(y, 'type', y)}, the gradient is {ct.type}")
    return gradients([y], wrt, [ct])


@aten_op(*overloads("convolution_backward.default"))
def _convolution_backward(ctx: NodeContext) -> tuple[Output | None, ...]:
    ct, x, w = ctx.tensor("grad_output"), ctx.tensor("input"), ctx.tensor("weight")
    mask = [bool(m) for m in ctx["output_mask"]]
    grad_x = grad_w = grad_b = None
    if mask[0] or mask[1]:
        args = ctx.args | {"bias": None}
        grad_x, grad_w = _adjoint(ctx, "convolution.default", args, [x, w], ct)
    if mask[2]:
        grad_b = ops.reduce_sum(ct, tuple(a for a in range(ct.rank) if a != 1))
    return (grad_x if mask[0] else None, grad_w if mask[1] else None, grad_b)


@aten_op(
    *overloads(
        "max_pool2d_with_indices_backward.default",
        "max_pool3d_with_indices_backward.default",
    )
)
def _max_pool_backward(ctx: NodeContext) -> Output:
    """Torch scatters to the saved indices, which are each window's first maximum: opgraph's
    max-pool adjoint adds each cotangent at the same place."""
    rank = "3d" if "3d" in str(ctx.node.target) else "2d"
    x = ctx.tensor("self")
    (grad,) = _adjoint(ctx, f"max_pool{rank}.default", ctx.args, [x], ctx.tensor("grad_output"))
    return grad


@aten_op(*overloads("avg_pool2d_backward.default", "avg_pool3d_backward.default"))
def _avg_pool_backward(ctx: NodeContext) -> Output:
    rank = "3d" if "3d" in str(ctx.node.target) else "2d"
    x = ctx.tensor("self")
    (grad,) = _adjoint(ctx, f"avg_pool{rank}.default", ctx.args, [x], ctx.tensor("grad_output"))
    return grad


@aten_op(
    *overloads("_adaptive_avg_pool2d_backward.default", "_adaptive_avg_pool3d_backward.default")
)
def _adaptive_avg_pool_backward(ctx: NodeContext) -> Output:
    rank = "3d" if "3d" in str(ctx.node.target) else "2d"
    x, ct = ctx.tensor("self"), ctx.tensor("grad_output")
    args = {"self": x, "output_size": list(ct.shape[-int(rank[0]) :])}
    (grad,) = _adjoint(ctx, f"_adaptive_avg_pool{rank}.default", args, [x], ct)
    return grad
