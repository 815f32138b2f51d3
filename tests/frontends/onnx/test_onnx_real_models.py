"""Real models (BERT, GPT-2, a ResNet-18-style CNN) exported by torch's dynamo exporter,
imported and run on every backend, against onnxruntime: max |difference| must stay within
1e-4 · max(1, max |onnxruntime output|). Exports are cached per test session."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx", reason="the onnx extra is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
pytest.importorskip("torch", reason="torch is not installed (the models extra)")
pytest.importorskip("onnxscript", reason="onnxscript is not installed (torch's dynamo exporter)")

import onnx_samples as real_models  # tools/, on the path through conftest.py

import opgraph as og

NEEDS_TRANSFORMERS = {"bert", "gpt2"}


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return {"folder": tmp_path_factory.mktemp("onnx_models"), "cache": {}}


def _model(exported: dict[str, object], name: str) -> tuple[object, dict]:
    if name in NEEDS_TRANSFORMERS:
        pytest.importorskip("transformers", reason="transformers is not installed")
    cache = exported["cache"]
    assert isinstance(cache, dict)
    if name not in cache:
        cache[name] = real_models.MODELS[name](exported["folder"])
    return cache[name]


@pytest.mark.parametrize("backend_name", ["INTERPRETER", "CPU"])
@pytest.mark.parametrize("name", sorted(real_models.MODELS))
def test_real_model_matches_onnxruntime(exported, name, backend_name):
    if backend_name not in og.backends():
        pytest.skip(f"the {backend_name} backend is not registered")
    path, inputs = _model(exported, name)
    error, allowed = real_models.compare(path, inputs, backend_name)
    assert error <= allowed, f"{name} on {backend_name}: max |error| {error:.3g} > {allowed:.3g}"
