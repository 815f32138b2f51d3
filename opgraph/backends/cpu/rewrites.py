"""Graph rewrites the CPU backend applies before the shared fused pipeline (``compile`` calls
:func:`rewrite_for_cpu`). They are CPU choices, so they stay out of the shared ``REWRITES``
table, which the GPU backend runs too:

* products of one activation by several constant matrices (attention's Q, K, V) become one
  product by the matrices side by side, read as column slices (``packed_products.py``);
* ``transpose(dot(a, b))`` with one use becomes ``dot(bᵀ, aᵀ)`` (``passes.transpose_products``):
  a ``x @ w.T`` layer's weight gradient lands in the weight's layout;
* a float sum over leading axes becomes products with a vector of ones (``column_sums.py``);
* the data gradient of a 3x3 stride-1 convolution with large planes, and such a convolution
  itself when its filters are computed (a training step's parameters), become the Winograd
  filter transform and a Winograd convolution (``fused/lowering/winograd_gradients.py``).

(The filter gradient of such a convolution needs no rewrite: its lowering is a native
Winograd F(3x3, 2x2) step, ``fused/lowering/winograd_filter_gradient.py``.)

The first is what every training step's backward makes; the others measured 40x and 1.3-1.4x
faster on one thread (docs/cpu.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opgraph.backends.cpu.column_sums import column_sum
from opgraph.backends.cpu.packed_products import pack_sibling_products
from opgraph.backends.fused.lowering.winograd_gradients import (
    winograd_data_gradient,
    winograd_forward,
)
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.node import Node, Output
from opgraph.core.registry import Registry
from opgraph.ops.convolution import (
    Convolution,
    ConvolutionBackpropData,
)
from opgraph.ops.reduction import ReduceSum
from opgraph.passes.transpose_products import transpose_products

Rewrite = Callable[[Node, tuple[Output, ...]], Sequence[Output] | None]

#: ``rule(node, inputs) -> outputs | None``, by op class.
CPU_REWRITES: Registry[type, Rewrite] = Registry("CPU rewrite")
CPU_REWRITES.add(ReduceSum, column_sum)
CPU_REWRITES.add(ConvolutionBackpropData, winograd_data_gradient)
CPU_REWRITES.add(Convolution, winograd_forward)

#: Rounds of the table (a blocked sum's partial sums are a sum again).
_ROUNDS = 4


def rewrite_for_cpu(fn: Function) -> Function:
    """``fn`` with the CPU rewrites applied until none fires (at most a few rounds).

    Needs: nothing. Guarantees: the same parameters and result types; values equal up to the
    order of floating-point sums (see the rules' modules).
    """
    fn = pack_sibling_products(transpose_products(fn))

    def rewrite(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        rule = CPU_REWRITES.get(type(node.op))
        return None if rule is None else rule(node, inputs)

    for _ in range(_ROUNDS):
        mapping = rebuild_nodes(fn.nodes, rewrite)
        if not mapping:
            break
        fn = fn.with_outputs(mapping)
    return fn
