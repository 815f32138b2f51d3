"""The CPU backend's lowering pipeline, up to the fused program."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opgraph import passes
from opgraph.backends.cpu.config import CpuConfig
from opgraph.backends.fused.lowering import REDUCTIONS, REWRITES, SCALAR_OPS, STEP_OPS, VIEW_OPS
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.passes.decompose import decompose
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.unbox_tuples import unbox_tuples


def is_native(op: Op) -> bool:
    """Whether the CPU backend generates code for ``op`` itself (else it is decomposed when
    it can be, and otherwise runs its reference kernel)."""
    cls = type(op)
    return any(cls in table for table in (SCALAR_OPS, REDUCTIONS, VIEW_OPS, STEP_OPS, REWRITES))


def optimizer() -> Callable[[Function], Function] | None:
    """The default optimization pipeline, ``opgraph.passes.optimize``, once it exists."""
    found: Callable[[Function], Function] | None = getattr(passes, "optimize", None)
    return found


def lower_for_cpu(fn: Function, config: CpuConfig) -> Function:
    """Clone, inline calls, unbox tuples, decompose what has no native lowering, apply the
    CPU rewrites (``REWRITES``: expansions that fuse better), optimize, rewrite again.

    Needs: a valid Function. Guarantees: no tuples or calls; every op is native, has a
    reference kernel, or is reported by the backend as unsupported.
    """
    fn = unbox_tuples(inline_calls(fn.clone()))
    fn = apply_rewrites(decompose(fn, is_supported=is_native))
    optimize = optimizer()
    if config.optimize and optimize is not None:
        fn = apply_rewrites(optimize(fn))
    return fn


def apply_rewrites(fn: Function) -> Function:
    """Apply the CPU rewrites registered by op class until none fires."""

    def rewrite(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        rule = REWRITES.get(type(node.op))
        return None if rule is None else rule(node, inputs)

    for _ in range(8):
        mapping = rebuild_nodes(fn.nodes, rewrite)
        if not mapping:
            return fn
        fn = fn.with_outputs(mapping)
    return fn
