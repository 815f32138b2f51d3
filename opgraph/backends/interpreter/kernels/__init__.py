"""Reference kernels, one module per op family, registered in ``KERNELS`` by op class."""

from opgraph.backends.interpreter.kernels import (  # noqa: F401 - importing registers kernels
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
from opgraph.backends.interpreter.kernels.registry import KERNELS, Kernel

__all__ = ["KERNELS", "Kernel"]
