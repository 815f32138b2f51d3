"""Tensor factories: full, zeros, ones, empty, *_like, new_*, scalar_tensor, arange, linspace,
eye.

The element type comes from the node's metadata, where ATen's dtype inference (fill value
kind, default dtype, ``dtype=``) already decided it. Constant fills become a broadcast scalar,
not a large Constant; ``empty`` is zero-filled (its contents are unspecified in torch).
Sequences (``arange``, ``linspace``, ``eye``) are evaluated by torch itself at conversion time,
so their values match torch bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch

from opgraph.core.dim import DimExpr
from opgraph.core.node import Output
from opgraph.frontends.torch.context import NodeContext, fill, literal, tensor_constant
from opgraph.frontends.torch.converters.common import overloads
from opgraph.frontends.torch.registry import aten_op


def _filled(ctx: NodeContext, value: object) -> Output:
    return fill(value, ctx.out_element_type(), ctx.out_shape())


@aten_op(*overloads("full.default", "full_like.default", "new_full.default"))
def _full(ctx: NodeContext) -> Output:
    return _filled(ctx, ctx["fill_value"])


@aten_op(
    *overloads(
        "zeros.default",
        "zeros_like.default",
        "new_zeros.default",
        "empty.memory_format",
        "empty_like.default",
        "new_empty.default",
        "empty_strided.default",
        "new_empty_strided.default",
    )
)
def _zeros(ctx: NodeContext) -> Output:
    return _filled(ctx, 0)


@aten_op(*overloads("ones.default", "ones_like.default", "new_ones.default"))
def _ones(ctx: NodeContext) -> Output:
    return _filled(ctx, 1)


@aten_op(*overloads("scalar_tensor.default"))
def _scalar_tensor(ctx: NodeContext) -> Output:
    return literal(ctx["s"], ctx.out_element_type())


@aten_op(
    *overloads(
        "arange.default", "arange.start", "arange.start_step", "linspace.default", "eye.default"
    )
)
def _evaluate(ctx: NodeContext) -> Output:
    """Run the factory in torch (on the CPU) and keep the values as a Constant."""
    factory: Any = ctx.node.target
    arguments = dict(ctx.args)
    symbolic = [name for name, v in arguments.items() if isinstance(v, DimExpr)]
    if symbolic:
        raise ctx.fail(f"needs static sizes; {', '.join(symbolic)} is symbolic")
    arguments.update(device=torch.device("cpu"), pin_memory=False)
    with torch.no_grad():
        value = factory(**arguments)
    return tensor_constant(value, ctx.where)
