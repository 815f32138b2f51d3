import subprocess
import sys
from pathlib import Path

from opgraph.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_and_agrees(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "(a+b)*c 32x32" in out and "MLP" in out
    assert "DIFFERS" not in out
    assert out.count("agrees") >= 2


def test_quickstart_example_runs():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "max |error|" in result.stdout
    assert "OpTypeError: Add: shapes of inputs differ" in result.stdout
    assert "built at quickstart.py:" in result.stdout


# ------------------------------------------------------------------ the command line as a whole
import argparse  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.cli import _common  # noqa: E402


def _exit_code(argv: list[str]) -> int:
    """``main``'s code, or argparse's when it exits (usage errors, --help, --version)."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)


def test_version_is_the_package_version(capsys):
    assert _exit_code(["--version"]) == 0
    assert capsys.readouterr().out == f"opgraph {og.__version__}\n"


def test_every_command_takes_verbose():
    from opgraph.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, subparser in commands.choices.items():
        assert "--verbose" in subparser._option_string_actions, name


def test_a_failure_is_one_line_and_verbose_adds_the_traceback(tmp_path, capsys):
    missing = str(tmp_path / "missing.opgraph")
    assert main(["viz", missing]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("opgraph viz: ")
    assert main(["viz", missing, "--verbose"]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_a_bug_says_so_in_one_line(monkeypatch, capsys):
    import opgraph.cli.ops as ops_command

    def broken(args):
        raise TypeError("boom")

    monkeypatch.setattr(ops_command, "run", broken)
    assert main(["ops"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "opgraph ops: internal error (a bug in opgraph): TypeError: boom "
        "(--verbose shows the traceback)\n"
    )


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--version"], 0),  # argparse ignores a failed write of --version and --help
        (["ops"], 1),
        (["ops", "--markdown"], 1),
        (["viz", "mlp", "-o", "{tmp}/m.dot"], 1),
    ],
    ids=["version", "ops", "ops-markdown", "viz"],
)
def test_a_closed_pipe_ends_quietly(argv, code, tmp_path):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write: every write fails
    try:
        result = subprocess.run(
            [sys.executable, "-m", "opgraph", *(a.format(tmp=tmp_path) for a in argv)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
    finally:
        os.close(write)
    assert result.stderr == ""
    assert result.returncode == code


def test_demo_verbose_into_a_closed_pipe_ends_quietly(monkeypatch):
    import opgraph.cli.demo as demo_command

    def writes_a_lot(args):
        for _ in range(10_000):
            print("x" * 100)
        return 0

    monkeypatch.setattr(demo_command, "run", writes_a_lot)
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["demo", "--verbose"]) == 1


class _ClosedPipe:
    """A stdout whose reader has gone."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise OSError("not a real file")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("input=1x3x224x224", ("input", (1, 3, 224, 224))),
        ("input=1,3,224,224", ("input", (1, 3, 224, 224))),
        ("x=7", ("x", (7,))),
        ("a=b=2x0", ("a=b", (2, 0))),
    ],
)
def test_shape_flag_accepts_x_and_commas(text, expected):
    assert _common.shape_item(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("input", "expected NAME=D0xD1x..."),
        ("=1x3", "expected NAME=D0xD1x..."),
        ("input=", "expected NAME=D0xD1x..."),
        ("input=1xAx3", "'A' is not a dimension"),
        ("input=1x-3", "'-3' is not a dimension"),
    ],
)
def test_shape_flag_errors(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        _common.shape_item(text)


# ------------------------------------------------------------------------------- opgraph run
@pytest.fixture
def onnx_helper():
    onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
    return onnx


@pytest.fixture
def two_input_model(onnx_helper, tmp_path):
    """z = a * b + 1 and w = a - b, with a symbolic batch axis."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["a", "b"], ["ab"]),
            helper.make_node("Add", ["ab", "one"], ["z"]),
            helper.make_node("Sub", ["a", "b"], ["w"]),
        ],
        "two",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 3]),
        ],
        [
            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, ["batch", 3]),
        ],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    path = tmp_path / "two.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_helper.save(model, str(path))
    return path


def _values(batch: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(batch)
    return tuple(rng.standard_normal((batch, 3)).astype(np.float32) for _ in range(2))


def test_run_npz_inputs_by_name_and_save_outputs(two_input_model, tmp_path, capsys):
    a, b = _values(4)
    np.savez(tmp_path / "in.npz", a=a, b=b)
    out = tmp_path / "out.npz"
    argv = ["run", str(two_input_model), "--input", str(tmp_path / "in.npz"), "--save", str(out)]
    assert main([*argv, "--backend", "INTERPRETER", "--repeat", "2"]) == 0
    assert f"saved    2 output(s) to {out}" in capsys.readouterr().out
    with np.load(out) as saved:
        assert sorted(saved.files) == ["w", "z"]
        np.testing.assert_allclose(saved["z"], a * b + 1, rtol=1e-6)
        np.testing.assert_allclose(saved["w"], a - b, rtol=1e-6)


def test_run_saves_outputs_whatever_their_names(onnx_helper, tmp_path, capsys):
    """Output names that are np.savez's own parameters (found by mypy) are saved too."""
    from onnx import TensorProto, helper

    names = ["allow_pickle", "file"]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], [names[0]]), helper.make_node("Neg", ["x"], [names[1]])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in names],
    )
    model = tmp_path / "m.onnx"
    onnx_helper.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    np.save(tmp_path / "x.npy", np.array([-1.0, 2.0], np.float32))
    out = tmp_path / "out.npz"
    argv = ["run", str(model), "--input", f"x={tmp_path / 'x.npy'}", "--save", str(out)]
    assert main([*argv, "--backend", "INTERPRETER"]) == 0
    with np.load(out) as saved:
        assert sorted(saved.files) == names
        np.testing.assert_array_equal(saved["allow_pickle"], [0.0, 2.0])
        np.testing.assert_array_equal(saved["file"], [1.0, -2.0])


def test_run_npy_inputs_by_name_and_shape_for_the_rest(two_input_model, tmp_path, capsys):
    a, _ = _values(2)
    np.save(tmp_path / "a.npy", a)
    out = tmp_path / "out.npz"
    argv = ["run", str(two_input_model), "--input", f"a={tmp_path / 'a.npy'}", "--save", str(out)]
    assert main([*argv, "--backend", "INTERPRETER", "--shape", "b=2x3"]) == 0
    assert "output   z: float32[2, 3]" in capsys.readouterr().out
    with np.load(out) as saved:
        b = a - saved["w"]  # the random b, recovered
        np.testing.assert_allclose(saved["z"], a * b + 1, rtol=1e-5, atol=1e-6)


def test_run_defaults_to_cpu_and_to_the_interpreter_without_a_compiler(
    demo_onnx_path, monkeypatch, capsys
):
    pytest.importorskip("onnx", reason="the onnx extra is not installed")
    from opgraph.backends.cpu import config
    from opgraph.frontends.onnx.session import default_backend

    expected = "CPU" if config.default_config().compiler is not None else "INTERPRETER"
    assert default_backend() == expected
    assert main(["run", str(demo_onnx_path), "--repeat", "1"]) == 0
    assert f"backend {expected})" in capsys.readouterr().out
    without = config.default_config().with_compiler(None)
    monkeypatch.setattr(config, "default_config", lambda: without)
    assert main(["run", str(demo_onnx_path), "--repeat", "1"]) == 0
    captured = capsys.readouterr()
    assert "backend INTERPRETER)" in captured.out
    assert "note: no C compiler found; running on INTERPRETER" in captured.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--input", "{tmp}/a.npy"],
            "a bare .npy file feeds a model's only input, but this model has 2 (a, b); write --input NAME={tmp}/a.npy",
        ),
        (["--input", "c={tmp}/a.npy"], "the model has no input 'c'; its inputs: a, b"),
        (["--input", "a={tmp}/a.npy", "--input", "a={tmp}/a.npy"], "input 'a' is given twice"),
        (["--input", "a={tmp}/missing.npy"], "No such file or directory"),
        (["--input", "a={tmp}/not.npy"], "not a .npy or .npz file"),
        (["--shape", "c=2x3"], "--shape names unknown input(s) c; the model's inputs: a, b"),
        (["--shape", "a=2x4"], "--shape a=2x4 contradicts the model's shape ['batch', 3]"),
        (
            ["--input", "a={tmp}/a.npy", "--shape", "a=3x3"],
            "--shape a=3x3 contradicts the --input array's shape 2x3",
        ),
        (
            ["--input", "a={tmp}/a.npy"],
            "input 'b' has shape ['batch', 3]: give its shape with --shape b=1x3 or its value with --input b=FILE.npy",
        ),
        (
            ["--save", "{tmp}/nowhere/out.npz"],
            "--save {tmp}/nowhere/out.npz: the directory '{tmp}/nowhere' does not exist",
        ),
        (["--backend", "FOO"], "unknown backend 'FOO'"),
    ],
)
def test_run_failures_exit_1_with_one_line(two_input_model, tmp_path, capsys, extra, message):
    np.save(tmp_path / "a.npy", _values(2)[0])
    (tmp_path / "not.npy").write_text("text")
    argv = ["run", str(two_input_model), *(a.format(tmp=tmp_path) for a in extra)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert message.format(tmp=tmp_path) in captured.err
    assert captured.err.count("\n") == 1 and captured.out == ""


@pytest.mark.parametrize(
    "extra",
    [
        ["--repeat", "0"],
        ["--warmup", "-1"],
        ["--shape", "a=2xB"],
        ["--save", "out.txt"],
        ["--input", "=a.npy"],
        ["--no-such-flag"],
    ],
)
def test_run_usage_errors_exit_2(two_input_model, extra, capsys):
    assert _exit_code(["run", str(two_input_model), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: opgraph") and "error: " in err


# ------------------------------------------------------------------------------- opgraph viz
def test_viz_draws_an_onnx_file(two_input_model, tmp_path, capsys):
    out = tmp_path / "two.dot"
    assert main(["viz", str(two_input_model), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "note: symbolic dimensions set to 1 (a=1x3, b=1x3); --shape chooses them" in captured.err
    assert "f32[1,3]" in out.read_text()
    assert (
        main(["viz", str(two_input_model), "-o", str(out), "--shape", "a=5x3", "--shape", "b=5,3"])
        == 0
    )
    assert "f32[5,3]" in out.read_text() and capsys.readouterr().err == ""


def test_viz_of_an_unloadable_model_is_a_failure(onnx_helper, tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert main(["viz", str(bad)]) == 1
    assert "opgraph viz: cannot read the ONNX model" in capsys.readouterr().err
    assert main(["viz", str(tmp_path / "missing.onnx")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert _exit_code(["viz", "mlp", "--max-label", "0"]) == 2


# ------------------------------------------------------------------------ opgraph train-demo
@pytest.mark.parametrize(
    "extra",
    [
        ["--epochs", "0"],
        ["--batch-size", "0"],
        ["--lr", "-1"],
        ["--plot", "x.svg"],
        ["--hidden", "0"],
    ],
)
def test_train_demo_usage_errors_exit_2(extra, capsys):
    assert _exit_code(["train-demo", *extra]) == 2
    assert "usage: opgraph train-demo" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--backend", "FOO"], "unknown backend 'FOO'; registered backends:"),
        (
            ["--plot", "/nonexistent/x.png"],
            "--plot /nonexistent/x.png: the directory '/nonexistent' does not exist",
        ),
    ],
)
def test_train_demo_checks_arguments_before_training(extra, message, capsys):
    assert main(["train-demo", *extra]) == 1
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1
    assert captured.out == ""  # nothing was loaded or trained


def test_train_demo_batch_larger_than_the_data(capsys):
    pytest.importorskip("sklearn", reason="the train extra (scikit-learn) is not installed")
    assert main(["train-demo", "--batch-size", "5000", "--backend", "INTERPRETER"]) == 1
    captured = capsys.readouterr()
    assert "--batch-size 5000 is larger than the training set (1347 images)" in captured.err
    assert "epoch" not in captured.out


def test_run_says_when_an_input_decides_shapes(onnx_helper, tmp_path, capsys):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "reshape",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = tmp_path / "reshape.onnx"
    onnx_helper.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    # The target is a run-time tensor: the random one fails when the model runs.
    assert main(["run", str(model), "--backend", "INTERPRETER"]) == 1
    err = capsys.readouterr().err
    assert (
        "need the value of input(s) shape, which was random: give it with --input shape=FILE.npy"
        in err
    )
    np.save(tmp_path / "shape.npy", np.array([3, 4]))
    argv = [
        "run",
        str(model),
        "--input",
        f"shape={tmp_path / 'shape.npy'}",
        "--backend",
        "INTERPRETER",
    ]
    assert main(argv) == 0
    assert "output   y: float32[3, 4]" in capsys.readouterr().out
