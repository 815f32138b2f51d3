"""The OpenBLAS kernels the CPU backend's BLAS runs (``CpuConfig.blas_core``): by default those
of the generated code's instruction set, whatever ``OPENBLAS_CORETYPE`` says (a machine that
sets it to an older core would otherwise run every BLAS product at that core's width);
``OPGRAPH_BLAS_CORETYPE=env`` keeps OpenBLAS's own rule. The library is loaded once per
process, so each case runs in a fresh interpreter."""

import json
import os
import subprocess
import sys

import pytest

from opgraph.backends.cpu import CpuConfig, default_config
from opgraph.backends.cpu import config as cpu_config

PROBE = r"""
import dataclasses, json, os, sys
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.compiler import Toolchain, blas
config = dataclasses.replace(default_config(), isa=sys.argv[1])
Toolchain(config).flags(frozenset({"blas"}))
print(json.dumps({"core": blas(config.blas_coretype()).core,
                  "env": os.environ.get("OPENBLAS_CORETYPE")}))
"""


def _probe(isa: str, **env: str) -> dict[str, str | None]:
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    if default_config().compiler is None:
        pytest.skip("the CPU backend is unavailable here (no C compiler)")
    environment = {k: v for k, v in os.environ.items() if k != "OPGRAPH_BLAS_CORETYPE"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, isa],
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, str | None] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_coretype_follows_the_config():
    config = CpuConfig(default_config().cache_dir, None)
    assert config.blas_coretype() == ""  # native: OpenBLAS detects this CPU
    assert CpuConfig(config.cache_dir, None, isa="avx2").blas_coretype() == "Haswell"
    assert CpuConfig(config.cache_dir, None, isa="avx512").blas_coretype() == "SkylakeX"
    assert CpuConfig(config.cache_dir, None, blas_core="env").blas_coretype() is None
    assert CpuConfig(config.cache_dir, None, blas_core="Zen").blas_coretype() == "Zen"


def test_avx2_code_runs_haswell_blas_and_the_environment_is_restored():
    got = _probe("avx2", OPENBLAS_CORETYPE="Prescott")
    assert got == {"core": "Haswell", "env": "Prescott"}


def test_native_code_runs_the_blas_detected_for_this_cpu_not_the_environments():
    if "avx512f" not in cpu_config.cpu_flags():
        pytest.skip("needs an AVX-512 CPU: OpenBLAS's detection must differ from Haswell")
    got = _probe("native", OPENBLAS_CORETYPE="Haswell")
    assert got["core"] != "Haswell" and got["env"] == "Haswell"


def test_env_keeps_openblas_coretype():
    got = _probe("native", OPENBLAS_CORETYPE="Haswell", OPGRAPH_BLAS_CORETYPE="env")
    assert got == {"core": "Haswell", "env": "Haswell"}
