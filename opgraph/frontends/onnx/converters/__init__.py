"""ONNX converters, one module per family; importing this package registers them all."""

from opgraph.frontends.onnx.converters import (  # noqa: F401 - importing registers converters
    conversion,
    elementwise,
    linalg,
    reduction,
    shape,
)
