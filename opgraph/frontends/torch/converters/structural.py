"""FX plumbing: ``operator.getitem`` picks one output of a multi-output node;
``Tensor.item()`` (``_local_scalar_dense``) gives a run-time Python number."""

from __future__ import annotations

import operator
from typing import Any

from opgraph import ops
from opgraph.frontends.torch.context import NodeContext
from opgraph.frontends.torch.converters.common import overloads
from opgraph.frontends.torch.promotion import Scalar
from opgraph.frontends.torch.registry import aten_op


@aten_op(operator.getitem)
def _getitem(ctx: NodeContext) -> Any:
    values, index = ctx["arg0"], ctx["arg1"]
    value = values[index]
    if value is None:
        raise ctx.fail(f"output {index} of {ctx.node.args[0]} was not built")
    return value


@aten_op(*overloads("_local_scalar_dense.default"))
def _item(ctx: NodeContext) -> Scalar:
    """The one element of a tensor as a run-time Python number."""
    x = ctx.tensor("self")
    if x.tensor_type.size != 1:
        raise ctx.fail(f"item() of a {x.type} tensor (one element needed)")
    value = x if x.rank == 0 else ops.reshape(x, [])
    kind = bool if x.element_type.is_boolean else int if x.element_type.is_integral else float
    return Scalar(value, kind)
