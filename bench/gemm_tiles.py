"""The panel GEMM units side by side in a C harness: AVX2 over whole panels (``gemm_panels``'s
AVX2 branch), AVX2 over half panels (``gemm_half_panels``) and AVX-512 (``gemm_panels``).

    python bench/gemm_tiles.py [--shape 128x3072x768 ...] [--blocks 8] [--reps 30] [--copies 8]
                               [--first-tile]

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

``--first-tile`` (AVX-512 CPUs) also times each micro-kernel call of the ``native`` unit
(``rdtsc`` around it, in an instrumented copy of the unit's text) and prints the median cost of
a call of a panel group's first row tile, which streams the group's panel slices from L3 or
memory, against the others, which find them in L2, and what that excess is of the whole
product; ``--copies 1`` uses one copy of the weights (from L3) instead of eight.

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
#ifdef OG_FIRST_TILE
#define OG_TILE_KEPT (1 << 20)
extern unsigned long long og_tile_ticks[2][OG_TILE_KEPT], og_tile_calls[2];
static int cmp_ticks(const void* a, const void* b) {
  unsigned long long x = *(const unsigned long long*)a, y = *(const unsigned long long*)b;
  return x < y ? -1 : x > y;
}
static double median_ticks(int i) {
  long n = og_tile_calls[i] < OG_TILE_KEPT ? og_tile_calls[i] : OG_TILE_KEPT;
  qsort(og_tile_ticks[i], n, sizeof(unsigned long long), cmp_ticks);
  return (double)og_tile_ticks[i][n / 2];
}
#endif
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y;
}
int main(int argc, char** argv) {
  long M = atol(argv[1]), K = atol(argv[2]), N = atol(argv[3]);
  int blocks = atoi(argv[4]), reps = atoi(argv[5]), halves = atoi(argv[6]), copies = atoi(argv[7]);
  long lda = (K * 4) % 4096 == 0 ? K + 16 : K, panels = (N + 31) / 32;
  float* A = malloc(M * lda * 4); float* W = malloc(K * N * 4); float* C = malloc(M * N * 4);
  srand(1);
  for (long i = 0; i < M * lda; ++i) A[i] = rand() / (float)RAND_MAX - 0.5f;
  for (long i = 0; i < K * N; ++i) W[i] = rand() / (float)RAND_MAX - 0.5f;
  float* P[64];
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
#ifdef OG_FIRST_TILE
  printf("%.0f %.0f %.4f ", median_ticks(0), median_ticks(1),
         (double)og_tile_calls[0] / (og_tile_calls[0] + og_tile_calls[1]));
#endif
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


#: What an instrumented unit (``--first-tile``) keeps: each call's ``rdtsc`` ticks (the first
#: ``OG_TILE_KEPT``) and the count of calls, [0] of a group's first row tile, [1] of the others.
#: The driver prints medians: a call during which the thread was descheduled is an outlier.
TILE_COUNTERS = (
    "#define OG_TILE_KEPT (1 << 20)\n"
    "unsigned long long og_tile_ticks[2][OG_TILE_KEPT], og_tile_calls[2];\n"
)


def instrumented(code: str) -> str:
    """``code`` (a ``gemm_panels`` unit) with every micro-kernel call of ``og_gemm_panels`` timed
    by ``rdtsc``, counted apart for the first row tile (``outer == 0``) and the others."""
    start, end = "#define OG_MK(R)", "#undef OG_MK\n"
    assert code.count(start) == code.count(end) > 0, "the unit's tile loop changed"
    code = code.replace(start, "unsigned long long og_t0 = __builtin_ia32_rdtsc();\n" + start)
    count = (
        "{ int og_i = outer != 0; unsigned long long og_n = og_tile_calls[og_i]++; "
        "if (og_n < OG_TILE_KEPT) og_tile_ticks[og_i][og_n] = __builtin_ia32_rdtsc() - og_t0; }\n"
    )
    return TILE_COUNTERS + code.replace(end, end + count)


def build(name: str, tmp: Path, compiler: str, first_tile: bool = False) -> Path:
    helper, isa, _ = UNITS[name]
    suffix = "_timed" if first_tile else ""
    source = tmp / f"{helper}_{isa}{suffix}.c"
    code = dialect.HELPERS[helper]().replace("static void og_gemm_panels(", "void og_gemm_panels(")
    if first_tile:
        code = instrumented(code)
    source.write_text(dialect.PRELUDE + "\n" + code + "\n")
    (tmp / "driver.c").write_text(DRIVER)
    flags = [f for f in (CFLAGS[0], *ISA_FLAGS[isa], *CFLAGS[1:]) if f not in ("-shared", "-fPIC")]
    if first_tile:
        flags.append("-DOG_FIRST_TILE")
    binary = tmp / f"{helper}_{isa}{suffix}"
    command = [compiler, *flags, str(source), str(tmp / "driver.c"), "-o", str(binary), "-lm"]
    subprocess.run(command, check=True)
    return binary


def first_tile_line(binary: Path, shape: str, blocks: int, reps: int, copies: int) -> str:
    """The instrumented native unit's ticks per call, first row tile against the others."""
    m, k, n = shape.split("x")
    command = [str(binary), m, k, n, str(blocks), str(reps), "0", str(copies)]
    first, rest, calls, median, _, _, _ = subprocess.run(
        command, check=True, capture_output=True, text=True
    ).stdout.split()
    f, r, c = float(first), float(rest), float(calls)
    excess = 100 * c * (f - r) / (c * f + (1 - c) * r)
    return (
        f"{shape}, native, median rdtsc ticks per micro-kernel call: a group's first row tile "
        f"{first}, the others {rest} ({f / r:.2f}x, {100 * c:.1f} % of the calls; the excess is "
        f"{excess:.1f} % of the product); {median} GF/s with the timing"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", action="append", help="MxKxN (repeatable)")
    parser.add_argument("--blocks", type=int, default=8, help="column blocks run in turn")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--copies", type=int, default=8, help="weight copies cycled (1-64)")
    parser.add_argument(
        "--first-tile", action="store_true", help="time the native unit's calls per row tile"
    )
    args = parser.parse_args()
    if not 1 <= args.copies <= 64:
        parser.error(f"--copies takes 1 to 64, not {args.copies}")
    if args.first_tile and not supports_isa("avx512"):
        parser.error("--first-tile times the AVX-512 unit's row tiles; this CPU has no AVX-512")
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
        timed = build("native", Path(tmp), compiler, True) if args.first_tile else None
        for shape in args.shape or SHAPES:
            m, k, n = shape.split("x")
            cells = []
            for name in names:
                halves = str(int(UNITS[name][2]))
                command = [str(binaries[name]), m, k, n, str(args.blocks), str(args.reps), halves]
                command.append(str(args.copies))
                median, best, err, digest = subprocess.run(
                    command, check=True, capture_output=True, text=True
                ).stdout.split()
                share = 100 * float(median) / peaks[peak_isa(UNITS[name][1])]
                cells.append(
                    f"{name} {median} ({share:.0f} % of peak, best {best}, err {err}, C {digest})"
                )
            print(f"{shape}, {args.blocks} blocks, GF/s: " + "; ".join(cells), flush=True)
            if timed is not None:
                print(
                    first_tile_line(timed, shape, args.blocks, args.reps, args.copies), flush=True
                )
    print(f"load average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
