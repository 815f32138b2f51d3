"""Whether GCC may vectorize loops with gathers (``-mtune-ctrl=use_gather``).

GCC decides by its tuning table. For a CPU model it does not know it falls back to
``-mtune=generic`` (GCC 12.2 on an Emerald Rapids guest: ``-march=icelake-client
-mtune=generic``), and generic tuning never vectorizes a gather: a loop with a table lookup
(the 256-entry tables of ``fold_quantized_chains``: BERT's quantized GELU) then stays
scalar, 7.9 ns an element against 1.26 with gathers (docs/performance.md, h142).

The flag is added only where all of these hold: GCC (the only compiler that reads it), an
x86-64 CPU, GCC resolving the target flags to ``generic`` tuning (a CPU model GCC knows
keeps GCC's own choice), an Intel CPU (GCC's tunings for Intel's AVX2 and AVX-512 cores use
gathers; its tunings for AMD's Zen cores, whose gathers are slower, do not), and the kernel
reporting the CPU "Not affected" by Gather Data Sampling (where a microcode mitigation slows
every gather, or the kernel says nothing, generic tuning stays).
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
from pathlib import Path

from opgraph.backends.cpu.config import cpu_vendor

__all__ = ["GATHER_FLAG", "GDS_REPORT", "gather_flags", "resolved_tune"]

#: The GCC flag that turns gather vectorization on whatever the tuning.
GATHER_FLAG = "-mtune-ctrl=use_gather"
#: The kernel's report on Gather Data Sampling (Downfall): "Not affected" where the CPU's
#: vector gathers run at full speed (no microcode mitigation that slows them).
GDS_REPORT = Path("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling")
_TUNE_LINE = re.compile(r"^\s*-mtune=\s+(\S+)\s*$", re.MULTILINE)


@functools.cache
def resolved_tune(compiler: str, target: tuple[str, ...]) -> str | None:
    """The tuning GCC resolves ``target`` to (``-Q --help=target``: ``generic``,
    ``icelake-server``, ``znver4``, ...); None where the compiler does not say (not GCC, or
    it failed)."""
    try:
        done = subprocess.run(
            [compiler, *target, "-Q", "--help=target"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = _TUNE_LINE.search(done.stdout) if done.returncode == 0 else None
    return found[1] if found else None


def _gds_not_affected() -> bool:
    try:
        return GDS_REPORT.read_text().strip() == "Not affected"
    except OSError:
        return False


@functools.cache
def gather_flags(compiler: str | None, target: tuple[str, ...]) -> tuple[str, ...]:
    """``(GATHER_FLAG,)`` where GCC tunes ``target`` for ``generic`` on an Intel x86-64 CPU
    that the kernel reports not affected by Gather Data Sampling; ``()`` elsewhere."""
    if compiler is None or platform.machine() not in ("x86_64", "AMD64"):
        return ()
    if cpu_vendor() != "GenuineIntel" or not _gds_not_affected():
        return ()
    return (GATHER_FLAG,) if resolved_tune(compiler, target) == "generic" else ()
