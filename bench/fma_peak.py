"""One core's f32 FMA peak for each vector width, and what it means for the BERT layer (W5).

    python bench/fma_peak.py [--iterations 100000000] [--repeat 3]

A register-only loop (12 independent chains of ``a = a * b + c`` on 8-lane vectors compiled
for AVX2, ``-march=x86-64-v3``, and on 16-lane vectors compiled for AVX-512,
``-march=x86-64-v4``: the flags of ``CpuConfig.isa``) timed by its thread CPU time, best of
``--repeat``. Each ISA this CPU runs gets a line: GFLOP/s, and the BERT layer's floor at that
peak (its multiply-add work, ``bench/bert.py``'s ``flops``, at 100 % of the peak). On a core
that splits 512-bit operations in two (Zen 4) both widths reach the same peak; on one with
a 512-bit datapath (Zen 5) AVX2 code reaches half of AVX-512's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import bert
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.config import ISA_FLAGS, supports_isa

#: Vector bytes per ISA.
WIDTHS = {"avx2": 32, "avx512": 64}
CHAINS = 12

SOURCE = """
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef float v __attribute__((vector_size(%(bytes)d)));
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char** argv) {
  long n = atol(argv[1]);
  v b = (v){0} + 0.999f, c = (v){0} + 1e-9f, a[%(chains)d];
  for (int i = 0; i < %(chains)d; ++i) a[i] = (v){0} + (float)i;  /* distinct chains */
  double t = now();
  for (long k = 0; k < n; ++k) {
    %(body)s
  }
  t = now() - t;
  v s = (v){0};
  for (int i = 0; i < %(chains)d; ++i) s += a[i];
  printf("%%.3f %%g\\n", n * %(chains)d * 2.0 * %(lanes)d / t * 1e-9, (double)s[0]);
  return 0;
}
"""


def build(isa: str, directory: Path) -> Path:
    """The loop compiled for ``isa`` (the chains unrolled: each lives in a register)."""
    body = " ".join(f"a[{i}] = a[{i}] * b + c;" for i in range(CHAINS))
    bytes_ = WIDTHS[isa]
    source = directory / f"peak_{isa}.c"
    source.write_text(
        SOURCE % {"bytes": bytes_, "chains": CHAINS, "body": body, "lanes": bytes_ // 4}
    )
    binary = directory / f"peak_{isa}"
    compiler = default_config().compiler or "cc"
    flags = ("-O2", "-ffp-contract=fast", *ISA_FLAGS[isa])
    subprocess.run([compiler, *flags, str(source), "-o", str(binary)], check=True)
    return binary


def peak(binary: Path, iterations: int, repeat: int) -> float:
    """The best GFLOP/s of ``repeat`` runs."""
    runs = (
        subprocess.run([str(binary), str(iterations)], check=True, capture_output=True, text=True)
        for _ in range(repeat)
    )
    return max(float(r.stdout.split()[0]) for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=100_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    flops = bert.w5().flops
    with tempfile.TemporaryDirectory(prefix="opgraph-fma-peak-") as tmp:
        for isa in WIDTHS:
            if not supports_isa(isa):
                print(f"{isa}: not run (this CPU lacks it)")
                continue
            gflops = peak(build(isa, Path(tmp)), args.iterations, args.repeat)
            print(
                f"{isa}: {gflops:.1f} GFLOP/s per core; BERT layer ({flops * 1e-9:.2f} GFLOP) "
                f"at that peak: {flops / gflops * 1e-6:.2f} ms per core"
            )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
