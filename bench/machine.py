"""What a benchmark ran on: the CPU (family and model tell Zen 4 from Zen 5, whose AVX-512
runs at twice the width: "AMD EPYC" alone does not) and the BLAS kernels opgraph's OpenBLAS
runs (``CpuConfig.blas_core``)."""

from __future__ import annotations

from pathlib import Path


def cpu_identity(cpuinfo: str) -> str:
    """The first processor's family, model and name in ``/proc/cpuinfo``'s text."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if not key.strip() and fields:
            break
        fields.setdefault(key.strip(), value.strip())
    family, model = fields.get("cpu family", "?"), fields.get("model", "?")
    return f"{fields.get('model name', 'unknown CPU')} (family {family}, model {model})"


def cpu() -> str:
    """This machine's :func:`cpu_identity`."""
    cpuinfo = Path("/proc/cpuinfo")
    return cpu_identity(cpuinfo.read_text() if cpuinfo.exists() else "")


def blas_kernels() -> str:
    """The OpenBLAS kernels opgraph's BLAS runs in this process (loading it if needed, with the
    default configuration's choice)."""
    from opgraph.backends.cpu import default_config
    from opgraph.backends.cpu.compiler import blas

    return blas(default_config().blas_coretype()).core
