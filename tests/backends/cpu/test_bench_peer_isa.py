"""``bench/run.py --peer-isa avx2`` holds OpenVINO's oneDNN kernels to AVX2
(``ONEDNN_MAX_CPU_ISA``, read when its CPU plugin loads: a fresh interpreter each) and says
which kernels it ran (``runners.openvino_kernels``, ``Prepared.kernels``); with it, ratios are against OpenVINO alone,
since onnxruntime's MLAS cannot be held to an instruction set."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openvino", reason="openvino is not installed (the bench extra)")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (the bench extra)")
pytest.importorskip("torch", reason="torch is not installed (bench/models.py needs it)")

ROOT = Path(__file__).resolve().parents[3]  # bench/ lives beside the library

from bench.run import PEERS, peers_of  # noqa: E402
from opgraph.backends.cpu.config import supports_isa  # noqa: E402

#: A 3x3 convolution of 16 channels as an ONNX model, its OpenVINO kernels printed.
KERNELS = """
import os, sys
import numpy as np
if sys.argv[1] != "native":
    os.environ["ONEDNN_MAX_CPU_ISA"] = sys.argv[1]
from bench.onnx_builder import OnnxGraph
from bench.runners import compile_openvino, openvino_kernels
g = OnnxGraph("conv")
x = g.input("x", (1, 16, 16, 16))
w = g.const(np.ones((16, 16, 3, 3), np.float32))
g.output(g.op("Conv", x, w, pads=[1, 1, 1, 1]), (1, 16, 16, 16))
print(openvino_kernels(compile_openvino(g.model(), 1)[0]))
"""


def _kernels(isa: str) -> dict[str, int]:
    run = subprocess.run(
        [sys.executable, "-c", KERNELS, isa],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return ast.literal_eval(run.stdout.strip().splitlines()[-1])


def test_openvino_convolutions_are_held_to_avx2() -> None:
    if not supports_isa("avx2"):
        pytest.skip("this CPU has no AVX2")
    kernels = _kernels("AVX2")
    assert sum(kernels.values()) == 1
    assert all("avx2" in k for k in kernels), kernels


def test_openvino_convolutions_use_avx512_unrestricted() -> None:
    if not supports_isa("avx512"):
        pytest.skip("this CPU has no AVX-512: nothing wider than AVX2 to tell apart")
    kernels = _kernels("native")
    assert any("avx512" in k for k in kernels), kernels


def test_ratio_is_against_openvino_alone_when_it_is_restricted() -> None:
    assert peers_of(argparse.Namespace(peer_isa="native")) == PEERS
    assert peers_of(argparse.Namespace(peer_isa="avx2")) == ("openvino",)
