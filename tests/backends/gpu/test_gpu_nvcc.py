"""Compile-only checks of the generated CUDA with nvcc (no GPU needed).

* Every golden module and a few more (integer helpers and checks, convolution and pooling,
  integer products, bf16), in one translation unit, to PTX for sm_90 and for sm_80.
* Every kernel the numeric record table generates (every op × element type), to PTX for
  sm_90, in two translation units compiled side by side; kernels that differ from an earlier
  one only in sizes, strides and names are compiled once.
"""

import re
import shutil
import subprocess

import pytest
from gpu_cases import CASES, COMPILE_ONLY, fake_backend

from opgraph.backends.gpu.cuda.module import assemble
from opgraph.testing.records import RECORDS

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")


def _command(source, arch):
    ptx = source.with_suffix(".ptx")
    return [NVCC, f"-arch={arch}", "--ptx", "-std=c++17", str(source), "-o", str(ptx)], ptx


def _compile_all(units, arch):
    """Compile ``units`` ([(path, kernel names)]) concurrently; check every kernel is in
    the PTX."""
    running = []
    for path, names in units:
        command, ptx = _command(path, arch)
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        running.append((process, ptx, names))
    for process, ptx, names in running:
        _, errors = process.communicate()
        assert process.returncode == 0, errors[-6000:]
        text = ptx.read_text()
        missing = [n for n in names if f".entry {n}(" not in text]
        assert not missing, f"kernels missing from {ptx.name}: {missing[:20]}"


def _distinct(kernels):
    """Kernels whose source differs from every earlier one in more than integers and names."""
    seen, kept = set(), []
    for k in kernels:
        shape = re.sub(r"\b\d+\b", "N", k.source.replace(k.name, "K").split("*/", 1)[1])
        if shape not in seen:
            seen.add(shape)
            kept.append(k)
    return kept


def _unit(directory, name, kernels):
    path = directory / f"{name}.cu"
    path.write_text(assemble(kernels, name))
    return path, [k.name for k in kernels]


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_golden_and_extra_kernels_compile(tmp_path, arch):
    backend, _ = fake_backend()
    kernels = [
        k
        for build in {**CASES, **COMPILE_ONLY}.values()
        for k in backend.compile(build()).kernels()
    ]
    assert len(kernels) >= 10
    _compile_all([_unit(tmp_path, "cases", kernels)], arch)


def test_record_table_kernels_compile(tmp_path):
    backend, _ = fake_backend()
    kernels = _distinct(
        [
            k
            for record in RECORDS
            for t in record.element_types
            for k in backend.compile(record.function(t)).kernels()
        ]
    )
    assert len(kernels) > 1000
    half = len(kernels) // 2
    units = [
        _unit(tmp_path, "records_a", kernels[:half]),
        _unit(tmp_path, "records_b", kernels[half:]),
    ]
    _compile_all(units, "sm_90")
