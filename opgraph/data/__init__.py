"""Data files shipped with opgraph: ``mlp.onnx``, the small ONNX model ``opgraph demo`` runs
(written by ``python -m opgraph.data.make_demo_onnx``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def demo_onnx_path() -> Path:
    """The path of the bundled ``mlp.onnx``."""
    return Path(str(resources.files(__name__) / "mlp.onnx"))
