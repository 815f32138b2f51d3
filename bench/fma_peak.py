"""One core's f32 FMA peak for each vector width, and what it means for the BERT layer (W5).

    python bench/fma_peak.py

The register-only multiply-add loop of ``bench/gemm_tiles.py`` (``peak_source``: twelve
independent ``vfmadd231ps`` per iteration on ymm for AVX2, zmm for AVX-512, compiled with the
flags of ``CpuConfig.isa``) timed by its thread CPU time, best of three runs. Each ISA this
CPU runs gets a line: GFLOP/s, and the BERT layer's floor at that peak (its multiply-add work,
``bench/bert.py``'s ``flops``, at 100 % of the peak). On a core
that splits 512-bit operations in two (Zen 4) both widths reach the same peak; on one with
a 512-bit datapath (Zen 5) AVX2 code reaches half of AVX-512's.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import bert, machine
from bench.gemm_tiles import PEAK_REGISTERS, measure_peak
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.config import supports_isa


def main() -> None:
    flops = bert.w5().flops
    compiler = default_config().compiler or "cc"
    print(machine.cpu())
    with tempfile.TemporaryDirectory(prefix="opgraph-fma-peak-") as tmp:
        for isa in PEAK_REGISTERS:
            if not supports_isa(isa):
                print(f"{isa}: not run (this CPU lacks it)")
                continue
            gflops = measure_peak(isa, Path(tmp), compiler)
            print(
                f"{isa}: {gflops:.1f} GFLOP/s per core; BERT layer ({flops * 1e-9:.2f} GFLOP) "
                f"at that peak: {flops / gflops * 1e-6:.2f} ms per core"
            )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
