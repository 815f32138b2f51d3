"""``bench/precision.py`` on a CPU without bf16 dot products: one line saying why nothing is
measured and exit status 2, never a traceback from the first compile. Simulated through the
flags the precision check reads; nothing here is timed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx", reason="onnx is not installed (the bench extra)")
pytest.importorskip("torch", reason="torch is not installed (bench/models.py needs it)")
pytest.importorskip("openvino", reason="openvino is not installed (the bench extra)")

ROOT = Path(__file__).resolve().parents[3]  # bench/ lives beside the library
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import precision  # noqa: E402
from opgraph.backends.cpu import config as cpu_config  # noqa: E402


def test_a_cpu_without_avx512_bf16_is_reported_not_measured(monkeypatch, capsys):
    monkeypatch.setattr(cpu_config, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "fma"}))
    monkeypatch.setattr(sys, "argv", ["precision.py", "--quick"])
    with pytest.raises(SystemExit) as stopped:
        precision.main()
    assert stopped.value.code == 2
    assert "bf16 not measured here: compile(precision='bf16') needs a CPU with avx512_bf16" in (
        capsys.readouterr().err
    )
