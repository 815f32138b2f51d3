"""Reference kernels, one module per op family, registered in ``KERNELS`` by op class."""

from opgraph.backends.interpreter.kernels import (  # noqa: F401 - importing registers kernels
    conversion,
    elementwise,
    linalg,
    movement,
    reduction,
)
from opgraph.backends.interpreter.kernels.registry import KERNELS, Kernel

__all__ = ["KERNELS", "Kernel"]
