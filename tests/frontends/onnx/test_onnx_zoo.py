"""The model zoo of ``bench/models.py`` at test sizes (narrow, shallow, 64x64 images, short
sequences): each exported by torch's dynamo exporter, imported, and run on the CPU backend and
INTERPRETER against onnxruntime: max |error| within 1e-4 of the output scale (max |onnxruntime
output|). ``bench/zoo.py`` checks all eight at full size; here, the five whose ops the other
real-model tests (``test_onnx_real_models.py``: BERT, GPT-2, a ResNet) do not cover. Plus the
pooling window regression found on the zoo (transformers' EfficientNet pooler)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
from onnx import TensorProto, helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.onnx import import_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]  # the zoo lives in bench/, beside the library
TESTED = ["mobilenet_v3", "efficientnet_b0", "convnext_tiny", "vit_b16", "whisper_tiny_encoder"]


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    pytest.importorskip("torch", reason="torch is not installed (the models extra)")
    pytest.importorskip("onnxscript", reason="onnxscript is not installed (dynamo exporter)")
    pytest.importorskip("transformers", reason="transformers is not installed (models extra)")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import models

    return {"models": models, "folder": tmp_path_factory.mktemp("zoo"), "cases": {}}


def _case(zoo: dict[str, object], name: str) -> tuple[object, list[np.ndarray]]:
    """The imported Function and onnxruntime's outputs, once per session."""
    cases = zoo["cases"]
    assert isinstance(cases, dict)
    if name not in cases:
        case = zoo["models"].zoo_case(name, small=True, folder=zoo["folder"])  # type: ignore[attr-defined]
        session = ort.InferenceSession(
            case.onnx.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        names = [i.name for i in session.get_inputs()]
        want = session.run(None, dict(zip(names, case.inputs, strict=True)))
        cases[name] = (case, want)
    return cases[name]


def test_zoo_lists_the_issue_models(zoo):
    assert set(TESTED) <= set(zoo["models"].ZOO)
    assert {"resnet50", "bert_2l", "gpt2_2l"} <= set(zoo["models"].ZOO)


@pytest.mark.parametrize("backend_name", ["CPU", "INTERPRETER"])
@pytest.mark.parametrize("name", TESTED)
def test_zoo_model_matches_onnxruntime(zoo, name, backend_name):
    if backend_name not in og.backends():
        pytest.skip(f"the {backend_name} backend is not registered")
    case, want = _case(zoo, name)
    exe = og.backend(backend_name).compile(case.function)
    got = exe(*case.inputs)
    error, scale = zoo["models"].zoo_error(got, want)
    assert scale > 0, f"{name}: onnxruntime's outputs are all zero (a vacuous check)"
    assert error <= 1e-4 * scale, (
        f"{name} on {backend_name}: max |error| {error:.3g}, scale {scale:.3g}"
    )
    if backend_name == "CPU":
        assert exe.fallback_ops() == [], f"{name}: reference fallbacks {exe.fallback_ops()}"


def _pool_model(op: str, pads: list[int], **attributes: int) -> onnx.ModelProto:
    node = helper.make_node(
        op, ["x"], ["y"], kernel_shape=[7, 9], strides=[7, 9], ceil_mode=1, pads=pads, **attributes
    )
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 0, 1, 0]])
@pytest.mark.parametrize(
    "op, attributes",
    [
        ("AveragePool", {"count_include_pad": 0}),
        ("AveragePool", {"count_include_pad": 1}),
        ("MaxPool", {}),
    ],
)
def test_ceil_mode_window_larger_than_the_data_pools_all_of_it(backend, op, attributes, pads):
    """``AvgPool2d(1280, ceil_mode=True)`` on a small map (transformers' EfficientNet pooler)
    gives one window over the whole map; the op used to reject the window size."""
    model = _pool_model(op, pads, **attributes)
    x = np.random.default_rng(0).standard_normal((1, 4, 3, 5)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = backend.compile(import_model(model))(x)[0]
    assert got.shape == want.shape == (1, 4, 1, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_window_larger_than_the_data_with_several_outputs_still_fails():
    """Clamping applies only where ceil mode gives one window; otherwise the op's error."""
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[9], strides=[1], ceil_mode=1)
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    with pytest.raises(og.OpgraphError, match="window size 9 exceeds the padded data size 3"):
        import_model(model)
