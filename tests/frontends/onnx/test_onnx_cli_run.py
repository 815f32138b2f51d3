"""``opgraph run`` and the ONNX part of ``opgraph demo``."""

from __future__ import annotations

import io
import re
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from onnx import TensorProto, helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.cli import main  # noqa: E402
from opgraph.cli.run import Progress, random_input  # noqa: E402
from opgraph_examples.onnx_mlp import build  # noqa: E402
from opgraph_examples.onnx_mlp import main as write_demo_model  # noqa: E402


@pytest.fixture
def symbolic_model(tmp_path):
    """y = relu(x) + 1 with a symbolic batch dimension."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Add", ["r", "one"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_run_bundled_model_reports_outputs_and_times(demo_onnx_path, capsys):
    assert main(["run", str(demo_onnx_path), "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "output   probabilities: float32[4, 5]" in out
    assert re.search(r"import\s+[\d.]+ ms", out) and re.search(r"compile\s+[\d.]+ ms", out)
    assert re.search(
        r"run\s+median [\d.]+ ms, min [\d.]+ ms \(3 timed call\(s\) after 1 warm-up\)", out
    )


def test_run_with_input_file_and_shape(symbolic_model, tmp_path, capsys):
    values = np.array([[-1.0, 2.0, 0.5], [3.0, -4.0, 0.0]], np.float32)
    np.save(tmp_path / "x.npy", values)
    assert main(["run", str(symbolic_model), "--input", f"x={tmp_path / 'x.npy'}"]) == 0
    out = capsys.readouterr().out
    assert "output   y: float32[2, 3]  min 1  max 4  mean 1.91667" in out


def test_run_random_inputs_need_shapes(symbolic_model, capsys):
    assert main(["run", str(symbolic_model)]) == 1
    err = capsys.readouterr().err
    assert "input 'x' has shape ['batch', 3]: give its shape with --shape x=1x3" in err
    assert "input_shapes" not in err
    assert main(["run", str(symbolic_model), "--shape", "x=5,3", "--seed", "1"]) == 0
    assert "float32[5, 3]" in capsys.readouterr().out


@pytest.mark.parametrize("backend_name", og.backends())
def test_run_verbose_lists_ops_and_fallbacks(demo_onnx_path, backend_name, capsys):
    assert main(["run", str(demo_onnx_path), "--backend", backend_name, "--verbose"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  Gemm\s+1$", out, re.MULTILINE)
    has_fallbacks = hasattr(og.backend(backend_name).compile(_tiny()), "fallback_ops")
    assert ("reference-kernel fallbacks:" in out) == has_fallbacks


def _tiny() -> og.Function:
    x = og.parameter(og.f32, (2,))
    return og.Function([og.ops.relu(x)], [x])


def test_run_errors_are_one_line(capsys):
    assert main(["run", "/nonexistent.onnx"]) == 1
    assert capsys.readouterr().err == (
        "opgraph run: ONNX model file '/nonexistent.onnx' does not exist\n"
    )


def test_random_inputs_have_the_element_type():
    rng = np.random.default_rng(0)
    assert random_input(og.i64, (3,), rng).dtype == np.int64
    assert random_input(og.boolean, (3,), rng).dtype == np.bool_
    assert set(random_input(og.i32, (50,), rng).tolist()) <= {0, 1}
    assert random_input(og.f64, (2, 2), rng).dtype == np.float64


def test_plain_progress_bar_without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now fails
    stream = io.StringIO()
    progress = Progress(True, stream)
    progress.stage("import", 4)
    progress.update(2, 4)
    progress.close()
    assert "import   [###############...............] 2/4" in stream.getvalue()
    quiet = io.StringIO()
    Progress(False, quiet).stage("import", 4)
    assert quiet.getvalue() == ""


def test_demo_runs_the_bundled_onnx_model(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("mlp.onnx")]
    assert len(rows) == len(og.backends())
    assert all(row.endswith("agrees") for row in rows)


def test_the_demo_model_is_the_same_every_time(demo_onnx_path, tmp_path, capsys):
    assert demo_onnx_path.read_bytes() == build().SerializeToString()
    assert write_demo_model([str(tmp_path / "again.onnx")]) == 0
    assert (tmp_path / "again.onnx").read_bytes() == demo_onnx_path.read_bytes()
    assert "again.onnx (2736 bytes)" in capsys.readouterr().out
    assert write_demo_model([]) == 2
