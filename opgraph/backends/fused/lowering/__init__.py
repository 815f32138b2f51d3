"""The fused compiler's lowerings, one module per op family, registered by op class
(docs/design.md §4)."""

from opgraph.backends.fused.lowering import (  # noqa: F401 - importing registers lowerings
    bitwise,
    conversion,
    convolution,
    elementwise,
    linalg,
    movement,
    nn,
    reduction,
    trigonometric,
)
from opgraph.backends.fused.lowering.registry import (
    BRIDGES,
    REDUCTIONS,
    REWRITES,
    SCALAR_OPS,
    STEP_OPS,
    VIEW_OPS,
    ReductionRule,
    ScalarContext,
)

__all__ = [
    "BRIDGES",
    "REDUCTIONS",
    "REWRITES",
    "SCALAR_OPS",
    "STEP_OPS",
    "VIEW_OPS",
    "ReductionRule",
    "ScalarContext",
]
