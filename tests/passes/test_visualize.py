"""visualize / to_dot and the ``opgraph viz`` command."""

import shutil

import pytest

import opgraph as og
from opgraph import ops
from opgraph.cli import main
from opgraph.visualize import VisualizationError, to_dot, visualize

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz 'dot' is not installed"
)


def sample():
    x = og.parameter(og.f32, (2, 3), name="x")
    w = og.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    y = ops.dot(x, w) * 0.5
    t = ops.transpose(y, (1, 0))
    return og.Function([t, ops.reduce_sum(t, (0,))], [x], name="sample")


def multi_output():
    x = og.parameter(og.f32, (2,), name="x")
    inner = og.parameter(og.f32, (2,))
    first, second = ops.call(
        og.Function([ops.exp(inner), ops.negative(inner)], [inner], name="pair"), x
    )
    return og.Function([ops.add(first, second)], [x], name="multi")


def test_dot_text_conventions():
    text = to_dot(sample())
    assert text.startswith('digraph "sample" {')
    assert '[label="%0 x\\nf32[2,3]", shape=ellipse, fillcolor=lightblue]' in text
    assert "%6 Transpose\\nperm=(1, 0)\\nf32[2,2]" in text  # op, attribute, type
    assert "%7 ReduceSum\\naxes=(0,)\\nf32[2]" in text  # keep_dims=False is the default
    assert "[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]\\nf32[3,2]" in text  # a small constant inline
    assert "0.5 ⇒\\nf32[2,2]" in text  # a broadcast scalar drawn as one small box
    assert "Broadcast" not in text
    assert "peripheries=2" in text and 'r1 [label="result 1"' in text
    assert text.rstrip().endswith("}")


def test_constants_are_redrawn_at_every_user():
    x = og.parameter(og.f32, (2,))
    c = og.constant([1.0, 2.0])
    text = to_dot(og.Function([ops.add(x, c), ops.multiply(x, c)], [x]))
    assert text.count("[1.0, 2.0]\\nf32[2]") == 2
    big = og.constant([float(i) for i in range(100)])
    y = og.parameter(og.f32, (100,))
    assert "Constant\\nf32[100]" in to_dot(og.Function([ops.add(y, big)], [y]))


def test_long_attributes_are_truncated_and_outputs_labelled():
    text = to_dot(multi_output(), max_label=12)
    assert "function=@p…" in text
    assert '[label="0"]' in text and '[label="1"]' in text


def test_visualize_writes_dot(tmp_path):
    path = visualize(sample(), tmp_path / "g.dot")
    assert path.read_text() == to_dot(sample())


@needs_dot
@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_visualize_renders(tmp_path, suffix):
    path = visualize(sample(), tmp_path / f"g{suffix}")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data
    assert (tmp_path / "g.dot").exists()


def test_visualize_without_graphviz(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(
        VisualizationError,
        match=r"rendering g.svg needs the Graphviz 'dot' program, which is not on PATH .*wrote .*g.dot instead",
    ):
        visualize(sample(), tmp_path / "g.svg")
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


def test_visualize_when_graphviz_fails(tmp_path, monkeypatch):
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'syntax error in line 1' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake))
    with pytest.raises(
        VisualizationError, match="dot failed \\(exit 3\\) on .*g.dot: syntax error in line 1"
    ):
        visualize(sample(), tmp_path / "g.png")


@pytest.mark.parametrize("name", ["g.pdf", "g"])
def test_visualize_unknown_format(tmp_path, name):
    with pytest.raises(VisualizationError, match="expected a .dot, .gv, .svg or .png suffix"):
        visualize(sample(), tmp_path / name)


def test_cli_viz_demo_to_dot(tmp_path, capsys):
    out = tmp_path / "mlp.dot"
    assert main(["viz", "mlp", "-o", str(out)]) == 0
    assert out.read_text().startswith('digraph "mlp"')
    assert "wrote" in capsys.readouterr().out


def test_cli_viz_optimized_seed(tmp_path):
    out = tmp_path / "seed.dot"
    assert main(["viz", "seed", "--optimize", "-o", str(out)]) == 0
    assert "Mul" in out.read_text()


def test_cli_viz_saved_file(tmp_path):
    serialize = pytest.importorskip(
        "opgraph.serialize", reason="opgraph.serialize is not available"
    )
    saved = tmp_path / "model.opgraph"
    serialize.save(multi_output(), saved)
    out = tmp_path / "model.dot"
    assert main(["viz", str(saved), "-o", str(out)]) == 0
    assert "Call" in out.read_text()


def test_cli_viz_unknown_model(capsys):
    assert main(["viz", "no-such-model"]) == 1  # a failure, not a usage error
    assert (
        "unknown model 'no-such-model': expected a demo model (seed, mlp)"
        in capsys.readouterr().err
    )


def test_cli_viz_reports_a_bad_suffix(tmp_path, capsys):
    assert main(["viz", "seed", "-o", str(tmp_path / "x.pdf")]) == 1
    assert "expected a .dot, .gv, .svg or .png suffix" in capsys.readouterr().err


def test_cli_viz_help_mentions_models_and_files(capsys):
    with pytest.raises(SystemExit):
        main(["viz", "--help"])
    text = capsys.readouterr().out
    assert "seed, mlp" in text and "og.save" in text
