"""The panel GEMM's blocks side by side: does a thread run its blocks slower beside another?

    python bench/gemm_pair.py [--rows 256 --inner 784 --cols 512] [--block 64] [--rounds 4000]
                              [--isa avx2] [--copies 1] [--bands]

Builds ``og_gemm_panels`` (``codegen/dialect.py``, the product of a constant matrix) into a
C harness that times column blocks of ``--block`` columns (64: the W3 MLP's split of its first
product, 8 blocks for two threads; BERT's products split into 8 blocks of 288, 96, 384 and
96 columns) in rounds: every other round one thread runs all the blocks alone, the
rounds between two threads run half each, started together at a barrier. Each thread's CPU
time (``CLOCK_THREAD_CPUTIME_ID``) per block is kept only where it ran undisturbed (wall
time within 5 % of its CPU time) and, for the pairs, where the two threads' runs overlapped
for at least 90 % of the pair's span: so the figures hold on a loaded machine, where few
rounds survive but the kept ones are real side-by-side runs. Prints the mean CPU time per
block alone and side by side, and their ratio (shared L3 and memory traffic, false sharing),
and the last round's largest error against a double-precision product, and the pairs' mean
span (first start to last end, wall clock) against half the one-thread time.

``--bands``: in the pairs each thread runs the blocks of ``--block`` columns over its half of
the rows (``--block 512`` for 512 columns: one block a band, as ``blas.band_split`` shares a
product, docs/design.md §10, h123); the rounds alone keep column blocks over every row.

The rounds cycle ``--copies`` copies of the weights (1: from L3 after the first round; 16:
even the 2.4 MB of BERT's output projection come from memory, as in a model whose weights
outgrow the L3), and the threads meet at a spinning barrier (the pool's workers spin
between steps): a pair's panel groups start within a microsecond of each other, so their
first row tiles, which stream the weights, run at the same moments (docs/performance.md,
2026-11-27, H119).
Rows of ``a`` a multiple of 4 KiB apart are padded by 16 floats, as the generated code reads
them (``row_padding.py``).
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
from opgraph.backends.cpu.config import ISA_FLAGS, resolve_compiler

HARNESS = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
enum { M = %(rows)d, K = %(inner)d, N = %(cols)d, BLOCK = %(block)d, BLOCKS = N / BLOCK };
enum { LDA = K %% 1024 ? K : K + 16, COPIES = %(copies)d, BANDS = %(bands)d };
static float *A, *P, *C, *copies[COPIES];
static volatile int arrived, phase;
static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
typedef struct { int first, last; double cpu, w0, w1; } part;
static void barrier(void) {  /* two threads, spinning: the pool's workers spin between steps */
  int seen = __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == 2) {
    __atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&phase, seen + 1, __ATOMIC_RELEASE);
  } else {
    while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) == seen) __builtin_ia32_pause();
  }
}
static part parts[2];
static int pair;
static volatile int quit;
static void run(part* p) {
  double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
  p->w0 = clock_s(CLOCK_MONOTONIC);
  long r0 = p == &parts[1] ? M / 2 : 0, r1 = r0 ? M : M / 2; /* the thread's band */
  if (BANDS && pair)
    for (int b = 0; b < BLOCKS; ++b)
      og_gemm_panels(A + r0 * LDA, LDA, P, C + r0 * N, N, r1 - r0, K, (long)BLOCK * b,
                     (long)BLOCK * (b + 1));
  else
    for (int b = p->first; b < p->last; ++b)
      og_gemm_panels(A, LDA, P, C, N, M, K, (long)BLOCK * b, (long)BLOCK * (b + 1));
  p->w1 = clock_s(CLOCK_MONOTONIC);
  p->cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
}
static int calm(const part* p) { return p->w1 - p->w0 < 1.05 * p->cpu; }
static void* other(void* arg) {
  for (;;) {
    barrier();
    if (quit) return arg;
    if (pair) run(&parts[1]);
    barrier();
  }
}
int main(int argc, char** argv) {
  int rounds = atoi(argv[1]), kept[2] = {0, 0};
  double sum[2] = {0, 0}, spans = 0;
  A = aligned_alloc(64, sizeof(float) * M * LDA);
  for (int c = 0; c < COPIES; ++c) {
    copies[c] = aligned_alloc(64, sizeof(float) * K * ((N + 31) / 32 * 32));
    for (long i = 0; i < (long)K * ((N + 31) / 32 * 32); ++i)
      copies[c][i] = rand() / (float)RAND_MAX - 0.5f;
  }
  C = aligned_alloc(64, sizeof(float) * M * N);
  for (long i = 0; i < (long)M * LDA; ++i) A[i] = rand() / (float)RAND_MAX - 0.5f;
  pthread_t t;
  pthread_create(&t, 0, other, 0);
  for (int r = 0; r < rounds; ++r) {
    pair = r & 1;
    P = copies[r %% COPIES];
    parts[0] = (part){0, pair ? BLOCKS / 2 : BLOCKS};
    parts[1] = (part){BLOCKS / 2, BLOCKS};
    barrier();
    run(&parts[0]);
    barrier();
    const part *a = &parts[0], *b = &parts[1];
    if (!pair && calm(a)) {
      sum[0] += a->cpu / BLOCKS;
      ++kept[0];
    }
    double lo = a->w0 > b->w0 ? a->w0 : b->w0, hi = a->w1 < b->w1 ? a->w1 : b->w1;
    double span = (a->w1 > b->w1 ? a->w1 : b->w1) - (a->w0 < b->w0 ? a->w0 : b->w0);
    if (pair && calm(a) && calm(b) && hi - lo > 0.9 * span) {
      sum[1] += (a->cpu + b->cpu) / BLOCKS;
      spans += span;
      ++kept[1];
    }
  }
  quit = 1;
  barrier();
  double err = 0;  /* the last round's product against a double-precision one */
  for (long m = 0; m < M; ++m)
    for (long n = 0; n < N; ++n) {
      double s = -C[m * N + n];
      for (long k = 0; k < K; ++k) s += (double)A[m * LDA + k] * P[(n / 32 * K + k) * 32 + n %% 32];
      if (s > err || -s > err) err = s > 0 ? s : -s;
    }
  printf("%%d %%d %%.9f %%.9f %%.3g %%.9f\n", kept[0], kept[1], kept[0] ? sum[0] / kept[0] : 0.0,
         kept[1] ? sum[1] / kept[1] : 0.0, err, kept[1] ? spans / kept[1] : 0.0);
  return 0;
}
"""


def build(work: Path, args: argparse.Namespace) -> Path:
    compiler = resolve_compiler(default_config().compiler)
    if compiler is None:
        sys.exit("no C compiler")
    source = work / "gemm_pair.c"
    panels = dialect.HELPERS["gemm_panels"]()
    body = HARNESS % {
        "rows": args.rows,
        "inner": args.inner,
        "cols": args.cols,
        "block": args.block,
        "copies": args.copies,
        "bands": int(args.bands),
    }
    source.write_text(f"{dialect.PRELUDE}\n{panels}\n{body}")
    exe = work / "gemm_pair"
    flags = [*ISA_FLAGS[args.isa], "-O3", "-fno-math-errno", "-fno-trapping-math", "-pthread"]
    subprocess.run([compiler, *flags, str(source), "-o", str(exe)], check=True)
    return exe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--inner", type=int, default=784)
    parser.add_argument("--cols", type=int, default=512, help="a multiple of 128")
    parser.add_argument("--block", type=int, default=64, help="columns per block, of 32")
    parser.add_argument("--rounds", type=int, default=4000)
    parser.add_argument("--isa", default="native", choices=sorted(ISA_FLAGS))
    parser.add_argument("--copies", type=int, default=1, help="weight copies cycled")
    parser.add_argument("--bands", action="store_true", help="pairs in bands of rows")
    args = parser.parse_args()
    if args.copies < 1:
        sys.exit(f"--copies must be at least 1, not {args.copies}")
    if args.block % 32 or args.cols % (args.block if args.bands else 2 * args.block):
        sys.exit(
            "--block must be whole panels and --cols an even number of blocks (any with --bands)"
        )
    with tempfile.TemporaryDirectory(prefix="opgraph-gemm-pair-") as tmp:
        exe = build(Path(tmp), args)
        out = subprocess.run([str(exe), str(args.rounds)], check=True, capture_output=True)
    alone_n, pair_n, alone, pair, err, span = out.stdout.split()
    ratio = float(pair) / float(alone) if float(alone) and float(pair) else float("nan")
    half = float(alone) * args.cols / args.block / 2  # one thread's time for every block, halved
    print(
        f"{args.rows}x{args.inner}x{args.cols}, {args.isa}, per {args.block}-column block"
        f"{' (pairs in bands of rows)' if args.bands else ''}, thread CPU: "
        f"alone {float(alone) * 1e6:.1f} µs ({alone_n.decode()} of {args.rounds // 2} rounds "
        f"kept), side by side {float(pair) * 1e6:.1f} µs ({pair_n.decode()} kept): "
        f"**{ratio:.3f}x**; pair span {float(span) * 1e6:.1f} µs against half of alone "
        f"{half * 1e6:.1f}; error {err.decode()}; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
