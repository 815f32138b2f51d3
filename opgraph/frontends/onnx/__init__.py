"""The ONNX bridge: ``InferenceSession`` (run a model in one line, as with onnxruntime),
``import_model`` (ModelProto → Function) and ``export_model`` (Function → ModelProto).

``onnx`` is an optional dependency (``pip install -e ".[onnx]"``); importing this package
without it raises a ConversionError that says so.
"""

from __future__ import annotations

try:
    import onnx as _onnx  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without the extra
    from opgraph.core.errors import ConversionError

    raise ConversionError(
        "the ONNX bridge needs the onnx package: pip install -e '.[onnx]'"
    ) from error

from opgraph.frontends.onnx.context import NeedsConstantError
from opgraph.frontends.onnx.exporter import export_model
from opgraph.frontends.onnx.importer import import_model
from opgraph.frontends.onnx.registry import onnx_op, registered
from opgraph.frontends.onnx.session import InferenceSession, NodeArg

__all__ = [
    "InferenceSession",
    "NeedsConstantError",
    "NodeArg",
    "export_model",
    "import_model",
    "onnx_op",
    "registered",
]
