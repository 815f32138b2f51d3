"""``bench/precision.py`` on a CPU without bf16 dot products: one line saying why nothing is
measured and exit status 2, never a traceback from the first compile. Simulated through the
flags the precision check reads; nothing here is timed."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("onnx", reason="onnx is not installed (the bench extra)")
pytest.importorskip("torch", reason="torch is not installed (bench/models.py needs it)")
pytest.importorskip("openvino", reason="openvino is not installed (the bench extra)")


from bench import precision
from opgraph.backends.cpu import config as cpu_config


def test_a_cpu_without_avx512_bf16_is_reported_not_measured(monkeypatch, capsys):
    monkeypatch.setattr(cpu_config, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "fma"}))
    monkeypatch.setattr(sys, "argv", ["precision.py", "--quick"])
    with pytest.raises(SystemExit) as stopped:
        precision.main()
    assert stopped.value.code == 2
    assert "bf16 not measured here: compile(precision='bf16') needs a CPU with avx512_bf16" in (
        capsys.readouterr().err
    )
