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
