"""The fused compiler's lowerings, one module per op family, registered by op class
(docs/design.md §4)."""

from opgraph.backends.fused.lowering import (  # noqa: F401 - importing registers lowerings
    activation,
    attention,
    bitwise,
    conv_backprop,
    conversion,
    convolution,
    elementwise,
    indexing,
    linalg,
    movement,
    nn,
    quantized,
    reduction,
    scan,
    selection,
    trigonometric,
    windows,
    winograd_gradients,
)
from opgraph.backends.fused.lowering.registry import (
    BRIDGES,
    GATHERS,
    REDUCTIONS,
    REWRITES,
    SCALAR_OPS,
    STEP_OPS,
    SYMBOLIC_STEP_OPS,
    VIEW_OPS,
    IndexedRead,
    ReductionRule,
    ScalarContext,
)

__all__ = [
    "BRIDGES",
    "GATHERS",
    "REDUCTIONS",
    "REWRITES",
    "SCALAR_OPS",
    "STEP_OPS",
    "SYMBOLIC_STEP_OPS",
    "VIEW_OPS",
    "IndexedRead",
    "ReductionRule",
    "ScalarContext",
]
