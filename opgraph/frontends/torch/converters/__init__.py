"""ATen converters, one module per family; importing this package registers them all."""

from opgraph.frontends.torch.converters import (  # noqa: F401 - importing registers converters
    activation,
    attention,
    creation,
    elementwise,
    gradients,
    indexing,
    linalg,
    nn,
    reduction,
    shape,
    structural,
)
