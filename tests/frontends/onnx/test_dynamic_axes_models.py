"""Models exported from PyTorch with dynamic axes (issue 16, item 6): a transformer encoder
layer with a dynamic batch and sequence and a CNN with a dynamic batch import as one symbolic
Function, are compiled once, and match onnxruntime at several sizes."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import opgraph as og

torch = pytest.importorskip("torch", reason="the models are exported from PyTorch")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")

from opgraph.frontends.onnx import import_model  # noqa: E402
from opgraph.passes.specialize_shapes import is_symbolic  # noqa: E402

Dim = torch.export.Dim


class SmallCnn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: Any) -> Any:
        h = torch.nn.functional.max_pool2d(torch.relu(self.norm(self.conv(x))), 2)
        return torch.softmax(self.head(torch.flatten(h, 1)), -1)


def encoder() -> tuple[Any, Any, dict[str, Any]]:
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    shapes = {"src": {0: Dim("batch", max=64), 1: Dim("seq", max=512)}}
    return layer, torch.randn(2, 5, 32), shapes


def cnn() -> tuple[Any, Any, dict[str, Any]]:
    return SmallCnn(), torch.randn(2, 3, 8, 8), {"x": {0: Dim("batch", max=64)}}


MODELS: dict[str, tuple[Callable[[], tuple[Any, Any, dict[str, Any]]], list[tuple[int, ...]]]] = {
    "encoder": (encoder, [(1, 3, 32), (4, 9, 32), (2, 17, 32)]),
    "cnn": (cnn, [(1, 3, 8, 8), (6, 3, 8, 8), (3, 3, 8, 8)]),
}


def export(name: str) -> bytes:
    torch.manual_seed(0)
    build, _ = MODELS[name]
    model, example, shapes = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            model.eval(), (example,), dynamic_shapes=shapes, dynamo=True, verbose=False
        )
    return bytes(program.model_proto.SerializeToString())


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request: pytest.FixtureRequest) -> tuple[str, bytes]:
    return request.param, export(request.param)


@pytest.mark.parametrize("backend", [b for b in ("INTERPRETER", "CPU") if b in og.backends()])
def test_imports_as_one_symbolic_function_and_matches_onnxruntime_at_every_size(
    exported: tuple[str, bytes], backend: str
) -> None:
    name, data = exported
    fn = import_model(data)
    assert is_symbolic(fn), fn.parameter_types
    exe = og.backend(backend).compile(fn)  # one compile serves every size
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    rng = np.random.default_rng(1)
    for shape in MODELS[name][1]:
        x = rng.standard_normal(shape).astype(np.float32)
        (got,) = exe(x)
        (want,) = session.run(None, {input_name: x})
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if backend == "CPU":  # every step runs natively on the symbolic sizes
        assert exe.fallback_ops() == []
