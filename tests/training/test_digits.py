"""The digits demo: the MLP reaches 95 % on INTERPRETER; the CLI and the example write a PNG."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from opgraph.cli import main
from opgraph_examples.digits import (
    DigitsConfig,
    default_backend,
    load_digits_split,
    train_digits,
)

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def test_split_is_stratified_and_scaled():
    data = load_digits_split()
    assert data.x_train.shape == (1347, 64) and data.x_test.shape == (450, 64)
    assert data.x_train.dtype.name == "float32"
    assert data.x_train.min() >= 0.0 and data.x_train.max() <= 1.0
    assert sorted(set(data.y_test.tolist())) == list(range(10))


def test_mlp_reaches_95_percent_on_interpreter():
    config = DigitsConfig(epochs=8, hidden=(64,), backend="INTERPRETER", progress=False)
    run = train_digits(config)
    assert run.model == "mlp_64_64_10" and run.backend == "INTERPRETER"
    assert len(run.epochs) == 8 and len(run.losses) == 8 * (1347 // 32)
    assert run.test_accuracy >= 0.95, [e.test_accuracy for e in run.epochs]
    assert run.epochs[-1].mean_loss < run.epochs[0].mean_loss / 3


def test_default_backend_is_registered():
    import opgraph as og

    assert default_backend() in og.backends()


def test_cli_train_demo_writes_the_plot(tmp_path, capsys):
    plot = tmp_path / "loss.png"
    code = main(["train-demo", "--epochs", "1", "--plot", str(plot), "--backend", "INTERPRETER"])
    assert code == 0
    out = capsys.readouterr().out
    assert "epoch 1/1: loss" in out and "test accuracy" in out and "s per epoch" in out
    assert plot.read_bytes()[:8] == PNG


def test_example_script_runs(tmp_path):
    plot = tmp_path / "example.png"
    args = ["--epochs", "1", "--backend", "INTERPRETER", "--plot", str(plot)]
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_mlp.py"), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "test accuracy" in result.stdout
    assert plot.read_bytes()[:8] == PNG
