"""An independent numpy statement of every op's semantics.

The oracle is written separately from the interpreter's kernels (floats are computed in f64,
integers in 64 bits, then cast), so the interpreter is under test too. ``evaluate`` walks a
Function without lowering: tuples, calls and framework-level ops have oracle entries of their
own.
"""

from opgraph.testing.oracle import (  # noqa: F401 - importing registers entries
    activation,
    collective,
    conversion,
    convolution,
    dynamic,
    elementwise,
    indexing,
    linalg,
    movement,
    nn,
    normalization,
    ordering,
    pooling,
    quantization,
    rearrange,
    reduction,
    resize,
    rnn,
    shape_tensors,
    shaping,
    structural,
)
from opgraph.testing.oracle.registry import ORACLE, evaluate

__all__ = ["ORACLE", "evaluate"]
