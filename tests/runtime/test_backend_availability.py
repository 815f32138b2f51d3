"""Which backends can run here: og.backends() lists the usable ones, og.backend_status() says
why the others cannot (the CPU backend without a C compiler, a bad OPGRAPH_CC), and the demos
fall back to INTERPRETER with a note. A missing compiler is simulated by running Python with a
PATH that holds none (gcc stays installed)."""

import importlib.util
import os
import subprocess
import sys

import pytest

import opgraph as og
from opgraph.runtime import backend as registry

PYTHON = sys.executable  # the interpreter itself, not a PATH shim


class _Fake(og.Backend):
    name = "FAKE"

    def compile(self, function, profile=False):  # pragma: no cover - never compiled
        raise AssertionError


@pytest.fixture
def fake_backend(monkeypatch):
    """Registers FAKE with an availability check the test controls; removed afterwards."""
    state = {"why": ""}
    monkeypatch.setitem(registry._BACKENDS, "FAKE", _Fake)
    monkeypatch.setitem(registry._CHECKS, "FAKE", lambda: state["why"])
    return state


def test_an_available_backend_is_listed_and_made(fake_backend):
    assert "FAKE" in og.backends()
    assert og.backend_status()["FAKE"] == og.BackendStatus("FAKE", True, "")
    assert isinstance(og.backend("fake"), _Fake)


def test_an_unavailable_backend_is_left_out_with_its_reason(fake_backend):
    fake_backend["why"] = "the fake device is unplugged; plug it in"
    assert "FAKE" not in og.backends()
    assert "INTERPRETER" in og.backends()
    status = og.backend_status()["FAKE"]
    assert not status.available and status.reason == "the fake device is unplugged; plug it in"
    with pytest.raises(og.BackendUnavailableError, match="FAKE is unavailable here: the fake"):
        og.backend("FAKE")
    with pytest.raises(og.RegistryError):  # still a RegistryError, as before
        og.backend("FAKE")


def test_status_lists_every_known_backend():
    statuses = og.backend_status()
    assert {"CPU", "INTERPRETER"} <= set(statuses)
    assert statuses["INTERPRETER"].available
    assert sorted(n for n, s in statuses.items() if s.available) == og.backends()
    gpu = statuses.get("GPU")
    assert gpu is None or gpu.available == ("GPU" in og.backends())


def test_an_unknown_name_lists_the_registered_backends():
    with pytest.raises(og.RegistryError, match="unknown backend 'NOPE'; registered backends: "):
        og.backend("NOPE")


def _python(code, **env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "OPGRAPH_CC")}
    env.update(env_changes)
    return subprocess.run(
        [PYTHON, *code], env=env, capture_output=True, text=True, timeout=300, check=False
    )


PROBE = (
    "import opgraph as og\n"
    "print(og.backends())\n"
    "print(og.backend_status()['CPU'].reason)\n"
    "try:\n"
    "    og.backend('CPU')\n"
    "except og.BackendUnavailableError as error:\n"
    "    print('ERROR', error)\n"
)


def test_without_a_compiler_cpu_is_unavailable_and_says_how_to_install_one(tmp_path):
    done = _python(["-c", PROBE], PATH=str(tmp_path))  # an empty directory: no gcc, no cc
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['INTERPRETER']"
    assert lines[1].startswith("no C compiler found (looked for $CC, gcc and cc on PATH)")
    assert "apt-get install gcc" in lines[1] and "OPGRAPH_CC" in lines[1]
    assert lines[2].startswith("ERROR backend CPU is unavailable here: no C compiler found")


def test_a_bad_opgraph_cc_is_an_error_naming_it_not_a_fall_back_to_gcc(tmp_path):
    missing = str(tmp_path / "no-such-cc")
    done = _python(["-c", PROBE], OPGRAPH_CC=missing)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "CPU" not in lines[0]
    assert lines[1].startswith(f"OPGRAPH_CC={missing!r} names no executable C compiler")
    assert lines[2].startswith(f"ERROR backend CPU is unavailable here: OPGRAPH_CC={missing!r}")


def test_a_bad_opgraph_cc_fails_a_directly_made_cpu_backend_too(tmp_path):
    code = (
        "import opgraph as og\n"
        "from opgraph import ops\n"
        "from opgraph.backends.cpu import CpuBackend, CompilerError\n"
        "x = og.parameter(og.f32, (2,))\n"
        "try:\n"
        "    CpuBackend().compile(og.Function([ops.exp(x)], [x]))\n"
        "except CompilerError as error:\n"
        "    print(error)\n"
    )
    done = _python(["-c", code], OPGRAPH_CC="not-a-compiler-anywhere")
    assert done.returncode == 0, done.stderr
    assert "OPGRAPH_CC='not-a-compiler-anywhere' names no executable C compiler" in done.stdout


def test_a_good_opgraph_cc_is_used():
    done = _python(["-c", PROBE], OPGRAPH_CC="gcc")
    assert done.returncode == 0, done.stderr
    assert "'CPU'" in done.stdout.splitlines()[0]


def test_demo_without_a_compiler_runs_on_the_interpreter_with_a_note(tmp_path):
    done = _python(["-m", "opgraph", "demo"], PATH=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1
    assert "CPU backend is unavailable, running on INTERPRETER only: no C compiler" in notes[0]
    rows = [line.split() for line in done.stdout.splitlines()]
    assert any("INTERPRETER" in row for row in rows)
    assert not any("CPU" in row for row in rows)
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="scikit-learn (train extra) not installed"
)
def test_train_demo_without_a_compiler_runs_on_the_interpreter_with_a_note(tmp_path):
    done = _python(
        ["-m", "opgraph", "train-demo", "--epochs", "1", "--no-progress"], PATH=str(tmp_path)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note: the CPU backend is unavailable, running on INTERPRETER only" in done.stderr
    assert "backend INTERPRETER" in done.stdout


def test_og_backends_is_callable_and_the_backends_package():
    """``og.backends()`` lists the usable backends, and ``og.backends`` is still the
    ``opgraph.backends`` package: the ``import a.b.c as name`` form reaches its subpackages."""
    import opgraph.backends.fused.lowering.linalg as linalg_module

    assert og.backends() == sorted(n for n, s in og.backend_status().items() if s.available)
    assert og.backends is sys.modules["opgraph.backends"]
    assert linalg_module is sys.modules["opgraph.backends.fused.lowering.linalg"]
