"""The panel GEMM units side by side in a C harness: AVX2 over whole panels (``gemm_panels``'s
AVX2 branch), AVX2 over half panels (``gemm_half_panels``) and AVX-512 (``gemm_panels``).

    python bench/gemm_tiles.py [--shape 128x3072x768 ...] [--blocks 8] [--reps 30]

Each unit's C text (``codegen/dialect.py``) is compiled as the CPU backend compiles it (its
``CFLAGS``, ``-march`` of the ISA) beside a small C driver that packs the weights in the
unit's layout (8 copies, used in turn, so the panels come from memory as in a model), runs
the product in ``--blocks`` column blocks one after the other on one thread (the blocks of a
two-thread split, per core), and reports GF/s from thread CPU time (median and best of
``--reps`` calls) with the largest error against a double-precision product and an FNV-1a
hash of ``C``'s bytes (the same hash from two builds: bitwise equal products). The kernels'
flops per cycle, not the model's: for whole models see ``bench/per_core.py --isa avx2``.

Each figure is also given as a share of its ISA's multiply-add peak on this core, measured
first (:func:`peak_source`: twelve independent register-only ``vfmadd231ps`` per loop, ymm
for AVX2, zmm for AVX-512), with the CPU's family and model: where 512-bit multiply-adds run
at the 256-bit rate (Zen 4) the two ISAs share a peak; where they run at full width (Zen 5)
AVX2's peak is half AVX-512's, and no AVX2 tile can close that gap.

``native`` is the unit as the default build compiles it (``-march=native``): on a Zen 5 it
differs from ``avx512`` (``-march=x86-64-v4 -mtune=native``), whose flags do not show the CPU's
AVX-VNNI, by the broadcasts of ``a``'s floats (``dialect.BROADCAST_TARGETS``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import machine
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.compiler import CFLAGS
from opgraph.backends.cpu.config import ISA_FLAGS, supports_isa

#: name: (helper, ISA, half panels)
UNITS = {
    "avx2 whole panels": ("gemm_panels", "avx2", False),
    "avx2 half panels": ("gemm_half_panels", "avx2", True),
    "avx512": ("gemm_panels", "avx512", False),
    "native": ("gemm_panels", "native", False),
}
SHAPES = ["256x784x512", "256x512x512", "128x768x2304", "128x768x768", "128x768x3072",
          "128x3072x768", "49x4608x512"]  # fmt: skip

#: isa: (register prefix, floats per register) of the peak loop
PEAK_REGISTERS = {"avx2": ("ymm", 8), "avx512": ("zmm", 16)}
#: accumulators of the peak loop: independent chains (4-cycle latency, two multiply-adds a
#: cycle need 8 at least), registers 14 and 15 hold the operands
PEAK_CHAINS = 12

PEAK = r"""
#include <stdio.h>
#include <time.h>
static double now(void) {{
  struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}}
int main(void) {{
  long n = 50000000;
  double t0 = now();
  for (long i = 0; i < n; ++i) __asm__ volatile({fmas} ::: {clobbers});
  printf("%.1f\n", 2e-9 * {chains} * {lanes} * n / (now() - t0));
  return 0;
}}
"""

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <math.h>
void og_gemm_panels(const float*, long, const float*, float*, long, long, long, long, long);
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y;
}
int main(int argc, char** argv) {
  long M = atol(argv[1]), K = atol(argv[2]), N = atol(argv[3]);
  int blocks = atoi(argv[4]), reps = atoi(argv[5]), halves = atoi(argv[6]), copies = 8;
  long lda = (K * 4) % 4096 == 0 ? K + 16 : K, panels = (N + 31) / 32;
  float* A = malloc(M * lda * 4); float* W = malloc(K * N * 4); float* C = malloc(M * N * 4);
  srand(1);
  for (long i = 0; i < M * lda; ++i) A[i] = rand() / (float)RAND_MAX - 0.5f;
  for (long i = 0; i < K * N; ++i) W[i] = rand() / (float)RAND_MAX - 0.5f;
  float* P[8];
  for (int c = 0; c < copies; ++c) {
    P[c] = aligned_alloc(64, panels * K * 32 * 4);
    for (long b = 0; b < panels; ++b) for (long k = 0; k < K; ++k) for (long j = 0; j < 32; ++j) {
      long n = b * 32 + j, at = halves ? b * K * 32 + (j / 16) * K * 16 + k * 16 + j % 16
                                       : (b * K + k) * 32 + j;
      P[c][at] = n < N ? W[k * N + n] : 0.0f;
    }
  }
  double* t = malloc(reps * sizeof(double));
  for (int r = -2; r < reps; ++r) {
    double t0 = now();
    for (int b = 0; b < blocks; ++b) {
      long first = N * b / blocks / 32 * 32;
      long last = b < blocks - 1 ? N * (b + 1) / blocks / 32 * 32 : N;
      if (first < last) og_gemm_panels(A, lda, P[(r + 2) % copies], C, N, M, K, first, last);
    }
    if (r >= 0) t[r] = now() - t0;
  }
  double err = 0;
  for (long m = 0; m < M; ++m) for (long n = 0; n < N; ++n) {
    double s = 0; for (long k = 0; k < K; ++k) s += (double)A[m * lda + k] * W[k * N + n];
    err = fmax(err, fabs(C[m * N + n] - s));
  }
  unsigned long hash = 14695981039346656037UL;  /* FNV-1a of C's bytes */
  const unsigned char* bytes = (const unsigned char*)C;
  for (long i = 0; i < M * N * 4; ++i) hash = (hash ^ bytes[i]) * 1099511628211UL;
  qsort(t, reps, sizeof(double), cmp);
  printf("%.1f %.1f %.2g %016lx\n", 2e-9 * M * N * K / t[reps / 2], 2e-9 * M * N * K / t[0], err,
         hash);
  return 0;
}
"""


def peak_source(isa: str) -> str:
    """A C program that prints the multiply-add peak (GF/s) of ``isa``'s widest registers on one
    core: :data:`PEAK_CHAINS` independent register-only ``vfmadd231ps`` per loop iteration."""
    reg, lanes = PEAK_REGISTERS[isa]
    fmas = " ".join(
        f'"vfmadd231ps %%{reg}14, %%{reg}15, %%{reg}{r}\\n\\t"' for r in range(PEAK_CHAINS)
    )
    clobbers = ", ".join(f'"xmm{r}"' for r in range(PEAK_CHAINS))
    return PEAK.format(fmas=fmas, clobbers=clobbers, chains=PEAK_CHAINS, lanes=lanes)


def peak_isa(isa: str) -> str:
    """The ISA whose multiply-add peak a unit built for ``isa`` is measured against (``native``:
    AVX-512 where this CPU has it, else AVX2)."""
    if isa != "native":
        return isa
    return "avx512" if supports_isa("avx512") else "avx2"


def measure_peak(isa: str, tmp: Path, compiler: str) -> float:
    """:func:`peak_source`'s figure for ``isa``, compiled and run here (the best of three runs)."""
    source, binary = tmp / f"peak_{isa}.c", tmp / f"peak_{isa}"
    source.write_text(peak_source(isa))
    subprocess.run([compiler, "-O2", *ISA_FLAGS[isa], str(source), "-o", str(binary)], check=True)
    runs = [
        subprocess.run([str(binary)], check=True, capture_output=True, text=True) for _ in range(3)
    ]
    return max(float(run.stdout) for run in runs)


def build(name: str, tmp: Path, compiler: str) -> Path:
    helper, isa, _ = UNITS[name]
    source = tmp / f"{helper}_{isa}.c"
    code = dialect.HELPERS[helper]().replace("static void og_gemm_panels(", "void og_gemm_panels(")
    source.write_text(dialect.PRELUDE + "\n" + code + "\n")
    (tmp / "driver.c").write_text(DRIVER)
    flags = [f for f in (CFLAGS[0], *ISA_FLAGS[isa], *CFLAGS[1:]) if f not in ("-shared", "-fPIC")]
    binary = tmp / f"{helper}_{isa}"
    command = [compiler, *flags, str(source), str(tmp / "driver.c"), "-o", str(binary), "-lm"]
    subprocess.run(command, check=True)
    return binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", action="append", help="MxKxN (repeatable)")
    parser.add_argument("--blocks", type=int, default=8, help="column blocks run in turn")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    compiler = default_config().compiler
    if compiler is None:
        sys.exit("no C compiler")
    names = [n for n in UNITS if supports_isa(UNITS[n][1])]
    with tempfile.TemporaryDirectory(prefix="opgraph-gemm-tiles-") as tmp:
        isas = dict.fromkeys(peak_isa(UNITS[n][1]) for n in names)
        peaks = {isa: measure_peak(isa, Path(tmp), compiler) for isa in isas}
        print(machine.cpu())
        print(
            "multiply-add peak, one core, GF/s: "
            + ", ".join(f"{i} {v:.1f}" for i, v in peaks.items())
        )
        binaries = {name: build(name, Path(tmp), compiler) for name in names}
        for shape in args.shape or SHAPES:
            m, k, n = shape.split("x")
            cells = []
            for name in names:
                halves = str(int(UNITS[name][2]))
                command = [str(binaries[name]), m, k, n, str(args.blocks), str(args.reps), halves]
                median, best, err, digest = subprocess.run(
                    command, check=True, capture_output=True, text=True
                ).stdout.split()
                share = 100 * float(median) / peaks[peak_isa(UNITS[name][1])]
                cells.append(
                    f"{name} {median} ({share:.0f} % of peak, best {best}, err {err}, C {digest})"
                )
            print(f"{shape}, {args.blocks} blocks, GF/s: " + "; ".join(cells), flush=True)
    print(f"load average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
