"""The panel GEMM units side by side in a C harness: AVX2 over whole panels (``gemm_panels``'s
AVX2 branch), AVX2 over half panels (``gemm_half_panels``) and AVX-512 (``gemm_panels``).

    python bench/gemm_tiles.py [--shape 128x3072x768 ...] [--blocks 8] [--reps 30]

Each unit's C text (``codegen/dialect.py``) is compiled as the CPU backend compiles it (its
``CFLAGS``, ``-march`` of the ISA) beside a small C driver that packs the weights in the
unit's layout (8 copies, used in turn, so the panels come from memory as in a model), runs
the product in ``--blocks`` column blocks one after the other on one thread (the blocks of a
two-thread split, per core), and reports GF/s from thread CPU time (median and best of
``--reps`` calls) with the largest error against a double-precision product. The kernels'
flops per cycle, not the model's: for whole models see ``bench/per_core.py --isa avx2``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.compiler import CFLAGS
from opgraph.backends.cpu.config import ISA_FLAGS, supports_isa

#: name: (helper, ISA, half panels)
UNITS = {
    "avx2 whole panels": ("gemm_panels", "avx2", False),
    "avx2 half panels": ("gemm_half_panels", "avx2", True),
    "avx512": ("gemm_panels", "avx512", False),
}
SHAPES = ["256x784x512", "256x512x512", "128x768x2304", "128x768x768", "128x768x3072",
          "128x3072x768", "49x4608x512"]  # fmt: skip

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
  qsort(t, reps, sizeof(double), cmp);
  printf("%.1f %.1f %.2g\n", 2e-9 * M * N * K / t[reps / 2], 2e-9 * M * N * K / t[0], err);
  return 0;
}
"""


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
        binaries = {name: build(name, Path(tmp), compiler) for name in names}
        for shape in args.shape or SHAPES:
            m, k, n = shape.split("x")
            cells = []
            for name in names:
                halves = str(int(UNITS[name][2]))
                command = [str(binaries[name]), m, k, n, str(args.blocks), str(args.reps), halves]
                median, best, err = subprocess.run(
                    command, check=True, capture_output=True, text=True
                ).stdout.split()
                cells.append(f"{name} {median} (best {best}, err {err})")
            print(f"{shape}, {args.blocks} blocks, GF/s: " + "; ".join(cells), flush=True)
    print(f"load average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
