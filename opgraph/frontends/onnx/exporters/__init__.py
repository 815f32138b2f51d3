"""ONNX exporters, one module per op family; importing this package registers them all."""

from opgraph.frontends.onnx.exporters import (  # noqa: F401 - importing registers exporters
    conversion,
    convolution,
    dynamic,
    elementwise,
    indexing,
    linalg,
    movement,
    nn,
    quantization,
    reduction,
    resize,
)
from opgraph.frontends.onnx.exporters.base import exported_ops, exporter_for, exports

__all__ = ["exported_ops", "exporter_for", "exports"]
